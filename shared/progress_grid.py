"""The chunk grid of the live page: what the orchestrator publishes, and the compact cell states the API serves.

Two pure halves:

* ``publish`` runs inside the orchestrator (from ``CollectionWindow.status()`` and ``output()``): it turns the
  window's state into small lists of time windows, as offsets in seconds from the collection's origin: the plan
  cursor, lanes in flight (window, phase, attempts), re-queued halves waiting to start, failed and incomplete windows
  (adjacent ones merged), and the latest failures with their reasons. In custom status the lists are bounded so the
  whole custom status stays far below the 16 KB of UTF-16 text Durable Functions allows (see ``BUDGETS``); what
  does not fit is counted under ``omitted`` (the newest failures are kept). In the output (the collection has ended)
  nothing is bounded, so the finished grid is exact.
* ``encode`` runs in the HTTP API: from the planned cells (the spec) and a published snapshot it computes one state
  per planned cell, run-length encoded (``"d120r2s1p877"``), with the parts of split cells listed inside their parent.

Cell states: ``d`` done, ``r`` running, ``b`` waiting for budget, ``s`` split (see its parts), ``f`` failed,
``i`` incomplete (collected as far as the source allowed), ``p`` pending (not started yet; never started once the
collection has ended). A lane phase this module does not know is shown as running; a phase whose name mentions
"budget" is shown as waiting for budget.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from shared.models import Chunk, JsonDict, iso, parse_iso
from shared.planning import ChunkPlan
from shared.window_state import Carried, Failure, Lane

STATES = {
    "d": "done",
    "r": "running",
    "b": "waiting for budget",
    "s": "split",
    "f": "failed",
    "i": "incomplete",
    "p": "pending",
}

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
    """What the grid needs of ``shared.window.CollectionSpec`` (kept structural to avoid an import cycle)."""

    @property
    def plan(self) -> ChunkPlan | None: ...

    @property
    def explicit(self) -> tuple[Chunk, ...]: ...


def origin_of(spec: SpecShape) -> datetime:
    """Offsets are counted from the plan's start, or from the first explicit window of a retry collection."""
    if spec.plan is not None:
        return spec.plan.start
    return min((c.start for c in spec.explicit), default=_EPOCH)


def _seconds(delta: timedelta) -> float | int:
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
        return [_seconds(chunk.start - self.origin), _seconds(chunk.end - self.origin)]

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


