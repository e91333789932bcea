"""Audit records as the bytes the chunk writer writes: the service's own bytes wherever they are in the shape the
output promises (docs/output.md), normalised (``shared.audit.normalise``) only where they are not.

* **Graph** (:func:`graph_page`): a ``records`` page is split into its records' bytes (``shared.records.raw_json``) and
  only each record's ``id``, ``createdDateTime`` and the kind of its ``auditData`` are read. A record with a non-blank
  string id, an RFC 3339 time with its offset and an object ``auditData``, on one line, is written exactly as the
  service sent it (its member order, spacing, escapes and time text, its ``@odata.type`` annotation). Any other record
  is decoded and normalised as before (``graph_item``: annotations dropped, ``auditData`` parsed or ``{}``, the time
  in UTC 'Z', keys sorted), or quarantined with the same reason as before.
* **Exchange** (:func:`exchange_page`): a row's ``AuditData`` is a JSON string that becomes the record's ``auditData``
  object. Its text is written as the service wrote it, inside a record whose other members are mapped from the row
  and from the few ``AuditData`` members they need (read without decoding the rest), keys sorted as before; a row
  whose ``AuditData`` is not one line of UTF-8 JSON is normalised whole as before.

A page's records come back as a ``shared.records.raw_page.RawPage``: each record's bytes, id and time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from shared.audit.normalise import EXCHANGE_FIELDS, exchange_item, exchange_record, graph_item, raw_text
from shared.audit.ports import MalformedRecord
from shared.records.json_codec import JsonDecodeError, JsonEncodeError, dump_line
from shared.records.json_codec import loads as json_loads
from shared.records.raw_json import MISSING, Heads, Item, Projection
from shared.records.raw_page import RawPage

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
    return _collected(_graph_line(item, multiline=multiline) or _normalised_line(item) for item in items)


def _collected(found: Iterable[tuple[Item, str, datetime] | MalformedRecord]) -> RawPage:
    """A page of records read one by one: each its line, id and time, or quarantined."""
    lines: list[Item] = []
    ids: list[str] = []
    times: list[datetime] = []
    malformed: list[MalformedRecord] = []
    for one in found:
        if isinstance(one, MalformedRecord):
            malformed.append(one)
            continue
        lines.append(one[0])
        ids.append(one[1])
        times.append(one[2])
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


_AUDIT_DATA_HEAD = Projection(EXCHANGE_FIELDS)
_SPLICE = b'{"administrativeUnits":[],'
"""How every record line of :func:`_exchange_line` begins: ``administrativeUnits`` then ``auditData`` sort first."""


def _exchange_line(row: Any) -> tuple[bytes, str, datetime] | MalformedRecord | None:
    """A row whose ``AuditData`` text is written as it came, inside the record mapped from it; None when the text is
    not one line of UTF-8 JSON text (the row is then normalised whole)."""
    text = row.get("AuditData") if isinstance(row, dict) else None
    if not isinstance(text, str) or "\n" in text or "\r" in text:
        return None
    try:
        data = text.encode("utf-8")
        head = _AUDIT_DATA_HEAD.read(data)
    except (UnicodeEncodeError, JsonDecodeError):  # a lone surrogate, or not JSON: normalised (and quarantined)
        return None
    if head is None:
        return None
    fields = {name: value for name, value in zip(EXCHANGE_FIELDS, head, strict=True) if value is not MISSING}
    result = exchange_record(row, fields)
    if isinstance(result, MalformedRecord):
        return result
    record, moment = result
    del record["auditData"], record["administrativeUnits"]
    try:
        rest = dump_line(record)
    except JsonEncodeError:
        return None
    return _SPLICE + b'"auditData":' + data + b"," + rest[1:-2] + b"}", str(record["id"]), moment


def exchange_page(rows: Sequence[Any]) -> RawPage:
    """One page of ``Search-UnifiedAuditLog`` rows (decoded), each as the bytes of its record (see the module
    docstring) or quarantined as before."""
    return _collected(_exchange_row(row) for row in rows)


def _exchange_row(row: Any) -> tuple[bytes, str, datetime] | MalformedRecord:
    found = _exchange_line(row)
    return _normalised_row(row) if found is None else found


def _normalised_row(row: Any) -> tuple[bytes, str, datetime] | MalformedRecord:
    result = exchange_item(row)
    if isinstance(result, MalformedRecord):
        return result
    record, moment = result
    try:
        return dump_line(record)[:-1], str(record["id"]), moment
    except JsonEncodeError as exc:  # a lone surrogate cannot be written as UTF-8
        return MalformedRecord(raw_text(record), f"unusable record: {exc}", str(record["id"]), moment)
