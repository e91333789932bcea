"""Streams one chunk's pages into the sink: validated, trimmed to [start, end), de-duplicated by id, as JSONL.

Exactly-once output under at-least-once activities: the object name depends only on (tenant, collection, window),
each attempt replaces the whole object, and trimming plus de-duplication make the content independent of the
source's boundary bleed and repeated records. Malformed records follow the same window and de-duplication rules
(``shared.records.Quarantine``) into the quarantine object. The summary sidecar is written last, so its presence
means the chunk object beside it is complete.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from shared import names
from shared.audit.ports import AuditRecord, MalformedRecord, RecordPage, TimeWindow
from shared.models import Chunk, ChunkSummary
from shared.records import Deduplicator, Quarantine, format_timestamp, parse_record_time
from shared.sinks.base import ChunkSink, write_bytes


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode()


class _Counts:
    def __init__(self, chunk: Chunk) -> None:
        self.records = 0
        self.trimmed = 0
        self.duplicates = 0
        self.quarantine = Quarantine(chunk.window())
        self.malformed: list[MalformedRecord] = []


def _unusable(record: AuditRecord, exc: Exception) -> MalformedRecord:
    """A record the adapter passed but this writer cannot use, with whatever id and time it still has."""
    record_id = record.get("id") if isinstance(record, dict) else None
    try:
        created = parse_record_time(record) if isinstance(record, dict) else None
    except ValueError:
        created = None
    return MalformedRecord(
        _dumps(record).decode()[:64_000],
        f"unusable record: {exc}",
        record_id if isinstance(record_id, str) and record_id.strip() else None,
        created,
    )


class Filter(Protocol):
    """What removes repeated records (``shared.records.Deduplicator``, or one that also knows earlier parts)."""

    duplicates_removed: int

    def filter(self, records: Iterable[AuditRecord]) -> tuple[list[AuditRecord], int]: ...


def page_lines(page: RecordPage, window: TimeWindow, dedupe: Filter, counts: _Counts) -> bytes:
    """One page as JSONL: malformed and unusable records to the quarantine, bleed trimmed, repeats removed."""
    for broken in page.malformed:
        counts.quarantine.add(broken)
    kept: list[AuditRecord] = []
    for record in page.records:
        try:
            moment = parse_record_time(record)
            str(record["id"])
        except (KeyError, TypeError, ValueError) as exc:
            counts.quarantine.add(_unusable(record, exc))
            continue
        if window.contains(moment):
            kept.append(record)
        else:
            counts.trimmed += 1
    unique, _ = dedupe.filter(kept)
    counts.records += len(unique)
    return b"".join(_dumps(record) + b"\n" for record in unique)


def _jsonl(pages: Iterable[RecordPage], chunk: Chunk, counts: _Counts) -> Iterator[bytes]:
    dedupe = Deduplicator()
    window = chunk.window()
    for page in pages:
        lines = page_lines(page, window, dedupe, counts)
        if lines:
            yield lines
    counts.malformed = counts.quarantine.settle(dedupe)
    counts.trimmed += counts.quarantine.trimmed
    counts.duplicates = dedupe.duplicates_removed + counts.quarantine.duplicates


def _quarantine_line(record: MalformedRecord) -> bytes:
    created = format_timestamp(record.created) if record.created is not None else None
    return _dumps({"raw": record.raw, "reason": record.reason, "id": record.record_id, "createdDateTime": created})


def write_chunk(
    sink: ChunkSink,
    *,
    tenant_id: str,
    collection_id: str,
    chunk: Chunk,
    pages: Iterable[RecordPage],
    attempt: int,
    incomplete: bool | Callable[[], bool] = False,
) -> ChunkSummary:
    """Write the chunk object (+ quarantine when needed, + summary sidecar); returns the summary."""
    name = names.chunk_object_name(tenant_id, collection_id, chunk.start, chunk.end)
    counts = _Counts(chunk)
    stored = sink.write_stream(name, _jsonl(pages, chunk, counts))
    quarantine = None
    if counts.malformed:
        quarantine = names.quarantine_object_name(name)
        write_bytes(sink, quarantine, b"".join(_quarantine_line(m) + b"\n" for m in counts.malformed))
    summary = ChunkSummary(
        chunk=chunk,
        records=counts.records,
        trimmed=counts.trimmed,
        duplicates=counts.duplicates,
        malformed=len(counts.malformed),
        untimed=sum(1 for m in counts.malformed if m.created is None),
        blob=stored.name,
        sha256=stored.sha256,
        bytes=stored.bytes,
        incomplete=incomplete() if callable(incomplete) else incomplete,
        quarantine_blob=quarantine,
        attempts=attempt,
    )
    write_bytes(sink, names.summary_object_name(name), _dumps(summary.to_json()))
    return summary