# --- the API side: planned cells and their states ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Cells:
    """The planned windows as offsets from ``origin``: regular (``interval``) or explicit (``starts``/``ends``)."""

    origin: datetime
    count: int
    end: float
    interval: float | None = None
    starts: tuple[float, ...] = ()
    ends: tuple[float, ...] = ()

    @classmethod
    def of(cls, spec: SpecShape) -> Cells:
        origin = origin_of(spec)
        if spec.plan is not None:
            plan = spec.plan
            return cls(origin, plan.count, float(_seconds(plan.end - origin)), plan.interval.total_seconds())
        windows = sorted(spec.explicit, key=lambda c: c.start)
        starts = tuple(float(_seconds(c.start - origin)) for c in windows)
        ends = tuple(float(_seconds(c.end - origin)) for c in windows)
        return cls(origin, len(windows), max(ends, default=0.0), None, starts, ends)

    def index(self, offset: float) -> int:
        """The cell whose window holds ``offset`` (clamped to the plan)."""
        if self.interval is not None:
            position = int(offset // self.interval)
        else:
            position = bisect_right(self.starts, offset) - 1
        return min(max(position, 0), self.count - 1)

    def bounds(self, index: int) -> tuple[float, float]:
        if self.interval is not None:
            return index * self.interval, min((index + 1) * self.interval, self.end)
        return self.starts[index], self.ends[index]

    def describe(self) -> JsonDict:
        """How the page maps a cell to its window: regular cells by arithmetic, explicit ones run-length encoded."""
        shape: JsonDict = {"cells": self.count, "origin": iso(self.origin), "end": self.end}
        if self.interval is not None:
            shape["intervalSeconds"] = self.interval
            return shape
        runs: list[list[float]] = []  # [start, length, count]: equal windows laid end to end
        for start, end in zip(self.starts, self.ends):
            last = runs[-1] if runs else None
            if last and end - start == last[1] and start == last[0] + last[1] * last[2]:
                last[2] += 1
            else:
                runs.append([start, end - start, 1])
        shape["windows"] = runs
        return shape


_LETTER_ORDER = "rbfip"  # when two windows claim one cell, the first letter here wins


def _phase_letter(phase: object) -> str:
    return "b" if "budget" in str(phase).lower() else "r"


def _windows(published: JsonDict, shift: float) -> list[tuple[float, float, str]]:
    found: list[tuple[float, float, str]] = []
    for lane in published.get("lanes") or []:
        found.append((float(lane[0]) + shift, float(lane[1]) + shift, _phase_letter(lane[2] if len(lane) > 2 else "")))
    for key, letter in (("requeued", "p"), ("failed", "f"), ("incomplete", "i")):
        found += [(float(s) + shift, float(e) + shift, letter) for s, e in published.get(key) or []]
    return found


def encode(cells: Cells, published: JsonDict | None) -> JsonDict:
    """Every planned cell's state, run-length encoded, with split cells' parts (offsets within the cell)."""
    shape = cells.describe()
    if published is None or cells.count == 0:
        return {**shape, "states": "", "parts": {}, "known": False}
    shift = float(_seconds(parse_iso(str(published.get("origin") or iso(cells.origin))) - cells.origin))
    cursor = min(max(int(published.get("cursor") or 0), 0), cells.count)
    whole: dict[int, str] = {}
    parts: dict[int, list[tuple[float, float, str]]] = {}
    for start, end, letter in _windows(published, shift):
        if end <= start:
            continue
        first, last = cells.index(start), cells.index(end - 1e-6)
        for cell in range(first, last + 1):
            low, high = cells.bounds(cell)
            s, e = max(start, low), min(end, high)
            if e <= s:
                continue
            if s <= low and e >= high:
                current = whole.get(cell)
                if current is None or _LETTER_ORDER.index(letter) < _LETTER_ORDER.index(current):
                    whole[cell] = letter
            else:
                parts.setdefault(cell, []).append((s - low, e - low, letter))
    split = {cell: _filled(found, cells.bounds(cell)) for cell, found in parts.items() if cell not in whole}
    for cell in split:
        whole[cell] = "s"
    states = _run_length(cells.count, cursor, whole)
    counts: dict[str, int] = {}
    for letter, run in re.findall(r"([a-z])(\d+)", states):
        counts[letter] = counts.get(letter, 0) + int(run)
    return {
        **shape,
        "states": states,
        "parts": {str(cell): found for cell, found in sorted(split.items())},
        "counts": counts,
        "lanes": _lanes(cells, published, shift),
        "known": True,
        "omitted": dict(published.get("omitted") or {}),
    }


def _lanes(cells: Cells, published: JsonDict, shift: float) -> list[JsonDict]:
    """Lanes in flight with their cell, window offsets, phase and attempts (the page's lanes table)."""
    found = []
    for lane in published.get("lanes") or []:
        start, end = float(lane[0]) + shift, float(lane[1]) + shift
        phase = str(lane[2]) if len(lane) > 2 else ""
        found.append(
            {
                "cell": cells.index(start),
                "start": start,
                "end": end,
                "phase": phase,
                "attempts": lane[3] if len(lane) > 3 else None,
                "state": _phase_letter(phase),
            }
        )
    return found


def _filled(found: Sequence[tuple[float, float, str]], bounds: tuple[float, float]) -> list[list[Any]]:
    """A split cell's known parts in time order, with the time between them done (a started cell's sub-windows are
    running, waiting, failed, incomplete or finished; only the unfinished ones are listed anywhere)."""
    length = bounds[1] - bounds[0]
    out: list[list[Any]] = []
    position = 0.0
    for low, end, letter in sorted(found):
        if low > position:
            out.append([position, low, "d"])
        start = max(low, position)
        if end > start:
            out.append([start, end, letter])
            position = end
    if position < length:
        out.append([position, length, "d"])
    return out


def _run_length(count: int, cursor: int, whole: dict[int, str]) -> str:
    pieces: list[str] = []
    letter, run = "", 0

    def push(next_letter: str, length: int) -> None:
        nonlocal letter, run
        if length <= 0:
            return
        if next_letter == letter:
            run += length
            return
        if run:
            pieces.append(f"{letter}{run}")
        letter, run = next_letter, length

    position = 0
    for cell in sorted(whole):
        push("d", min(cell, cursor) - min(position, cursor))
        push("p", cell - max(position, cursor))
        push(whole[cell], 1)
        position = cell + 1
    push("d", cursor - min(position, cursor))
    push("p", count - max(position, cursor))
    if run:
        pieces.append(f"{letter}{run}")
    return "".join(pieces)
