"""Reading a window again: a settle pass or a follower re-reads windows whose first read may have missed records
that reached the audit log late.

A window has one object (``<tenant>/<collection>/chunks/<start>_<end>.jsonl``), so a read of it replaces the earlier
read's object and each record is in the output once. The object is replaced only when the new read's content differs:
the pages are staged as parts of the object (``ChunkSink.stage_part``, invisible until committed) while their SHA-256
is computed, and committed over the old object only when it differs from the earlier read's; otherwise the parts are
dropped and the object, its hash and its summary stay as they were. The summary counts the records the window gained
over its first read (``ChunkSummary.late``: the records it gained at each later read, added up; the service only adds
records to a window as they arrive, so a read never returns fewer).

An earlier read is told by the window's summary sidecar, written last by every read: a summary present means an
object complete beside it. An attempt of the first read that ran twice (its result lost) is therefore a read again
too; it finds the same records (nothing replaced) or the ones that arrived in between (counted as late, which they
are).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable

from activities.chunk_writer import ChunkRecords, _dumps, summarize, write_chunk
from shared import names
from shared.audit.filter_check import FilterCheck
from shared.audit.ports import RecordPage
from shared.models import Chunk, ChunkSummary, JsonDict
from shared.sinks.base import ChunkSink, write_bytes

_KEY = "r{:06d}"
"""Part keys of a re-read's pages (fixed width, as block ids of one blob must be)."""


def with_late(summary: ChunkSummary, previous: ChunkSummary | None) -> ChunkSummary:
    """``summary`` of a read that replaced ``previous`` (an earlier read of the window, or None), its late records
    counted: what the earlier reads counted plus what this one gained; a read by another source than the earlier
    one's (a follower's search after its feed) also says what it gained over that source (``backfilled``)."""
    if previous is None:
        return summary
    gained = max(0, summary.records - previous.records)
    backfilled = previous.backfilled
    if summary.source is not None and previous.source is not None and summary.source != previous.source:
        backfilled = {"over": previous.source, "records": gained}  # what this source found that the other missed
        if previous.incomplete_reasons:
            backfilled["why"] = previous.incomplete_reasons[0]  # why the other source's read did not prove it
    return dataclasses.replace(summary, late=previous.late + gained, backfilled=backfilled)


def earlier_read(sink: ChunkSink, name: str) -> ChunkSummary | None:
    """The summary of the earlier read of the chunk object ``name``, when there was one."""
    data = sink.read_bytes(names.summary_object_name(name))
    return ChunkSummary.from_json(json.loads(data)) if data is not None else None


def write_window(
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
    """Write a chunk's read: whole when the window was never read, else only when its content changed.

    ``check`` trims records outside the request's filters (``shared.audit.filter_check``), as a first read does;
    ``evidence`` (read once the pages are consumed) goes into the summary as it is."""
    name = names.chunk_object_name(tenant_id, collection_id, chunk.start, chunk.end)
    previous = earlier_read(sink, name)
    if previous is None:
        return write_chunk(
            sink,
            tenant_id=tenant_id,
            collection_id=collection_id,
            chunk=chunk,
            pages=pages,
            attempt=attempt,
            incomplete=incomplete,
            check=check,
            evidence=evidence,
        )
    records = ChunkRecords(chunk.window(), check=check)
    keys: list[str] = []
    digest = hashlib.sha256()
    lines = records.lines(pages)
    try:
        for data in lines:
            key = _KEY.format(len(keys))
            sink.stage_part(name, key, data)
            keys.append(key)
            digest.update(data)
    except BaseException:
        sink.discard_parts(name, keys)
        raise
    finally:
        lines.close()
    malformed = records.settle()
    flagged = incomplete() if callable(incomplete) else incomplete
    unchanged = (digest.hexdigest(), len(malformed), flagged) == (
        previous.sha256,
        previous.malformed,
        previous.incomplete,
    )
    if unchanged:
        sink.discard_parts(name, keys)
        return previous
    stored = sink.commit_parts(name, keys)
    sink.discard_parts(name, keys)
    summary = summarize(
        sink, name, chunk, records=records, malformed=malformed, stored=stored, incomplete=flagged, attempt=attempt
    )
    if evidence is not None:
        summary = dataclasses.replace(summary, evidence=evidence())
    if not malformed and previous.quarantine_blob is not None:
        sink.delete(previous.quarantine_blob)  # every record of it now reads well (or is gone from the window)
    summary = with_late(summary, previous)
    write_bytes(sink, names.summary_object_name(name), _dumps(summary.to_json()))
    return summary
