"""Turns raw API records into the common record model (the Graph ``auditLogRecord`` shape), or a quarantine entry.

A record that cannot be trusted (no id, no time, ``auditData`` that does not parse) becomes a
:class:`MalformedRecord` carrying the raw text and the reason; the rest of its page is kept.

Each record's time is parsed once, here: the page carries the parsed moments beside the records
(``RecordPage.times``) for the writer's trim. An ``auditData`` string is decoded once, by ``shared.records.json_codec``.

Records on the chunk writer's path are not normalised here but in ``shared.audit.record_lines`` (their bytes kept as
the service sent them where they are in the promised shape); what it cannot pass through comes back here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeAlias

from shared.audit.ports import AuditRecord, MalformedRecord, RecordPage
from shared.records.json_codec import JsonDecodeError
from shared.records.json_codec import loads as json_loads
from shared.records.rules import canonical_time

Normalised: TypeAlias = tuple[AuditRecord, datetime] | MalformedRecord
"""A usable record with its parsed ``createdDateTime``, or a quarantine entry."""

_MAX_RAW = 64_000  # keep quarantine entries bounded even if a record is huge

_RECORD_PROPERTIES = frozenset(
    {
        "id",
        "createdDateTime",
        "auditLogRecordType",
        "operation",
        "organizationId",
        "userType",
        "userId",
        "service",
        "objectId",
        "userPrincipalName",
        "clientIp",
        "administrativeUnits",
        "auditData",
    }
)
"""The properties of Graph's ``auditLogRecord``; any other key (``@odata.type`` above all) is looked at one by one."""

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


def raw_text(raw: Any) -> str:
    """Text for a quarantine entry: the raw value as JSON (ASCII, so any text survives), bounded in size."""
    if isinstance(raw, str):
        return raw[:_MAX_RAW]
    try:
        return json.dumps(raw, separators=(",", ":"), default=str)[:_MAX_RAW]
    except (TypeError, ValueError, RecursionError):
        try:
            return repr(raw)[:_MAX_RAW]
        except RecursionError:
            return f"<{type(raw).__name__} nested too deeply to show>"


def _camel(name: str) -> str:
    """``ExchangeItem`` -> ``exchangeItem`` (Graph's enum spelling of a UAL record type)."""
    return name[:1].lower() + name[1:] if name else name


def pascal(name: str) -> str:
    """``exchangeItem`` -> ``ExchangeItem`` (Search-UnifiedAuditLog's spelling)."""
    return name[:1].upper() + name[1:] if name else name


