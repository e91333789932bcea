"""The summaries a manifest reads and the windows they cover: the lower layer of ``activities.manifest``,
``activities.chain_manifest`` and ``activities.manifest_scope``, which all build on it (and never on each other
backwards).
"""

from __future__ import annotations

import json
from datetime import datetime

from shared.models import Chunk, ChunkSummary, JsonDict, parse_iso
from shared.sinks.base import ChunkSink

_SUMMARY_SUFFIX = ".summary.json"


def load_summaries(sink: ChunkSink, prefix: str) -> list[ChunkSummary]:
    summaries: list[ChunkSummary] = []
    for name in sink.list_names(prefix + "chunks/"):
        if name.endswith(_SUMMARY_SUFFIX):
            data = sink.read_bytes(name)
            if data is not None:
                summaries.append(ChunkSummary.from_json(json.loads(data)))
    return sorted(summaries, key=lambda s: (s.chunk.start, s.chunk.end))


def drop_superseded(summaries: list[ChunkSummary]) -> tuple[list[ChunkSummary], list[ChunkSummary]]:
    """(kept, superseded): a summary whose window contains a finer chunk's window was replaced by its split.

    An attempt can write a chunk's object and lose its result (a crash after the write); if the retry then finds the
    window over the source's cap (late records), the window is split and its halves are written too. Listing both
    would count those records twice, so the manifest keeps the finest windows only.
    """
    # Windows are nested or disjoint (plan windows tile the range; splits halve a window), and one window has one
    # object. Ordered by start, widest first, a window is superseded exactly when the next one starts inside it.
    ordered = sorted(summaries, key=lambda s: (s.chunk.start, -s.chunk.seconds))
    kept: list[ChunkSummary] = []
    superseded: list[ChunkSummary] = []
    for summary, following in zip(ordered, [*ordered[1:], None], strict=False):
        inside = following is not None and following.chunk.start < summary.chunk.end
        (superseded if inside else kept).append(summary)
    return kept, superseded


def split_foreign(
    summaries: list[ChunkSummary], ranges: list[tuple[datetime, datetime]]
) -> tuple[list[ChunkSummary], list[ChunkSummary]]:
    """(own, foreign): a summary is this collection's only when its window lies inside one of the windows the
    collection covers (its plan's range, or a retry's explicit windows). Anything else under the prefix was left by
    another run that used the same collectionId (a purged instance, another task hub): listed, never counted.

    A window inside the ranges cannot be told apart from this run's by its place alone (an earlier run with a finer
    interval tiles the same range); the HTTP starter refuses a collectionId whose prefix already holds output, so
    such objects only appear when someone wrote them there while this run ran.
    """
    own: list[ChunkSummary] = []
    foreign: list[ChunkSummary] = []
    for summary in summaries:
        inside = any(start <= summary.chunk.start and summary.chunk.end <= end for start, end in ranges)
        (own if inside else foreign).append(summary)
    return own, foreign


def coverage_gaps(start: datetime, end: datetime, covered: list[Chunk]) -> list[Chunk]:
    """Parts of [start, end) that no window in ``covered`` includes."""
    gaps: list[Chunk] = []
    cursor = start
    for chunk in sorted(covered, key=lambda c: c.start):
        if chunk.start > cursor:
            gaps.append(Chunk(cursor, min(chunk.start, end)))
        cursor = max(cursor, chunk.end)
        if cursor >= end:
            break
    if cursor < end:
        gaps.append(Chunk(cursor, end))
    return gaps


def union_windows(entries: list[JsonDict]) -> list[Chunk]:
    """The union of ``{"start", "end"}`` windows as disjoint windows in order (touching ones merged)."""
    merged: list[Chunk] = []
    for start, end in sorted((parse_iso(e["start"]), parse_iso(e["end"])) for e in entries):
        if merged and start <= merged[-1].end:
            merged[-1] = Chunk(merged[-1].start, max(merged[-1].end, end))
        else:
            merged.append(Chunk(start, end))
    return merged
