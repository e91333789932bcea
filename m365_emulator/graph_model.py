"""The Graph audit log query resource as the emulator stores it: the create body's rules, a query's status over
time, and the stateless record-page token."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from m365_emulator.config import SERVICE_FILTER_MODES, TenantSpec
from m365_emulator.stream import RecordFilter
from m365_emulator.synth import Cursor
from m365_emulator.wire import parse_time

VERSIONS = ("v1.0", "beta")
LIST_FIELDS = (
    "recordTypeFilters",
    "operationFilters",
    "userPrincipalNameFilters",
    "ipAddressFilters",
    "objectIdFilters",
    "administrativeUnitIdFilters",
    "serviceFilters",
)
ACTIVE = frozenset({"notStarted", "queued", "running"})
KNOWN_PROPERTIES = frozenset(
    {
        # microsoft.graph.security.auditLogQuery as the SDK models generated from the service metadata describe it
        # (msgraph-sdk-python / msgraph-beta-sdk-python models/security/audit_log_query.py), plus entity's id.
        "id",
        "@odata.type",
        "displayName",
        "filterStartDateTime",
        "filterEndDateTime",
        "recordTypeFilters",
        "keywordFilter",
        "serviceFilters",
        # The single-valued form the v1.0 create doc's example shows and production clients send
        # (Microsoft-Extractor-Suite Get-UALGraph.ps1, microsoft/PAX): the service evidently accepts it.
        "serviceFilter",
        "operationFilters",
        "userPrincipalNameFilters",
        "ipAddressFilters",
        "objectIdFilters",
        "administrativeUnitIdFilters",
        "status",
        "records",
        "approximateReturnedRecordCount",
        "isRecordCountLimitExceeded",
        "recordCountLimit",
    }
)
FILTER_NOT_ALLOWED = (
    "The query specified in the URI is not valid. Query option 'Filter' is not allowed. To allow it, set the "
    "'AllowedQueryOptions' property on EnableQueryAttribute or QueryValidationSettings."
)


class BadBodyError(ValueError):
    """The create body breaks a rule; the message says which."""


@dataclass
class GraphQuery:
    id: str
    tenant: TenantSpec
    body: dict[str, Any]
    start: datetime
    end: datetime
    flt: RecordFilter
    created: float
    outcome: str  # succeeded | failed | cancelled | stuck
    queued: bool
    deleted: bool = False
    extra_delay: float = 0.0
    """This query's share of ``completion_jitter_seconds``."""
    returned: int | None = None  # records the query yields (after cap), computed once it succeeds
    limit_exceeded: bool = False
    reads: int = 0
    """Reads of ``/records`` begun (a request without ``$skiptoken``)."""
    short_at: int | None = None
    """Where the first read ends (``GraphSettings.short_read_rate``); None: it is whole. Set when it first succeeds."""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def status(self, now: float, delay: float) -> str:
        elapsed = now - self.created
        delay += self.extra_delay
        if elapsed < delay * 0.3:
            return "queued" if self.queued else "notStarted"
        if self.outcome == "stuck" or elapsed < delay:
            return "running"
        return "succeeded" if self.outcome == "vanished" else self.outcome

    def gone(self, now: float, delay: float) -> bool:
        """A vanished query (``GraphSettings.vanish_rate``) is gone (404) once it would have finished."""
        return self.outcome == "vanished" and now - self.created >= delay + self.extra_delay


def parse_create_body(
    raw: bytes, now: datetime, *, reject_unknown: bool = True, service_filter: str = "singular"
) -> tuple[dict[str, Any], datetime, datetime, RecordFilter]:
    """The body, its window and the filter the service applies; ``service_filter`` says which of ``serviceFilter``
    and ``serviceFilters`` it honours (``GraphSettings.service_filter``)."""
    if service_filter not in SERVICE_FILTER_MODES:
        raise ValueError(f"service_filter must be one of {sorted(SERVICE_FILTER_MODES)}, not {service_filter!r}")
    try:
        body = json.loads(raw or b"{}")
    except json.JSONDecodeError as exc:
        raise BadBodyError(f"Invalid request data: the body is not valid JSON ({exc.msg}).") from exc
    if not isinstance(body, dict):
        raise BadBodyError("Invalid request data: the body must be a JSON object.")
    unknown = sorted(name for name in body if name not in KNOWN_PROPERTIES)
    if unknown and reject_unknown:
        raise BadBodyError(
            f"The property '{unknown[0]}' does not exist on type 'microsoft.graph.security.auditLogQuery'. Make sure "
            "to only use property names that are defined by the type or mark the type as open type."
        )
    try:
        start = parse_time(body["filterStartDateTime"]) if body.get("filterStartDateTime") else now - timedelta(180)
        end = parse_time(body["filterEndDateTime"]) if body.get("filterEndDateTime") else now
    except ValueError as exc:
        raise BadBodyError(f"Invalid request data: {exc}") from exc
    if end <= start:
        raise BadBodyError("Invalid request data: filterEndDateTime must be later than filterStartDateTime.")
    for name in LIST_FIELDS:
        value = body.get(name)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            raise BadBodyError(f"Invalid request data: {name} must be a collection of strings.")
    for name in ("keywordFilter", "displayName", "serviceFilter"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise BadBodyError(f"Invalid request data: {name} must be a string.")
    services: list[str] = []
    if service_filter in ("plural", "both"):
        services += body.get("serviceFilters") or []
    if service_filter in ("singular", "both") and body.get("serviceFilter"):
        services.append(body["serviceFilter"])
    flt = RecordFilter.build(
        record_types=body.get("recordTypeFilters"),
        operations=body.get("operationFilters"),
        user_ids=body.get("userPrincipalNameFilters"),
        ip_addresses=body.get("ipAddressFilters"),
        object_ids=body.get("objectIdFilters"),
        administrative_unit_ids=body.get("administrativeUnitIdFilters"),
        keyword=body.get("keywordFilter"),
        services=services,
    )
    return body, start, end, flt


DISPLAY_FILTER = re.compile(r"displayName eq '((?:[^']|'')*)'")


def jitter(body: dict[str, Any], start: datetime, end: datetime, spread: float) -> float:
    """A stable pseudo-random delay in [0, spread) for this query (same window and name, same delay)."""
    if spread <= 0:
        return 0.0
    key = f"{body.get('displayName') or ''}|{start.isoformat()}|{end.isoformat()}".encode()
    return spread * int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64


def encode_token(emitted: int, cursor: Cursor, read: int = 1) -> str:
    return base64.urlsafe_b64encode(f"{emitted}:{cursor[0]}:{cursor[1]}:{read}".encode()).decode().rstrip("=")


def decode_token(token: str) -> tuple[int, Cursor, int]:
    """(records emitted before the page, the stream cursor, which read of the query the page belongs to)."""
    fields = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode().split(":")
    emitted, hour, index = fields[:3]
    read = int(fields[3]) if len(fields) > 3 else 1
    return int(emitted), (int(hour), int(index)), read


def page_key(token: str | None) -> str | None:
    """Which page of a query a ``$skiptoken`` names, whichever read it belongs to (the token of its first read)."""
    if token is None:
        return None
    emitted, cursor, _ = decode_token(token)
    return base64.urlsafe_b64encode(f"{emitted}:{cursor[0]}:{cursor[1]}".encode()).decode().rstrip("=")