def _time(value: Any) -> tuple[str, datetime] | None:
    """(canonical text, moment) of a timestamp value; None when it is not one."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return canonical_time(value)
    except ValueError:
        return None


def _readable_id(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _readable_time(value: Any) -> datetime | None:
    found = _time(value)
    return found[1] if found is not None else None


def graph_item(raw: Any) -> Normalised:
    """Validates one item of a Graph ``records`` page; parses a string ``auditData``; times become UTC 'Z'."""
    if not isinstance(raw, dict):
        return MalformedRecord(raw=raw_text(raw), reason="record is not a JSON object")
    record_id = _readable_id(raw.get("id"))
    created = _time(raw.get("createdDateTime"))

    def malformed(reason: str) -> MalformedRecord:
        return MalformedRecord(raw_text(raw), reason, record_id, created[1] if created is not None else None)

    if record_id is None:
        return malformed("record has no id")
    if created is None:
        return malformed(f"record {record_id} has no valid createdDateTime")
    audit_data = raw.get("auditData")
    if isinstance(audit_data, str):
        try:
            audit_data = json_loads(audit_data)
        except JsonDecodeError as exc:
            return malformed(f"record {record_id} auditData is not JSON: {exc.msg}")
    if audit_data is not None and not isinstance(audit_data, dict):
        return malformed(f"record {record_id} auditData is not a JSON object")
    record = dict(raw)
    for key in record.keys() - _RECORD_PROPERTIES:  # a set difference in C: usually just {"@odata.type"}
        if key.startswith("@odata."):
            del record[key]
    record["createdDateTime"] = created[0]
    record["auditData"] = audit_data if audit_data is not None else {}
    return record, created[1]


def normalise_graph_record(raw: Any) -> AuditRecord | MalformedRecord:
    """:func:`graph_item` without the parsed time."""
    result = graph_item(raw)
    return result[0] if isinstance(result, tuple) else result


def exchange_item(row: Any) -> Normalised:
    """Maps a ``Search-UnifiedAuditLog`` row (``AuditData`` is a JSON string) to the Graph record shape."""
    if not isinstance(row, dict):
        return MalformedRecord(raw=raw_text(row), reason="row is not a JSON object")

    def malformed(reason: str) -> MalformedRecord:
        # The row's own columns (Identity, CreationDate) survive a broken AuditData string.
        record_id, created = _readable_id(row.get("Identity")), _readable_time(row.get("CreationDate"))
        return MalformedRecord(raw_text(row), reason, record_id, created)

    text = row.get("AuditData")
    if isinstance(text, dict):
        data: Any = text
    elif isinstance(text, str):
        try:
            data = json_loads(text)
        except JsonDecodeError as exc:
            return malformed(f"AuditData is not JSON: {exc.msg}")
    else:
        return malformed("row has no AuditData")
    if not isinstance(data, dict):
        return malformed("AuditData is not a JSON object")
    return exchange_record(row, data)


def exchange_record(row: dict[str, Any], data: dict[str, Any]) -> Normalised:
    """The Graph-shaped record of a row whose ``AuditData`` decoded to ``data`` (only the members named in
    :data:`EXCHANGE_FIELDS` are read; ``data`` is the record's ``auditData``), or its quarantine entry."""

    def malformed(reason: str) -> MalformedRecord:
        # The row's own columns (Identity, CreationDate) survive where AuditData lacks them.
        record_id = _readable_id(data.get("Id")) or _readable_id(row.get("Identity"))
        created = _readable_time(data.get("CreationTime")) or _readable_time(row.get("CreationDate"))
        return MalformedRecord(raw_text(row), reason, record_id, created)

    record_id = data.get("Id") or row.get("Identity")
    if not isinstance(record_id, str) or not record_id.strip():
        return malformed("AuditData has no Id")
    created = _time(data.get("CreationTime")) or _time(row.get("CreationDate"))
    if created is None:
        return malformed(f"record {record_id} has no valid CreationTime")
    row_type = row.get("RecordType")
    record_type = _camel(row_type) if isinstance(row_type, str) and row_type else str(data.get("RecordType", ""))
    user = data.get("UserId") or row.get("UserIds")
    user_type = data.get("UserType")
    record: AuditRecord = {
        "id": record_id,
        "createdDateTime": created[0],
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
    return record, created[1]


EXCHANGE_FIELDS = (
    "Id",
    "CreationTime",
    "RecordType",
    "Operation",
    "OrganizationId",
    "UserType",
    "UserId",
    "Workload",
    "ObjectId",
    "ClientIP",
    "ClientIPAddress",
)
"""Every ``AuditData`` member :func:`exchange_record` reads."""


def normalise_exchange_row(row: Any) -> AuditRecord | MalformedRecord:
    """:func:`exchange_item` without the parsed time."""
    result = exchange_item(row)
    return result[0] if isinstance(result, tuple) else result


def page_of(items: Iterable[Any], normalise: Callable[[Any], Normalised | AuditRecord]) -> RecordPage:
    """One page of normalised records (with their parsed times), the ones that failed quarantined beside them.

    ``normalise`` is :func:`graph_item` or :func:`exchange_item`; one that returns bare records (such as
    :func:`normalise_graph_record`) still works, and the writer then parses the times itself.
    """
    records: list[AuditRecord] = []
    times: list[datetime] | None = []
    malformed: list[MalformedRecord] = []
    for item in items:
        result = normalise(item)
        if isinstance(result, tuple):
            records.append(result[0])
            if times is not None:
                times.append(result[1])
        elif isinstance(result, MalformedRecord):
            malformed.append(result)
        else:
            records.append(result)
            times = None
    return RecordPage(records, malformed, times)
