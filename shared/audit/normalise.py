"""Turns raw API records into the common record model (the Graph ``auditLogRecord`` shape), or a quarantine entry.

A record that cannot be trusted (no id, no time, ``auditData`` that does not parse) becomes a
:class:`MalformedRecord` carrying the raw text and the reason; the rest of its page is kept.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from shared.audit.ports import AuditRecord, MalformedRecord, RecordPage
from shared.records import format_timestamp, parse_timestamp

_MAX_RAW = 64_000  # keep quarantine entries bounded even if a record is huge

# UAL AuditData.UserType (integer) -> Graph auditLogUserType (string).
_USER_TYPES = {
    0: "regular",
    1: "reserved",
    2: "admin",
    3: "dcAdmin",
    4: "system",
    5: "application",
    6: "servicePrincipal",
    7: "customPolicy",
    8: "systemPolicy",
}


def _raw_text(raw: Any) -> str:
    if isinstance(raw, str):
        return raw[:_MAX_RAW]
    try:
        return json.dumps(raw, separators=(",", ":"), default=str)[:_MAX_RAW]
    except (TypeError, ValueError):
        return repr(raw)[:_MAX_RAW]


def _camel(name: str) -> str:
    """``ExchangeItem`` -> ``exchangeItem`` (Graph's enum spelling of a UAL record type)."""
    return name[:1].lower() + name[1:] if name else name


def pascal(name: str) -> str:
    """``exchangeItem`` -> ``ExchangeItem`` (Search-UnifiedAuditLog's spelling)."""
    return name[:1].upper() + name[1:] if name else name


def _normalised_time(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return format_timestamp(parse_timestamp(value))
    except ValueError:
        return None


def _readable_id(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _readable_time(value: Any) -> datetime | None:
    text = _normalised_time(value)
    return parse_timestamp(text) if text is not None else None


def normalise_graph_record(raw: Any) -> AuditRecord | MalformedRecord:
    """Validates one item of a Graph ``records`` page; parses a string ``auditData``; times become UTC 'Z'."""
    if not isinstance(raw, dict):
        return MalformedRecord(raw=_raw_text(raw), reason="record is not a JSON object")
    record_id = _readable_id(raw.get("id"))
    created = _normalised_time(raw.get("createdDateTime"))

    def malformed(reason: str) -> MalformedRecord:
        return MalformedRecord(_raw_text(raw), reason, record_id, _readable_time(created))

    if record_id is None:
        return malformed("record has no id")
    if created is None:
        return malformed(f"record {record_id} has no valid createdDateTime")
    audit_data = raw.get("auditData")
    if isinstance(audit_data, str):
        try:
            audit_data = json.loads(audit_data)
        except json.JSONDecodeError as exc:
            return malformed(f"record {record_id} auditData is not JSON: {exc.msg}")
    if audit_data is not None and not isinstance(audit_data, dict):
        return malformed(f"record {record_id} auditData is not a JSON object")
    record = {key: value for key, value in raw.items() if not key.startswith("@odata.")}
    record["createdDateTime"] = created
    record["auditData"] = audit_data if audit_data is not None else {}
    return record


def normalise_exchange_row(row: Any) -> AuditRecord | MalformedRecord:
    """Maps a ``Search-UnifiedAuditLog`` row (``AuditData`` is a JSON string) to the Graph record shape."""
    if not isinstance(row, dict):
        return MalformedRecord(raw=_raw_text(row), reason="row is not a JSON object")

    def malformed(reason: str, data: dict[str, Any] | None = None) -> MalformedRecord:
        # The row's own columns (Identity, CreationDate) survive a broken AuditData string.
        record_id = _readable_id((data or {}).get("Id")) or _readable_id(row.get("Identity"))
        created = _readable_time((data or {}).get("CreationTime")) or _readable_time(row.get("CreationDate"))
        return MalformedRecord(_raw_text(row), reason, record_id, created)

    text = row.get("AuditData")
    if isinstance(text, dict):
        data: Any = text
    elif isinstance(text, str):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            return malformed(f"AuditData is not JSON: {exc.msg}")
    else:
        return malformed("row has no AuditData")
    if not isinstance(data, dict):
        return malformed("AuditData is not a JSON object")
    record_id = data.get("Id") or row.get("Identity")
    if not isinstance(record_id, str) or not record_id.strip():
        return malformed("AuditData has no Id", data)
    created = _normalised_time(data.get("CreationTime")) or _normalised_time(row.get("CreationDate"))
    if created is None:
        return malformed(f"record {record_id} has no valid CreationTime", data)
    row_type = row.get("RecordType")
    record_type = _camel(row_type) if isinstance(row_type, str) and row_type else str(data.get("RecordType", ""))
    user = data.get("UserId") or row.get("UserIds")
    user_type = data.get("UserType")
    return {
        "id": record_id,
        "createdDateTime": created,
        "auditLogRecordType": record_type,
        "operation": data.get("Operation") or row.get("Operations"),
        "organizationId": data.get("OrganizationId"),
        "userType": _USER_TYPES.get(user_type, str(user_type)) if isinstance(user_type, int) else user_type,
        "userId": user,
        "service": data.get("Workload"),
        "objectId": data.get("ObjectId"),
        "userPrincipalName": user,
        "clientIp": data.get("ClientIP") or data.get("ClientIPAddress"),
        "administrativeUnits": [],
        "auditData": data,
    }


def page_of(items: Iterable[Any], normalise: Callable[[Any], AuditRecord | MalformedRecord]) -> RecordPage:
    """One page of normalised records, with the ones that failed normalisation quarantined beside them."""
    page = RecordPage(records=[])
    for item in items:
        result = normalise(item)
        if isinstance(result, MalformedRecord):
            page.malformed.append(result)
        else:
            page.records.append(result)
    return page
