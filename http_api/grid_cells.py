"""The chunk grid of the live page, API side: one state per planned cell from what the orchestrator published.

``encode`` takes the planned cells (from the collection's spec) and a snapshot published by
``shared.window.progress_grid`` (custom status while running, the output once ended) and returns the cells' states
run-length encoded (``"d120r2s1p877"``), with the parts of split cells listed inside their parent.

Cell states: ``d`` done, ``r`` running, ``b`` waiting for budget, ``s`` split (see its parts), ``f`` failed,
``i`` incomplete (collected as far as the source allowed), ``p`` pending (not started yet; never started once the
collection has ended). A lane phase this module does not know is shown as running; a phase whose name mentions
"budget" is shown as waiting for budget.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.models import JsonDict, iso, parse_iso
from shared.window.progress_grid import SpecShape, origin_of, seconds

STATES = {
    "d": "done",
    "r": "running",
    "b": "waiting for budget",
    "s": "split",
    "f": "failed",
    "i": "incomplete",
    "p": "pending",
}


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
            return cls(origin, plan.count, float(seconds(plan.end - origin)), plan.interval.total_seconds())
        windows = sorted(spec.explicit, key=lambda c: c.start)
        starts = tuple(float(seconds(c.start - origin)) for c in windows)
        ends = tuple(float(seconds(c.end - origin)) for c in windows)
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
    shift = float(seconds(parse_iso(str(published.get("origin") or iso(cells.origin))) - cells.origin))
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
