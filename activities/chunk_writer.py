"""Streams one chunk's pages into the sink: validated, trimmed to [start, end) and to the request's filters,
de-duplicated by id, as JSONL.

Exactly-once output under at-least-once activities: the object name depends only on (tenant, collection, window),
each attempt replaces the whole object, and trimming plus de-duplication make the content independent of the
source's boundary bleed and repeated records. Records the request's filters exclude (a filter the service ignored or
did not apply exactly) are trimmed too, when the record shows it (``shared.audit.filter_check``), and counted apart
from the time trimming (``filtered_out``). Malformed records follow the same window and de-duplication rules
(``shared.records.rules.Quarantine``) into the quarantine object. The summary sidecar is written last, so its presence
means the chunk object beside it is complete.

A Graph page arrives as its records' bytes (``shared.records.raw_page.RawPage``): they are trimmed by the times the
adapter read, de-duplicated a page at a time by the ids it read (``IdSet.add_many``) and written as they are, never
decoded (the request's filters read only the fields they check). Any other page's records are decoded once (in the
adapter), their times parsed once (``RecordPage.times``) and written once (one ``dump_lines`` call per page). Pages
are fetched and written in turn, in the activity's thread: a worker thread fetching the next page ahead
(``shared.records.prefetch``) cost about 0.3-0.5 µs of CPU a record in thread hand-offs and saved no measurable wall
time once a page takes the service 300 ms (``bench/record_path.py --variants new prefetch --page-latency 0.3``). A
record that cannot be written as UTF-8 JSON (a lone surrogate) is quarantined as unusable instead of failing the chunk.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Container, Generator, Iterable
from datetime import datetime
from itertools import compress
from typing import Any

from shared import names
from shared.audit.filter_check import FilterCheck
from shared.audit.normalise import raw_text
from shared.audit.ports import AuditRecord, MalformedRecord, RecordPage, TimeWindow
from shared.models import Chunk, ChunkSummary, JsonDict
from shared.records.json_codec import JsonEncodeError, dump_line, dump_lines
from shared.records.raw_page import RawPage, Sightings
from shared.records.rules import Deduplicator, Quarantine, format_timestamp, parse_record_time
from shared.sinks.base import ChunkSink, StoredObject, write_bytes

_MAX_RAW = 64_000


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode()


def _unusable(record: AuditRecord, exc: Exception, created: datetime | None = None) -> MalformedRecord:
    """A record the adapter passed but this writer cannot use, with whatever id and time it still has."""
    record_id = record.get("id") if isinstance(record, dict) else None
    if created is None:
        try:
            created = parse_record_time(record) if isinstance(record, dict) else None
        except ValueError:
            created = None
    try:
        text = dump_line(record)[:-1].decode()[:_MAX_RAW]
    except JsonEncodeError:
        text = raw_text(record)
    return MalformedRecord(
        text,
        f"unusable record: {exc}",
        record_id if isinstance(record_id, str) and record_id.strip() else None,
        created,
    )


class _Written:
    """The ids written from marked pages: every id the reader saw, but those seen and not written."""

    def __init__(self, seen: Container[str], unwritten: set[str]) -> None:
        self._seen, self._unwritten = seen, unwritten

    def __contains__(self, record_id: object) -> bool:
        return record_id in self._seen and record_id not in self._unwritten


class ChunkRecords:
    """The record rules of one chunk object, page by page: trim to the window, drop repeated ids, quarantine the rest.

    ``page_lines`` turns each page into the JSONL bytes of its new records; ``settle`` (once, after the last page)
    gives the quarantine. A writer that produces one object in several parts passes each part the ``seen`` ids of the
    parts before it; the counts here are this instance's own. ``check`` (None: nothing to verify) trims records inside
    the window that the request's filters exclude, counted in ``filtered_out``.
    """

    def __init__(
        self, window: TimeWindow, seen: Deduplicator | None = None, *, check: FilterCheck | None = None
    ) -> None:
        self.window = window
        self.seen = seen if seen is not None else Deduplicator()
        self.quarantine = Quarantine(window)
        self.check = check
        self.records = 0
        self.trimmed = 0
        self.filtered_out = 0
        self._duplicates_before = self.seen.duplicates_removed
        self.malformed: list[MalformedRecord] = []
        self._sightings: Sightings | None = None
        """The reader's id set, when its pages come marked (then ``seen`` holds no id)."""
        self._unwritten: set[str] = set()
        """With marked pages: the ids seen and not written (outside the window or the filters, malformed)."""
        self._own_pages = False
        """A page was de-duplicated against ``seen``: marks on later pages are not used."""

    @property
    def duplicates(self) -> int:
        return self.seen.duplicates_removed - self._duplicates_before + self.quarantine.duplicates

    def page_lines(self, page: RecordPage) -> bytes:
        """The JSONL bytes of the page's records that are inside the window and not seen before."""
        for broken in page.malformed:
            self.quarantine.add(broken)
        if isinstance(page, RawPage):
            return self._raw_lines(page)
        if self._sightings is not None:
            raise ValueError("the pages of one chunk are marked by one reader's sightings, or none is")
        self._own_pages = True
        records = page.records
        times = page.times if page.times is not None and len(page.times) == len(records) else None
        start, end = self.window.start, self.window.end
        keeps = self.check.keeps if self.check is not None else None
        inside: list[tuple[AuditRecord, str, datetime]] = []
        for index, record in enumerate(records):
            try:
                moment = times[index] if times is not None else parse_record_time(record)
                record_id = str(record["id"])
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                self.quarantine.add(_unusable(record, exc))
                continue
            if not start <= moment < end:
                self.trimmed += 1
            elif keeps is not None and not keeps(record):
                self.filtered_out += 1
            else:
                inside.append((record, record_id, moment))
        add = self.seen.add
        fresh = [record for record, record_id, _ in inside if add(record_id)]
        self.seen.duplicates_removed += len(inside) - len(fresh)
        if not fresh:
            return b""
        try:
            data = dump_lines(fresh)
        except JsonEncodeError:
            return self._one_by_one(inside, fresh)
        self.records += len(fresh)
        return data

    def _raw_lines(self, page: RawPage) -> bytes:
        """``page_lines`` of a page of record bytes: nothing is decoded, the ids are looked up as one batch (or not at
        all, when the page's reader marked which ids it saw first: ``shared.records.raw_page.Sightings``)."""
        if self._sightings is None and page.sightings is not None and not self._own_pages:
            self._sightings = page.sightings
        if self._sightings is not None:
            if page.sightings is not self._sightings:
                raise ValueError("the pages of one chunk are marked by one reader's sightings, or none is")
            kept = self._marked(page, self._kept(page))
        else:
            self._own_pages = True
            keep = self._kept(page)
            lines, ids = page.lines, page.ids
            if keep is not None:
                lines, ids = list(compress(lines, keep)), list(compress(ids, keep))
            kept = list(compress(lines, self.seen.add_many(ids)))
            self.seen.duplicates_removed += len(ids) - len(kept)
        if not kept:
            return b""
        self.records += len(kept)
        kept.append(b"")
        return b"\n".join(kept)

    def _kept(self, page: RawPage) -> list[bool] | None:
        """Which records of the page are inside the window and the filters (None: all of them); counts the others."""
        times, keep = page.times, None
        start, end = self.window.start, self.window.end
        if times and not (start <= min(times) and max(times) < end):  # usually every record of a page is inside
            keep = [start <= moment < end for moment in times]
            self.trimmed += keep.count(False)
        if self.check is not None:
            keeps = self.check.keeps_item
            inside = keep if keep is not None else [True] * len(page.lines)
            keep = [held and keeps(line) for held, line in zip(inside, page.lines, strict=True)]
            self.filtered_out += inside.count(True) - keep.count(True)
        return keep

    def _marked(self, page: RawPage, keep: list[bool] | None) -> list[Any]:
        """The records to write from a marked page: the ones seen for the first time, and the ones seen before only
        where they were not written (outside the window or the filters, malformed)."""
        unwritten = self._unwritten
        if keep is None and all(page.first):
            kept = list(page.lines)
        else:
            kept = []
            for held, line, record_id, first in zip(
                keep or [True] * len(page.lines), page.lines, page.ids, page.first, strict=True
            ):
                if not held:
                    if first:
                        unwritten.add(record_id)
                elif first:
                    kept.append(line)
                elif record_id in unwritten:
                    unwritten.discard(record_id)
                    kept.append(line)
                else:
                    self.seen.duplicates_removed += 1
        for broken, first in zip(page.malformed, page.first_malformed, strict=True):
            if first and broken.record_id is not None:
                unwritten.add(broken.record_id)
        return kept

    def _one_by_one(self, inside: list[tuple[AuditRecord, str, datetime]], fresh: list[AuditRecord]) -> bytes:
        """A page with a record that cannot be written: undo the page's de-duplication, then redo it record by record
        so the unwritable record is quarantined and a good copy of its id later in the page is still written."""
        for record in fresh:
            self.seen.discard(str(record["id"]))
        self.seen.duplicates_removed -= len(inside) - len(fresh)
        lines: list[bytes] = []
        for record, record_id, moment in inside:
            if record_id in self.seen:
                self.seen.duplicates_removed += 1
                continue
            try:
                line = dump_line(record)
            except JsonEncodeError as exc:
                self.quarantine.add(_unusable(record, exc, moment))
                continue
            self.seen.add(record_id)
            lines.append(line)
        self.records += len(lines)
        return b"".join(lines)

    def lines(self, pages: Iterable[RecordPage]) -> Generator[bytes, None, None]:
        """``page_lines`` of every page, each page fetched once the one before is written (in this thread: see the
        module docstring); the page source is closed when the sink stops reading early."""
        source = iter(pages)
        try:
            for page in source:
                data = self.page_lines(page)
                if data:
                    yield data
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()

    def settle(self) -> list[MalformedRecord]:
        """The quarantine, once every good record of the chunk is known; call it once, after the last page."""
        written: Container[str] = self.seen
        if self._sightings is not None:
            written = _Written(self._sightings.ids, self._unwritten)
        self.malformed = self.quarantine.settle(written)
        self.trimmed += self.quarantine.trimmed
        return self.malformed


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
    check: FilterCheck | None = None,
    evidence: Callable[[], tuple[JsonDict, ...]] | None = None,
) -> ChunkSummary:
    """Write the chunk object (+ quarantine when needed, + summary sidecar); returns the summary.

    ``incomplete`` and ``evidence`` (what proved the chunk whole, or why not) may be read only once every page was
    consumed: pass callables."""
    name = names.chunk_object_name(tenant_id, collection_id, chunk.start, chunk.end)
    records = ChunkRecords(chunk.window(), check=check)
    lines = records.lines(pages)
    try:
        stored = sink.write_stream(name, lines)
    finally:
        lines.close()
    malformed = records.settle()
    flagged = incomplete() if callable(incomplete) else incomplete
    summary = summarize(
        sink, name, chunk, records=records, malformed=malformed, stored=stored, incomplete=flagged, attempt=attempt
    )
    if evidence is not None:
        summary = dataclasses.replace(summary, evidence=evidence())
    write_bytes(sink, names.summary_object_name(name), _dumps(summary.to_json()))
    return summary


def summarize(
    sink: ChunkSink,
    name: str,
    chunk: Chunk,
    *,
    records: ChunkRecords,
    malformed: list[MalformedRecord],
    stored: StoredObject,
    incomplete: bool,
    attempt: int,
) -> ChunkSummary:
    """The summary of a chunk object just stored from ``records``; writes its quarantine object when any record is
    malformed (the caller writes the summary sidecar, last)."""
    quarantine = None
    if malformed:
        quarantine = names.quarantine_object_name(name)
        write_bytes(sink, quarantine, b"".join(_quarantine_line(m) + b"\n" for m in malformed))
    return ChunkSummary(
        chunk=chunk,
        records=records.records,
        trimmed=records.trimmed,
        filtered_out=records.filtered_out,
        duplicates=records.duplicates,
        malformed=len(malformed),
        untimed=sum(1 for m in malformed if m.created is None),
        blob=stored.name,
        sha256=stored.sha256,
        bytes=stored.bytes,
        incomplete=incomplete,
        quarantine_blob=quarantine,
        attempts=attempt,
    )
