"""The chunk grid of the live page, orchestrator side: what the window publishes in custom status and output.

The API side (``http_api.grid_cells``) turns it into one state per planned cell.

* ``publish`` runs inside the orchestrator (from ``CollectionWindow.status()`` and ``output()``): it turns the
  window's state into small lists of time windows, as offsets in seconds from the collection's origin: the plan
  cursor, lanes in flight (window, phase, attempts), re-queued halves waiting to start, failed and incomplete windows
  (adjacent ones merged), and the latest failures with their reasons. In custom status the lists are bounded so the
  whole custom status stays far below the 16 KB of UTF-16 text Durable Functions allows (see ``BUDGETS``); what
  does not fit is counted under ``omitted`` (the newest failures are kept). In the output (the collection has ended)
  nothing is bounded, so the finished grid is exact.

Lanes are published with their phase as the window names it, so a phase added later needs no change here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from shared.models import Chunk, JsonDict, iso
from shared.timeline.planning import ChunkPlan
from shared.window.state import Carried, Failure, Lane

BUDGETS = {"failed": 1400, "incomplete": 600, "requeued": 500, "recent": 900}
"""UTF-16 code units each list may take in custom status. Durable Functions limits the whole custom status to 16 KB
of UTF-16 JSON text ("Custom orchestration status", learn.microsoft.com/azure/durable-task/common/
durable-task-custom-orchestration-status), read here as 8,192 code units. With at most ``LANE_LIMIT`` lanes the grid
stays under ~5,000 units and the whole custom status under ~7,000 (a test checks the worst case)."""

LANE_LIMIT = 32
SCAN_LIMIT = 256
"""Newest failed/incomplete windows (and first re-queued ones) looked at when those lists change; older ones are
counted under ``omitted``."""

RECENT_FAILURES = 5
REASON_CHARS = 160
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Pair = list[float | int]


class SpecShape(Protocol):
    """What the grid needs of ``shared.window.machine.CollectionSpec`` (kept structural to avoid an import cycle)."""

    @property
    def plan(self) -> ChunkPlan | None: ...

    @property
    def explicit(self) -> tuple[Chunk, ...]: ...


def origin_of(spec: SpecShape) -> datetime:
    """Offsets are counted from the plan's start, or from the first explicit window of a retry collection."""
    if spec.plan is not None:
        return spec.plan.start
    return min((c.start for c in spec.explicit), default=_EPOCH)


def seconds(delta: timedelta) -> float | int:
    micros = delta // timedelta(microseconds=1)
    return micros // 1_000_000 if micros % 1_000_000 == 0 else round(micros / 1_000_000, 6)


def _merged(pairs: Iterable[Pair]) -> list[Pair]:
    """Sorted, with touching or overlapping windows merged (adjacent failed chunks become one run)."""
    runs: list[Pair] = []
    for start, end in sorted(pairs):
        if runs and start <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], end)
        else:
            runs.append([start, end])
    return runs


def _units(value: object) -> int:
    """UTF-16 code units of the value's JSON text (what the 16 KB limit counts), with its separating comma."""
    return len(json.dumps(value).encode("utf-16-le")) // 2 + 1


def _within(items: list[Any], budget: int, *, newest: bool) -> list[Any]:
    """The newest (last) or first items whose JSON fits ``budget``."""
    kept: list[Any] = []
    used = 0
    for item in reversed(items) if newest else items:
        used += _units(item)
        if used > budget:
            break
        kept.append(item)
    return kept[::-1] if newest else kept


def _short(text: str) -> str:
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "\u2026"


