"""Pure helpers over normalised audit records: record time, window trimming, de-duplication by record id.

The audit APIs return records slightly outside the requested window (Purview "bleed" past the end date) and
occasionally the same record twice; these helpers make a chunk's output exact and say how much they removed.
Malformed records obey the same rules (``Quarantine``), so a broken record is counted once, in its own window.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container, Iterable
from datetime import UTC, datetime

from shared.records.id_set import IdSet
from shared.values import AuditRecord, MalformedRecord, TimeWindow

_CANONICAL = re.compile(r"[1-9][0-9]{3}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{0,5}[1-9])?Z").fullmatch
"""Text that ``format_timestamp`` writes (a 4-digit year, fractions without trailing zeros, 'Z')."""
_NAIVE_SECONDS = re.compile(r"[1-9][0-9]{3}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}").fullmatch
"""UAL ``CreationTime`` as Exchange writes it: whole seconds, no offset (UTC); canonical once 'Z' is added."""


def parse_timestamp(text: str) -> datetime:
    """Parses an ISO-8601 timestamp; a value without offset is UTC (as UAL ``CreationTime`` is)."""
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    # Graph may send 7 fractional digits (.NET ticks); Python accepts at most 6.
    if "." in value:
        head, _, rest = value.partition(".")
        digits = len(rest) - len(rest.lstrip("0123456789"))
        if digits > 6:
            rest = rest[:6] + rest[digits:]
        value = f"{head}.{rest}"
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def format_timestamp(moment: datetime) -> str:
    """UTC ISO-8601 with a 'Z' suffix; fractional seconds only when present."""
    utc = moment.astimezone(UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond:06d}".rstrip("0")
    return text + "Z"


def canonical_time(text: str) -> tuple[str, datetime]:
    """``(format_timestamp(moment), moment)`` for a timestamp text, parsed once.

    Text already in ``format_timestamp``'s form (what Graph sends, and what the normalisers write) is its own
    canonical form and is parsed without the general path's rewriting.

    Raises:
        ValueError: not a timestamp.
    """
    if _CANONICAL(text) is not None:
        return text, datetime.fromisoformat(text)
    if _NAIVE_SECONDS(text) is not None:
        return text + "Z", datetime.fromisoformat(text).replace(tzinfo=UTC)
    moment = parse_timestamp(text)
    return format_timestamp(moment), moment


def parse_record_time(record: AuditRecord) -> datetime:
    """The record's ``createdDateTime`` as an aware UTC datetime.

    Raises:
        ValueError: the field is missing or not a timestamp.
    """
    value = record.get("createdDateTime")
    if not isinstance(value, str) or not value.strip():
        raise ValueError("record has no createdDateTime")
    return parse_timestamp(value)


def trim_to_window(records: Iterable[AuditRecord], window: TimeWindow) -> tuple[list[AuditRecord], int]:
    """Keeps the records whose time is inside [start, end); returns them and how many were removed."""
    kept: list[AuditRecord] = []
    removed = 0
    for record in records:
        if window.contains(parse_record_time(record)):
            kept.append(record)
        else:
            removed += 1
    return kept, removed


class Deduplicator(IdSet):
    """Drops records whose ``id`` was already seen by this instance (streaming, page after page).

    Memory: the ids of the chunk being written, in a compact exact set (``shared.records.id_set``: 21-43 bytes per GUID
    id, ~40 MB at most for a million records); create one per chunk, not per collection.
    """

    def __init__(self) -> None:
        super().__init__()
        self.duplicates_removed = 0

    def first_time(self, record_id: str) -> bool:
        """Adds the id; True when it is new, else counts a duplicate."""
        if self.add(record_id):
            return True
        self.duplicates_removed += 1
        return False

    def filter(self, records: Iterable[AuditRecord]) -> tuple[list[AuditRecord], int]:
        """Returns (records not seen before, duplicates removed from this batch)."""
        before = self.duplicates_removed
        kept = [record for record in records if self.first_time(str(record["id"]))]
        return kept, self.duplicates_removed - before


def quarantine_key(record_id: str | None, raw: str) -> str:
    """What identifies a malformed record across pages and chunks: its id, or a hash of its raw text without one."""
    return (
        record_id if record_id is not None else "sha256:" + hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()
    )


class Quarantine:
    """The malformed records of one chunk, kept under the rules that make the good records exact.

    * A record whose time can be read is the chunk's only if that time is inside the window; otherwise it is bleed
      (a neighbour's record, or one past the collection's end) and counts as trimmed, like a good record would.
    * Each record is kept once (by ``quarantine_key``); a repeat counts as a duplicate.
    * A record whose id also arrived intact in this chunk is output already: its broken copy is a duplicate too.

    A record whose time cannot be read cannot be placed in any window. It is kept here ("untimed") and the manifest
    counts it once for the whole collection by its key, however many chunks' queries returned it.
    """

    def __init__(self, window: TimeWindow) -> None:
        self._window = window
        self._kept: dict[str, MalformedRecord] = {}
        self.trimmed = 0
        self.duplicates = 0

    def add(self, record: MalformedRecord) -> None:
        if record.created is not None and not self._window.contains(record.created):
            self.trimmed += 1
            return
        key = quarantine_key(record.record_id, record.raw)
        if key in self._kept:
            self.duplicates += 1
            return
        self._kept[key] = record

    def settle(self, good_ids: Container[str]) -> list[MalformedRecord]:
        """The records to quarantine, once every good record of the chunk is known; call it once."""
        kept: list[MalformedRecord] = []
        for record in self._kept.values():
            if record.record_id is not None and record.record_id in good_ids:
                self.duplicates += 1
            else:
                kept.append(record)
        return kept
