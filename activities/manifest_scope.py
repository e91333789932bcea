"""A pass's manifest over a larger range: which range it proves, which earlier failures still stand, which windows are
still provisional.

A collection's manifest proves the collection's own windows. Two things run a collection over only some windows of
a larger range and want the larger range proved: a settle pass (it reads again the provisional windows of a
collection, a day after they ended) and a follower's pass over one day of its output (the windows that closed since
its last pass, and those whose late-arrival band has passed). Their orchestration input carries a ``scope``, handed
to finalize: ``ranges``, what the manifest proves (every summary under the prefix inside them counts, never as
foreign); ``failures``, earlier passes' failures outside this pass that still stand; ``provisional``, the windows
whose object came from a read within their band before this pass.

A window is provisional when it ended less than ``AUDIT_LATENCY`` before this pass began (any read of it so far may
have missed late records), or when it was provisional before and this pass did not read it again: it was outside
the pass, its read failed, or the pass stopped early (doomed) and cannot say which windows it read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from activities.manifest_windows import union_windows
from shared.models import Chunk, ChunkSummary, JsonDict, iso, parse_iso
from shared.timeline.latency import AUDIT_LATENCY


@dataclass(frozen=True, slots=True)
class Scope:
    ranges: list[Chunk]
    failures: list[JsonDict]
    provisional: list[Chunk]
    sampled: list[Chunk] | None = None
    """A follower reading the feed: the windows of the range its reconcile read again by search (None: it does not
    read the feed, the manifest has no ``reconciled``)."""


def scope_of(payload: JsonDict) -> Scope | None:
    """The finalize payload's ``scope`` (None for a plain collection)."""
    raw: Any = payload.get("scope")
    if not isinstance(raw, dict) or not raw.get("ranges"):
        return None
    return Scope(
        ranges=[Chunk(parse_iso(r["start"]), parse_iso(r["end"])) for r in raw["ranges"]],
        failures=list(raw.get("failures") or []),
        provisional=union_windows(list(raw.get("provisional") or [])),
        sampled=[Chunk.from_json(c) for c in raw["sampled"]] if isinstance(raw.get("sampled"), list) else None,
    )


def reconciled_section(summaries: list[ChunkSummary], sampled: list[Chunk]) -> JsonDict:
    """A feed follower's day: the windows its reconcile sampled (read by the feed, then by search) and the records
    search found there that the feed had missed; every window search read after the feed (a sample, or a window the
    feed could not prove) and the records it added."""
    after = [s for s in summaries if s.backfilled is not None]
    chosen = set(sampled)
    return {
        "sampled": [c.span_json() for c in sampled],
        "missed": sum(int((s.backfilled or {}).get("records", 0)) for s in after if s.chunk in chosen),
        "backfilledWindows": len(after),
        "backfilledRecords": sum(int((s.backfilled or {}).get("records", 0)) for s in after),
    }


def _overlaps(chunk: Chunk, windows: list[Chunk]) -> bool:
    return any(w.start < chunk.end and chunk.start < w.end for w in windows)


def _inside(chunk: Chunk, windows: list[Chunk]) -> bool:
    return any(w.start <= chunk.start and chunk.end <= w.end for w in windows)


def provisional_summaries(
    summaries: list[ChunkSummary], scope: Scope, payload: JsonDict, started_at: datetime | None
) -> list[ChunkSummary]:
    """The summaries whose window may still gain late records after this scoped pass."""
    passed = [Chunk(parse_iso(r["start"]), parse_iso(r["end"])) for r in payload.get("ranges") or []]
    failed = [Chunk.from_json(f["chunk"]) for f in payload.get("failures") or []]
    doomed = payload.get("status") == "Failed"
    cutoff = (started_at - AUDIT_LATENCY).replace(microsecond=0) if started_at is not None else None
    found: list[ChunkSummary] = []
    for summary in summaries:
        chunk = summary.chunk
        by_time = cutoff is None or chunk.end > cutoff
        read_again = not doomed and _inside(chunk, passed) and not _overlaps(chunk, failed)
        if by_time or (not read_again and _overlaps(chunk, scope.provisional)):
            found.append(summary)
    return found


def latency_section(provisional: list[ChunkSummary]) -> JsonDict:
    """The manifest's ``latency`` of a scoped pass: the provisional windows (merged) and when reading them again is
    final."""
    merged = union_windows([s.chunk.span_json() for s in provisional])
    return {
        "assumedHours": AUDIT_LATENCY.total_seconds() / 3600,
        "provisional": [c.span_json() for c in merged],
        "settledAfter": iso(max(c.end for c in merged) + AUDIT_LATENCY) if merged else None,
        "final": not merged,
    }
