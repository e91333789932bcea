"""Turns raw API records into the common record model (the Graph ``auditLogRecord`` shape), or a quarantine entry.

A record that cannot be trusted (no id, no time, ``auditData`` that does not parse) becomes a
:class:`MalformedRecord` carrying the raw text and the reason; the rest of its page is kept.

Each record's time is parsed once, here: the page carries the parsed moments beside the records
(``RecordPage.times``) for the writer's trim. An ``auditData`` string is decoded once, by ``shared.records.json_codec``.

A Graph page is not decoded at all where its records are already in the shape the output promises
(:func:`graph_page`): each record's bytes are kept as the service sent them, with only the id, the time and what kind
of value ``auditData`` is read. A record that is not in that shape is decoded and normalised here as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeAlias

from shared.audit.ports import AuditRecord, MalformedRecord, RecordPage
from shared.records.json_codec import JsonDecodeError, JsonEncodeError, dump_line
from shared.records.json_codec import loads as json_loads
from shared.records.raw_json import Heads, Item, Projection
from shared.records.raw_page import RawPage
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

    def malformed(reason: str, data: dict[str, Any] | None = None) -> MalformedRecord:
        # The row's own columns (Identity, CreationDate) survive a broken AuditData string.
        record_id = _readable_id((data or {}).get("Id")) or _readable_id(row.get("Identity"))
        created = _readable_time((data or {}).get("CreationTime")) or _readable_time(row.get("CreationDate"))
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
    record_id = data.get("Id") or row.get("Identity")
    if not isinstance(record_id, str) or not record_id.strip():
        return malformed("AuditData has no Id", data)
    created = _time(data.get("CreationTime")) or _time(row.get("CreationDate"))
    if created is None:
        return malformed(f"record {record_id} has no valid CreationTime", data)
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


_RFC3339 = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})"
_WRITTEN_TIME = re.compile(_RFC3339).fullmatch
"""A ``createdDateTime`` written as the service sent it: an RFC 3339 date-time with its offset (Graph writes 'Z')."""
_WRITTEN_TIMES = re.compile(f"(?:{_RFC3339}\n)*").fullmatch
_SEPARATORS = ((4, "-"), (7, "-"), (10, "T"), (13, ":"), (16, ":"), (19, "Z"))
_GRAPH_HEAD = Projection(("id", "createdDateTime"), kinds=("auditData",))
_GRAPH_HEADS = Heads(("id", "createdDateTime"), ("auditData",))
"""What :func:`graph_page` reads of a record: its id and time, and whether its ``auditData`` is an object."""


def _graph_line(item: Item, *, multiline: bool) -> tuple[Item, str, datetime] | None:
    """A Graph record that is written as the service sent it, with its id and time; None when it is not (it is then
    decoded and normalised as before).

    Such a record is a JSON object with a non-blank string ``id``, a ``createdDateTime`` in RFC 3339 with an offset
    and an object ``auditData``, on one line. :func:`graph_page` judges a whole page by the same rules at once.
    """
    head = _GRAPH_HEAD.read(item)
    if head is None:
        return None
    record_id, created, audit_data = head
    if audit_data != "object" or not isinstance(record_id, str) or not record_id.strip():
        return None
    if not isinstance(created, str) or _WRITTEN_TIME(created) is None:
        return None
    try:
        moment = datetime.fromisoformat(created)
    except ValueError:  # the form of a timestamp, not a real one (month 13)
        return None
    if multiline and (b"\n" in bytes(item) or b"\r" in bytes(item)):
        return None  # whitespace that would break the JSONL line: written compact, normalised
    return item, record_id, moment


def _normalised_line(item: Item) -> tuple[bytes, str, datetime] | MalformedRecord:
    """A record decoded and normalised as before (:func:`graph_item`), in the reference encoding (keys sorted)."""
    try:
        value = json_loads(bytes(item))
    except JsonDecodeError as exc:
        return MalformedRecord(raw_text(bytes(item).decode("utf-8", "replace")), f"record is not JSON: {exc.msg}")
    result = graph_item(value)
    if isinstance(result, MalformedRecord):
        return result
    record, moment = result
    try:
        line = dump_line(record)[:-1]
    except JsonEncodeError as exc:  # a lone surrogate cannot be written as UTF-8
        return MalformedRecord(raw_text(record), f"unusable record: {exc}", str(record["id"]), moment)
    return line, str(record["id"]), moment


def _written_times(texts: list[str]) -> bool:
    """Whether every text is a ``createdDateTime`` written as sent (``_WRITTEN_TIME``), checked over the page at once:
    for the form Graph writes (``2024-06-01T10:00:00Z``), by where its separators stand."""
    count = len(texts)
    if count and min(map(len, texts)) == max(map(len, texts)) == 20:
        joined = "".join(texts)
        if all(joined[at::20] == mark * count for at, mark in _SEPARATORS) and joined.isascii():
            return True  # datetime.fromisoformat then reads the digits (and refuses anything else)
    return _WRITTEN_TIMES("\n".join(texts) + "\n") is not None


def _whole_page(items: Sequence[Item], body: bytes) -> RawPage | None:
    """The page when every record in it is written as sent (read in one pass); None when any is not."""
    columns = _GRAPH_HEADS.read(body, items)
    if columns is None:
        return None
    ids, created = columns
    if not all(map(str.strip, ids)) or not _written_times(created):
        return None
    try:
        times = list(map(datetime.fromisoformat, created))
    except ValueError:
        return None
    return RawPage(items, ids, times)


def graph_page(items: Sequence[Item], *, body: bytes | None = None, multiline: bool = False) -> RawPage:
    """One Graph ``records`` page from its items' raw bytes (``shared.records.raw_json.split_page``).

    A record in the shape the output promises (see :func:`_graph_line`) is written as the service sent it; any other
    is decoded and normalised by :func:`graph_item` and written as before (keys sorted); a malformed one is
    quarantined with the same reason as before. ``body`` (the page the items were split from) lets a page whose
    records are all in that shape be read in one pass; ``multiline``: the page holds line breaks.
    """
    if body is not None and not multiline:
        whole = _whole_page(items, body)
        if whole is not None:
            return whole
    lines: list[Item] = []
    ids: list[str] = []
    times: list[datetime] = []
    malformed: list[MalformedRecord] = []
    for item in items:
        found = _graph_line(item, multiline=multiline) or _normalised_line(item)
        if isinstance(found, MalformedRecord):
            malformed.append(found)
            continue
        lines.append(found[0])
        ids.append(found[1])
        times.append(found[2])
    return RawPage(lines, ids, times, malformed)


def graph_record_page(body: dict[str, Any]) -> RawPage:
    """A ``records`` page decoded whole (a body that is not UTF-8), each record normalised as before."""
    items = body.get("value")
    lines: list[Item] = []
    ids: list[str] = []
    times: list[datetime] = []
    malformed: list[MalformedRecord] = []
    for raw in items if isinstance(items, list) else []:
        result = graph_item(raw)
        if isinstance(result, MalformedRecord):
            malformed.append(result)
            continue
        record, moment = result
        try:
            lines.append(dump_line(record)[:-1])
        except JsonEncodeError as exc:
            malformed.append(MalformedRecord(raw_text(record), f"unusable record: {exc}", str(record["id"]), moment))
            continue
        ids.append(str(record["id"]))
        times.append(moment)
    return RawPage(lines, ids, times, malformed)
