"""Chunk planning: consecutive half-open windows of ``interval`` over [start, end), the last one truncated.

The plan is a pure function of (start, end, interval), so the orchestrator carries only a cursor into it, never the
list itself: chunk ``i`` is recomputed on demand, and history stays small however long the range is.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.models import Chunk, JsonDict, iso, parse_iso


@dataclass(frozen=True, slots=True)
class ChunkPlan:
    """A regular plan: ``count`` windows of ``interval`` starting at ``start``, the last ending at ``end``."""

    start: datetime
    end: datetime
    interval: timedelta

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("plan bounds must be timezone-aware")
        if self.end <= self.start:
            raise ValueError("plan end must be after start")
        if self.interval <= timedelta(0):
            raise ValueError("plan interval must be positive")

    @property
    def count(self) -> int:
        return chunk_count(self.start, self.end, self.interval)

    def chunk(self, index: int) -> Chunk:
        """The ``index``-th window (0-based)."""
        if not 0 <= index < self.count:
            raise IndexError(f"chunk {index} outside plan of {self.count}")
        chunk_start = self.start + self.interval * index
        return Chunk(chunk_start, min(chunk_start + self.interval, self.end))

    def __iter__(self) -> Iterator[Chunk]:
        return (self.chunk(i) for i in range(self.count))

    def to_json(self) -> JsonDict:
        return {"start": iso(self.start), "end": iso(self.end), "intervalSeconds": self.interval.total_seconds()}

    @classmethod
    def from_json(cls, data: JsonDict) -> ChunkPlan:
        return cls(parse_iso(data["start"]), parse_iso(data["end"]), timedelta(seconds=float(data["intervalSeconds"])))


def chunk_count(start: datetime, end: datetime, interval: timedelta) -> int:
    """How many windows of ``interval`` cover [start, end) (the last may be shorter)."""
    # Integer microseconds avoid float rounding at exact multiples.
    span_us = (end - start) // timedelta(microseconds=1)
    step_us = interval // timedelta(microseconds=1)
    return -(-span_us // step_us)


def plan_chunks(start: datetime, end: datetime, interval: timedelta) -> list[Chunk]:
    """The seed's loop as a pure function: consecutive [s, s+interval) windows, the last truncated at ``end``."""
    return list(ChunkPlan(start, end, interval))


def smallest_interval_minutes(start: datetime, end: datetime, max_chunks: int) -> int:
    """The smallest whole-minute interval that plans at most ``max_chunks`` chunks over [start, end)."""
    minutes = max(1, math.ceil((end - start).total_seconds() / 60 / max_chunks))
    while chunk_count(start, end, timedelta(minutes=minutes)) > max_chunks:
        minutes += 1
    return minutes
