"""Data of the sliding-window state machine: options, carried state, lanes and the steps it asks for.

Kept apart from the machine itself (``shared.window``) so both stay small. Everything round-trips through JSON
because the orchestration input (and the ``continue_as_new`` payload) is JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared.models import ActivityError, Chunk, ChunkSummary, JsonDict
from shared.settings import Settings


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Per-collection knobs, fixed when the collection starts (so a settings change never alters a replay)."""

    max_concurrency: int = 3
    poll_interval_seconds: float = 30.0
    poll_backoff: float = 1.5
    poll_max_interval_seconds: float = 300.0
    max_polls: int = 240
    max_attempts: int = 4
    retry_base_seconds: float = 15.0
    retry_max_seconds: float = 600.0
    min_split_seconds: int = 60
    chunks_per_execution: int = 50
    max_records_per_chunk: int = 0
    delete_queries: bool = False
    """Send a DELETE for each Graph query once its chunk is decided (the service does not support it today)."""
    high_completeness: bool = False
    """Ask Exchange for completeness over speed (``-HighCompleteness``); set per request."""

    @classmethod
    def from_settings(cls, settings: Settings, max_concurrency: int, *, high_completeness: bool = False) -> RunOptions:
        return cls(
            max_concurrency=max_concurrency,
            poll_interval_seconds=settings.poll_interval_seconds,
            poll_backoff=settings.poll_backoff,
            poll_max_interval_seconds=settings.poll_max_interval_seconds,
            max_polls=settings.max_polls,
            max_attempts=settings.max_attempts,
            retry_base_seconds=settings.retry_base_seconds,
            retry_max_seconds=settings.retry_max_seconds,
            min_split_seconds=settings.min_split_seconds,
            chunks_per_execution=settings.chunks_per_execution,
            max_records_per_chunk=settings.max_records_per_chunk,
            delete_queries=settings.delete_queries,
            high_completeness=high_completeness,
        )

    def poll_delay(self, polls_done: int) -> float:
        """Seconds before status check number ``polls_done + 1`` (geometric back-off, capped)."""
        delay = self.poll_interval_seconds * float(self.poll_backoff ** max(0, polls_done - 1))
        return min(delay, max(self.poll_max_interval_seconds, self.poll_interval_seconds))

    def retry_delay(self, failed_attempts: int, retry_after: float | None) -> float:
        """Seconds before the next attempt: exponential from the base, capped, never below Retry-After."""
        delay: float = min(self.retry_base_seconds * float(2 ** max(0, failed_attempts - 1)), self.retry_max_seconds)
        return max(delay, retry_after or 0.0)

    def to_json(self) -> JsonDict:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_json(cls, data: JsonDict) -> RunOptions:
        known = {name: data[name] for name in cls.__slots__ if name in data}
        return cls(**known)


@dataclass(slots=True)
class Failure:
    chunk: Chunk
    kind: str
    message: str
    attempts: int

    def to_json(self) -> JsonDict:
        return {"chunk": self.chunk.to_json(), "kind": self.kind, "message": self.message, "attempts": self.attempts}

    @classmethod
    def from_json(cls, data: JsonDict) -> Failure:
        return cls(Chunk.from_json(data["chunk"]), str(data["kind"]), str(data["message"]), int(data["attempts"]))


QUERY_DISPOSITIONS = ("deleted", "leftOnService", "deleteUnsupported", "deleteFailed")
"""What became of each Graph query: deleted (a 2xx said so), left on the service (deletion off), delete answered
404 (not supported), delete failed otherwise."""


def no_queries() -> dict[str, int]:
    return dict.fromkeys(QUERY_DISPOSITIONS, 0)


@dataclass(slots=True)
class Carried:
    """What survives ``continue_as_new``: a cursor, counters and failures (never per-chunk results)."""

    cursor: int = 0
    requeued: list[Chunk] = field(default_factory=list)
    completed: int = 0
    failed: int = 0
    records: int = 0
    splits: int = 0
    incomplete: int = 0
    failures: list[Failure] = field(default_factory=list)
    incomplete_windows: list[Chunk] = field(default_factory=list)
    """Windows collected only as far as the source allowed (for the live page's grid and the output)."""
    doomed: ActivityError | None = None
    execution: int = 1
    next_lane: int = 0
    queries: dict[str, int] = field(default_factory=no_queries)
    """Graph queries by disposition (``QUERY_DISPOSITIONS``)."""

    def to_json(self) -> JsonDict:
        return {
            "cursor": self.cursor,
            "requeued": [c.to_json() for c in self.requeued],
            "completed": self.completed,
            "failed": self.failed,
            "records": self.records,
            "splits": self.splits,
            "incomplete": self.incomplete,
            "failures": [f.to_json() for f in self.failures],
            "incompleteWindows": [c.to_json() for c in self.incomplete_windows],
            "doomed": self.doomed.to_json() if self.doomed else None,
            "execution": self.execution,
            "nextLane": self.next_lane,
            "queries": dict(self.queries),
        }

    @classmethod
    def from_json(cls, data: JsonDict | None) -> Carried:
        if not data:
            return cls()
        doomed = data.get("doomed")
        return cls(
            cursor=int(data["cursor"]),
            requeued=[Chunk.from_json(c) for c in data.get("requeued", [])],
            completed=int(data["completed"]),
            failed=int(data["failed"]),
            records=int(data["records"]),
            splits=int(data["splits"]),
            incomplete=int(data.get("incomplete", 0)),
            failures=[Failure.from_json(f) for f in data.get("failures", [])],
            incomplete_windows=[Chunk.from_json(c) for c in data.get("incompleteWindows", [])],
            doomed=ActivityError.from_json(doomed) if doomed else None,
            execution=int(data.get("execution", 1)),
            next_lane=int(data.get("nextLane", 0)),
            queries={**no_queries(), **{k: int(v) for k, v in (data.get("queries") or {}).items()}},
        )


# Lane phases. Graph: SUBMIT -> POLL (timers + status) -> EXPORT [-> DELETE when deletion is on]. Exchange: COLLECT.
SUBMIT, POLL, EXPORT, DELETE, COLLECT = "submit", "poll", "export", "delete", "collect"


@dataclass(slots=True)
class Lane:
    """One chunk in flight; it keeps its slot from submit to export (to delete, when queries are deleted)."""

    id: int
    chunk: Chunk
    phase: str
    step_failures: int = 0
    attempts: int = 0
    query_id: str | None = None
    polls: int = 0
    allow_incomplete: bool = False
    ending: tuple[str, Any] | None = None
    """Set before the Graph DELETE step: ("done", ChunkSummary) | ("failed", Failure) | ("split", None)."""


@dataclass(frozen=True, slots=True)
class CallActivity:
    lane: int
    name: str
    input: JsonDict


@dataclass(frozen=True, slots=True)
class Wait:
    lane: int
    seconds: float


Step = CallActivity | Wait

__all__ = [
    "COLLECT",
    "DELETE",
    "EXPORT",
    "POLL",
    "QUERY_DISPOSITIONS",
    "SUBMIT",
    "CallActivity",
    "Carried",
    "ChunkSummary",
    "Failure",
    "Lane",
    "RunOptions",
    "Step",
    "Wait",
    "no_queries",
]
