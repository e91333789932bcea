"""The synthetic tenant: deterministic audit records, computable one hour at a time.

Each hour bucket of a tenant is a pure function of (tenant_id, seed, hour): how many records it holds (Poisson-like
around the hourly rate, times any burst multiplier) and what they are. So the ground truth of any window is computed
from the hours it touches, never from the whole tenant, and every API view (Graph pages, Exchange sessions, the
ground-truth helper) walks the same time-ordered stream.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from m365_emulator.config import TenantSpec

HOUR = 3600
Cursor = tuple[int, int]
"""(hour number, index inside that hour) of the next record to consider."""


@dataclass(frozen=True)
class Template:
    operation: str
    graph_type: str  # auditLogRecordType (camelCase) as Graph returns it
    exchange_type: str  # RecordType as Search-UnifiedAuditLog returns it
    type_code: int  # AuditData.RecordType
    workload: str
    weight: int


TEMPLATES: tuple[Template, ...] = (
    Template("MailItemsAccessed", "exchangeItemAggregated", "ExchangeItemAggregated", 50, "Exchange", 30),
    Template("Send", "exchangeItem", "ExchangeItem", 2, "Exchange", 8),
    Template("New-InboxRule", "exchangeAdmin", "ExchangeAdmin", 1, "Exchange", 1),
    Template("FileAccessed", "sharePointFileOperation", "SharePointFileOperation", 6, "SharePoint", 20),
    Template("FileDownloaded", "sharePointFileOperation", "SharePointFileOperation", 6, "SharePoint", 6),
    Template("FileModified", "sharePointFileOperation", "SharePointFileOperation", 6, "SharePoint", 8),
    Template(
        "UserLoggedIn", "azureActiveDirectoryStsLogon", "AzureActiveDirectoryStsLogon", 15, "AzureActiveDirectory", 15
    ),
    Template(
        "UserLoginFailed", "azureActiveDirectoryStsLogon", "AzureActiveDirectoryStsLogon", 15, "AzureActiveDirectory", 3
    ),
    Template("MessageSent", "microsoftTeams", "MicrosoftTeams", 25, "MicrosoftTeams", 7),
    Template("MemberAdded", "microsoftTeams", "MicrosoftTeams", 25, "MicrosoftTeams", 2),
)
_WEIGHTS = [t.weight for t in TEMPLATES]
_FIRST = ("adele", "alex", "megan", "nestor", "patti", "lynne", "joni", "grady", "isaiah", "lidia", "miriam", "diego")
_LAST = (
    "vance",
    "wilber",
    "bowen",
    "wilke",
    "fernandez",
    "robbins",
    "sherman",
    "archie",
    "langer",
    "holloway",
    "graham",
)
_FILES = ("Budget.xlsx", "Roadmap.pptx", "Contract.docx", "Notes.txt", "Design.vsdx", "Report.pdf")
_SITES = ("Finance", "Marketing", "Engineering", "Legal")
_AGENTS = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64)", "Microsoft Office/16.0", "OneDriveMpc-Transform_Thumbnail/1.0")


def _guid(*parts: object) -> str:
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


@dataclass(frozen=True)
class User:
    upn: str
    key: str
    home_ip: str
    admin_units: tuple[str, ...]


@functools.lru_cache(maxsize=64)
def tenant_users(spec: TenantSpec) -> tuple[User, ...]:
    rng = random.Random(f"{spec.tenant_id}:{spec.seed}:users")
    units = [_guid(spec.tenant_id, spec.seed, "au", n) for n in range(3)]
    users = []
    for n in range(spec.user_count):
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        upn = f"{first}.{last}{n}@{spec.domain}"
        ip = f"{rng.choice(('203.0.113', '198.51.100'))}.{rng.randrange(1, 255)}"
        unit = (units[n % 4],) if n % 4 < 3 else ()
        users.append(User(upn, _guid(spec.tenant_id, "user", n), ip, unit))
    return tuple(users)


@dataclass(frozen=True)
class SynthRecord:
    id: str
    epoch: int
    template: Template
    service: str
    user: User
    client_ip: str
    object_id: str
    audit_data: dict[str, Any] = field(hash=False, compare=False)

    @property
    def created(self) -> datetime:
        return datetime.fromtimestamp(self.epoch, UTC)

    @functools.cached_property
    def created_text(self) -> str:
        """``created`` as the APIs write it (whole seconds, 'Z'); computed once per record."""
        return self.created.strftime("%Y-%m-%dT%H:%M:%SZ")

    @functools.cached_property
    def _audit_json(self) -> str:
        return json.dumps(self.audit_data, separators=(",", ":"))

    def audit_text(self) -> str:
        """``AuditData`` as the JSON string Exchange rows carry (serialised once per record)."""
        return self._audit_json

    def graph_record(self) -> dict[str, Any]:
        """The record as Graph ``/records`` returns it (auditData as an object)."""
        return {
            "@odata.type": "#microsoft.graph.security.auditLogRecord",
            "id": self.id,
            "createdDateTime": self.created_text,
            "auditLogRecordType": self.template.graph_type,
            "operation": self.template.operation,
            "organizationId": self.audit_data["OrganizationId"],
            "userType": "regular",
            "userId": self.user.upn,
            "service": self.service,
            "objectId": self.object_id,
            "userPrincipalName": self.user.upn,
            "clientIp": self.client_ip,
            "administrativeUnits": list(self.user.admin_units),
            "auditData": {"@odata.type": "#microsoft.graph.security.auditData", **self.audit_data},
        }


def hour_count(spec: TenantSpec, hour: int) -> int:
    """Records generated for this hour bucket before the retention cut (deterministic, Poisson-like)."""
    start = datetime.fromtimestamp(hour * HOUR, UTC)
    mean = spec.records_per_hour
    for burst in spec.bursts:
        if burst.start <= start < burst.end:
            mean *= burst.multiplier
    if mean <= 0:
        return 0
    rng = random.Random(f"{spec.tenant_id}:{spec.seed}:{hour}:n")
    if mean < 30:  # Knuth's method: exact Poisson for small means
        limit, k, p = math.exp(-mean), 0, 1.0
        while True:
            p *= rng.random()
            if p <= limit:
                return k
            k += 1
    return max(0, round(rng.gauss(mean, math.sqrt(mean))))


@functools.lru_cache(maxsize=96)
def hour_records(spec: TenantSpec, hour: int) -> tuple[SynthRecord, ...]:
    """Every record of one hour bucket, ordered by (time, id)."""
    count = hour_count(spec, hour)
    rng = random.Random(f"{spec.tenant_id}:{spec.seed}:{hour}:r")
    users = tenant_users(spec)
    offsets = sorted(rng.randrange(HOUR) for _ in range(count))
    records = [_make_record(spec, hour, n, hour * HOUR + off, rng, users) for n, off in enumerate(offsets)]
    records.sort(key=lambda r: (r.epoch, r.id))
    if spec.retention_start is not None:
        cut = spec.retention_start.timestamp()
        records = [r for r in records if r.epoch >= cut]
    return tuple(records)


def _make_record(  # noqa: PLR0917 - private helper called from one place
    spec: TenantSpec, hour: int, n: int, epoch: int, rng: random.Random, users: tuple[User, ...]
) -> SynthRecord:
    template = rng.choices(TEMPLATES, weights=_WEIGHTS)[0]
    user = rng.choice(users)
    ip = user.home_ip if rng.random() < 0.9 else f"192.0.2.{rng.randrange(1, 255)}"
    record_id = _guid(spec.tenant_id, spec.seed, hour, n)
    created = datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    service = template.workload
    data: dict[str, Any] = {
        "CreationTime": created,
        "Id": record_id,
        "Operation": template.operation,
        "OrganizationId": spec.tenant_id,
        "RecordType": template.type_code,
        "ResultStatus": "Succeeded",
        "UserKey": user.key,
        "UserType": 0,
        "Version": 1,
        "Workload": service,
        "ClientIP": ip,
        "UserId": user.upn,
    }
    tenant_label = spec.domain.split(".")[0]
    op = template.operation
    if op == "MailItemsAccessed":
        object_id = ""
        data.update(
            MailboxOwnerUPN=user.upn,
            LogonType=0,
            ClientInfoString="Client=REST;Client=RESTSystem;",
            OperationProperties=[{"Name": "MailAccessType", "Value": rng.choice(("Bind", "Sync"))}],
            Folders=[{"Path": "\\Inbox", "FolderItems": [{"InternetMessageId": f"<{record_id[:8]}@{spec.domain}>"}]}],
        )
    elif op == "Send":
        object_id = f"<{record_id[:13]}@{spec.domain}>"
        data.update(Item={"Id": record_id[:18], "InternetMessageId": object_id, "Subject": "Quarterly update"})
    elif op == "New-InboxRule":
        object_id = f"{user.upn}\\Rule {n}"
        forward = f"external{rng.randrange(100)}@example.net"
        data.update(
            Parameters=[{"Name": "Name", "Value": f"Rule {n}"}, {"Name": "ForwardTo", "Value": forward}],
            ExternalAccess=False,
            OrganizationName=spec.domain,
        )
    elif template.workload == "SharePoint":
        file_name = rng.choice(_FILES)
        if rng.random() < 0.4:
            service = "OneDrive"
            site = f"https://{tenant_label}-my.sharepoint.com/personal/{user.upn.replace('.', '_').replace('@', '_')}"
            folder = "Documents"
        else:
            site = f"https://{tenant_label}.sharepoint.com/sites/{rng.choice(_SITES)}"
            folder = "Shared Documents"
        object_id = f"{site}/{folder}/{file_name}"
        data.update(
            Workload=service,
            SiteUrl=f"{site}/",
            SourceRelativeUrl=folder,
            SourceFileName=file_name,
            SourceFileExtension=file_name.rsplit(".", 1)[-1],
            ItemType="File",
            EventSource="SharePoint",
            UserAgent=rng.choice(_AGENTS),
            ListItemUniqueId=_guid(record_id, "item"),
        )
    elif template.workload == "AzureActiveDirectory":
        object_id = "00000003-0000-0000-c000-000000000000"
        failed = op == "UserLoginFailed"
        data.update(
            ResultStatus="Failed" if failed else "Success",
            AzureActiveDirectoryEventType=1,
            ApplicationId="00000002-0000-0ff1-ce00-000000000000",
            ActorIpAddress=ip,
            ExtendedProperties=[
                {"Name": "UserAgent", "Value": rng.choice(_AGENTS)},
                {"Name": "RequestType", "Value": "OAuth2:Token"},
            ],
        )
        if failed:
            data["LogonError"] = "InvalidUserNameOrPassword"
    else:  # Teams
        team = f"Team {rng.choice(_SITES)}"
        object_id = team
        data.update(TeamName=team, ChannelName="General", MessageId=str(epoch * 1000))
        if op == "MemberAdded":
            data["Members"] = [{"UPN": rng.choice(users).upn, "Role": 1}]
    data["ObjectId"] = object_id
    return SynthRecord(record_id, epoch, template, service, user, ip, object_id, data)