class GridPublisher:
    """Publishes one window's grid inputs. The orchestrator sets its custom status before every yield, hundreds of
    times in a replayed episode, so what changes rarely (failed and incomplete runs, a lane's window, the origin)
    is computed once per change and reused: a status update with nothing new costs a few microseconds."""

    def __init__(self, spec: SpecShape) -> None:
        self.origin = origin_of(spec)
        self._origin_text = iso(self.origin)
        self._lanes: dict[int, tuple[Chunk, Pair]] = {}
        self._lists: dict[str, tuple[object, int, object, object, list[Any], int]] = {}

    def pair(self, chunk: Chunk) -> Pair:
        return [seconds(chunk.start - self.origin), seconds(chunk.end - self.origin)]

    def publish(self, state: Carried, lanes: Iterable[Lane], *, bounded: bool = True) -> JsonDict:
        """The grid's inputs; ``bounded`` for custom status, everything (and no recent reasons) for the output."""
        if not bounded:
            return {
                "origin": self._origin_text,
                "cursor": state.cursor,
                "lanes": [],
                "requeued": [self.pair(c) for c in state.requeued],
                "failed": _merged(self.pair(f.chunk) for f in state.failures),
                "incomplete": _merged(self.pair(c) for c in state.incomplete_windows),
            }
        lane_list = list(lanes)
        failed, failed_omitted = self._cached("failed", state.failures, self._failed_runs)
        recent, _ = self._cached("recent", state.failures, self._recent)
        incomplete, incomplete_omitted = self._cached("incomplete", state.incomplete_windows, self._incomplete_runs)
        requeued, requeued_omitted = self._cached("requeued", state.requeued, self._requeued)
        grid: JsonDict = {
            "origin": self._origin_text,
            "cursor": state.cursor,
            "lanes": [[*self._lane_pair(lane), lane.phase, lane.attempts] for lane in lane_list[:LANE_LIMIT]],
            "requeued": requeued,
            "failed": failed,
            "incomplete": incomplete,
            "recent": recent,
        }
        omitted = {
            "failed": failed_omitted,
            "incomplete": incomplete_omitted,
            "requeued": requeued_omitted,
            "lanes": max(0, len(lane_list) - LANE_LIMIT),
        }
        if any(omitted.values()):
            grid["omitted"] = {key: count for key, count in omitted.items() if count}
        return grid

    def _lane_pair(self, lane: Lane) -> Pair:
        cached = self._lanes.get(lane.id)
        if cached is None or cached[0] is not lane.chunk:
            cached = (lane.chunk, self.pair(lane.chunk))
            self._lanes[lane.id] = cached
        return cached[1]

    def _cached(self, key: str, items: list[Any], build: Any) -> tuple[list[Any], int]:
        """``build(items)`` again only when the list changed (new object, length, first or last element)."""
        first = items[0] if items else None
        last = items[-1] if items else None
        found = self._lists.get(key)
        if (
            found is None
            or found[0] is not items
            or found[1] != len(items)
            or found[2] is not first
            or (found[3] is not last)
        ):
            value, omitted = build(items)
            found = (items, len(items), first, last, value, omitted)
            self._lists[key] = found
        return found[4], found[5]

    def _failed_runs(self, failures: list[Failure]) -> tuple[list[Pair], int]:
        scanned = failures[-SCAN_LIMIT:]
        runs = _merged(self.pair(f.chunk) for f in scanned)
        kept = _within(runs, BUDGETS["failed"], newest=True)
        return kept, len(failures) - len(scanned) + _windows_in(runs[: len(runs) - len(kept)], scanned, self)

    def _incomplete_runs(self, windows: list[Chunk]) -> tuple[list[Pair], int]:
        scanned = windows[-SCAN_LIMIT:]
        runs = _merged(self.pair(c) for c in scanned)
        kept = _within(runs, BUDGETS["incomplete"], newest=True)
        dropped = runs[: len(runs) - len(kept)]
        return kept, len(windows) - len(scanned) + sum(1 for c in scanned if _inside(self.pair(c), dropped))

    def _requeued(self, windows: list[Chunk]) -> tuple[list[Pair], int]:
        pairs = [self.pair(c) for c in windows[:SCAN_LIMIT]]
        kept = _within(pairs, BUDGETS["requeued"], newest=False)
        return kept, len(windows) - len(kept)

    def _recent(self, failures: list[Failure]) -> tuple[list[JsonDict], int]:
        recent = [
            {"w": self.pair(f.chunk), "kind": f.kind, "reason": _short(f.message), "attempts": f.attempts}
            for f in failures[-RECENT_FAILURES:]
        ]
        return _within(recent, BUDGETS["recent"], newest=True), 0


def _inside(pair: Pair, runs: list[Pair]) -> bool:
    return any(run[0] <= pair[0] and pair[1] <= run[1] for run in runs)


def _windows_in(runs: list[Pair], failures: list[Failure], publisher: GridPublisher) -> int:
    """How many failed windows the dropped runs held."""
    return sum(1 for f in failures if _inside(publisher.pair(f.chunk), runs)) if runs else 0


def publish(spec: SpecShape, state: Carried, lanes: Iterable[Lane], *, bounded: bool = True) -> JsonDict:
    """One-off publishing (tests, tools); the window keeps a ``GridPublisher`` for its repeated updates."""
    return GridPublisher(spec).publish(state, lanes, bounded=bounded)
