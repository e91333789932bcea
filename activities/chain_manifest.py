"""The chain section of a retry link's manifest: the proof over the root's whole range, across every link.

A retry chain ``root -> root-retry-1 -> ...`` writes each link under its own prefix. Its output is every link's
summarised chunks, a newer link winning where its chunks overlap an older link's: an activity of a terminated link
may finish a window after the next link was planned over it, and the newer link's chunk of that time is the one
kept (windows are nested or disjoint, so an older chunk either lies inside a newer one, holds newer ones, or is
clear of them). Inside one link the finest windows win (``drop_superseded``), as in the link's own manifest.

Everything here is read from storage by the finalize activity (the summaries' JSON under each link's prefix); the
orchestrator only passes the link's request, which carries the chain's facts: ``retryRoot``, ``retryGeneration``,
``rootRanges`` (the root's ranges, copied from link to link) and ``chainExpired`` (every link's expired windows).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime

from activities.manifest_windows import coverage_gaps, drop_superseded, load_summaries, split_foreign, union_windows
from shared import names
from shared.models import Chunk, ChunkSummary, JsonDict, iso, parse_iso
from shared.sinks.base import ChunkSink

Window = tuple[datetime, datetime]

NO_ROOT_RANGES = (
    "this retry was started before retry-failed carried the root's ranges (rootRanges) in a link's request, so "
    "the root's range cannot be proved from here; its own section covers its own windows"
)


@dataclass(frozen=True, slots=True)
class ChainSection:
    """The manifest's ``chain`` (None when it cannot be computed) and, then, why."""

    section: JsonDict | None
    reason: str | None = None

    def headline(self) -> JsonDict | None:
        """What the orchestrator output (and the summary API) carries: small, whatever the chain's size."""
        if self.section is None:
            return None
        chain = self.section
        counts = {key: len(chain[key]) for key in ("gaps", "failures", "expired", "superseded")}
        return {"root": chain["root"], "links": len(chain["links"]), "totals": chain["totals"], "counts": counts}


def chain_section(sink: ChunkSink, payload: JsonDict, own: list[ChunkSummary]) -> ChainSection:
    """The chain section of the retry link that ``payload`` (the finalize input) finalizes; ``own``: the link's
    summaries inside its own windows, as its manifest read them (older links' are read here)."""
    request = payload.get("request")
    request = request if isinstance(request, dict) else {}
    root, generation = request.get("retryRoot"), request.get("retryGeneration")
    if not (isinstance(root, str) and names.is_safe_id(root) and isinstance(generation, int) and generation >= 1):
        return ChainSection(None, "the link's request names no retry chain (retryRoot, retryGeneration)")
    links = [root] + [names.retry_collection_id(root, g) for g in range(1, generation + 1)]
    if links[-1] != payload["collectionId"]:
        return ChainSection(None, f"the request's chain ends at {links[-1]}, not at {payload['collectionId']}")
    root_ranges = request.get("rootRanges")
    if not isinstance(root_ranges, list) or not root_ranges:
        return ChainSection(None, NO_ROOT_RANGES)
    ranges = [Chunk(parse_iso(r["start"]), parse_iso(r["end"])) for r in root_ranges]
    kept, superseded = _newest_wins(sink, str(payload["tenantId"]), links, [(c.start, c.end) for c in ranges], own)
    failures = list(payload.get("failures") or [])
    expired = union_windows([*(request.get("chainExpired") or []), *(request.get("expired") or [])])
    accounted = [s.chunk for _, s in kept] + [Chunk.from_json(f["chunk"]) for f in failures] + expired
    gaps = [gap.to_json() for r in ranges for gap in coverage_gaps(r.start, r.end, accounted)]
    summaries = [s for _, s in kept]
    return ChainSection(
        {
            "root": root,
            "links": links,
            "ranges": [r.span_json() for r in ranges],
            "windows": [
                {
                    "start": iso(s.chunk.start),
                    "end": iso(s.chunk.end),
                    "link": link,
                    "blob": s.blob,
                    "records": s.records,
                    "bytes": s.bytes,
                    "incomplete": s.incomplete,
                }
                for link, s in kept
            ],
            "totals": {
                "chunks": len(summaries),
                "records": sum(s.records for s in summaries),
                "bytes": sum(s.bytes for s in summaries),
                "incompleteChunks": sum(1 for s in summaries if s.incomplete),
            },
            "gaps": gaps,
            "failures": failures,
            "expired": [c.span_json() for c in expired],
            "superseded": sorted(superseded),
        }
    )


def _newest_wins(
    sink: ChunkSink, tenant: str, links: list[str], root_ranges: list[Window], own: list[ChunkSummary]
) -> tuple[list[tuple[str, ChunkSummary]], list[str]]:
    """(kept (link, summary) in time order, the summarised objects no one keeps): newest link first, a chunk is kept
    unless it overlaps one a newer link kept. Kept chunks never overlap each other, so, sorted by start, only the
    last one starting before a chunk's end can overlap it."""
    kept: list[tuple[str, ChunkSummary]] = []
    superseded: list[str] = []
    for link in reversed(links):
        # The link being finalized counts inside its own windows (``own``, as its own section does), older links
        # inside the root's ranges. Anything else under a prefix is another run's, listed as foreign by its manifest.
        if link == links[-1]:
            found = own
        else:
            found, _ = split_foreign(load_summaries(sink, names.collection_prefix(tenant, link)), root_ranges)
        finest, inner = drop_superseded(found)
        superseded += [s.blob for s in inner]
        newer = [s.chunk for _, s in kept]
        newer_starts = [c.start for c in newer]
        for summary in finest:
            at = bisect.bisect_left(newer_starts, summary.chunk.end)
            if at > 0 and newer[at - 1].end > summary.chunk.start:
                superseded.append(summary.blob)
            else:
                kept.append((link, summary))
        kept.sort(key=lambda entry: entry[1].chunk.start)
    return kept, superseded
