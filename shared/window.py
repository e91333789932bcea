"""The collection's sliding window as a pure state machine: which chunk lanes run, and what each does next.

The orchestrator generator only translates the ``Step`` decisions returned here into SDK calls (``CallActivity`` ->
``call_activity``, ``Wait`` -> ``create_timer``) and feeds completions back. Because this module is pure and
deterministic (no clocks, no I/O, no randomness), replaying the same completions rebuilds the same state, which is
what keeps progress across replays (the seed's question) without globals or "is replaying" tricks.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared import names, progress_grid
from shared.models import ActivityError, ActivityResult, Chunk, ChunkSummary, JsonDict
from shared.planning import ChunkPlan
from shared.window_state import (
    COLLECT,
    DELETE,
    EXPORT,
    POLL,
    QUERY_DISPOSITIONS,
    SUBMIT,
    CallActivity,
    Carried,
    Failure,
    Lane,
    RunOptions,
    Step,
    Wait,
)


@dataclass(frozen=True, slots=True)
class CollectionSpec:
    """The fixed part of the orchestration input: what to collect and how."""

    collection_id: str
    tenant_id: str
    source: str
    filters: JsonDict
    options: RunOptions
    plan: ChunkPlan | None = None
    explicit: tuple[Chunk, ...] = ()
    """Explicit windows (a retry-failed collection) instead of a regular plan."""
    parent_collection_id: str | None = None

    @property
    def planned(self) -> int:
        return self.plan.count if self.plan else len(self.explicit)

    def planned_chunk(self, index: int) -> Chunk:
        return self.plan.chunk(index) if self.plan else self.explicit[index]

    def retry_chunks(self, output: JsonDict) -> list[Chunk]:
        """Windows a retry-failed collection must cover: failed chunks plus, after a stop, those never started."""
        chunks = [Chunk.from_json(f["chunk"]) for f in output.get("failures") or []]
        remaining = output.get("remaining") or {}
        chunks += [Chunk.from_json(c) for c in remaining.get("requeued") or []]
        chunks += [self.planned_chunk(i) for i in range(int(remaining.get("cursor", self.planned)), self.planned)]
        return sorted((Chunk(c.start, c.end) for c in chunks), key=lambda c: c.start)

    def to_json(self) -> JsonDict:
        return {
            "collectionId": self.collection_id,
            "tenantId": self.tenant_id,
            "source": self.source,
            "filters": self.filters,
            "options": self.options.to_json(),
            "plan": self.plan.to_json() if self.plan else None,
            "explicit": [c.to_json() for c in self.explicit],
            "parentCollectionId": self.parent_collection_id,
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> CollectionSpec:
        plan = data.get("plan")
        return cls(
            collection_id=str(data["collectionId"]),
            tenant_id=str(data["tenantId"]),
            source=str(data["source"]),
            filters=dict(data.get("filters") or {}),
            options=RunOptions.from_json(data.get("options") or {}),
            plan=ChunkPlan.from_json(plan) if plan else None,
            explicit=tuple(Chunk.from_json(c) for c in data.get("explicit") or ()),
            parent_collection_id=data.get("parentCollectionId"),
        )


class CollectionWindow:
    """At most K lanes in flight, refilled as lanes finish; splits, retries, doom and continue-as-new points."""

    def __init__(self, spec: CollectionSpec, carried: Carried | None = None) -> None:
        self.spec = spec
        self.state = carried or Carried()
        self.lanes: dict[int, Lane] = {}
        self.started_this_execution = 0
        self.grid = progress_grid.GridPublisher(spec)

    # --- queries ---------------------------------------------------------------------------------------------
    @property
    def options(self) -> RunOptions:
        return self.spec.options

    @property
    def total(self) -> int:
        """Chunks the collection will have processed: planned ones plus one per split (one window became two)."""
        return self.spec.planned + self.state.splits

    def has_pending(self) -> bool:
        return bool(self.state.requeued) or self.state.cursor < self.spec.planned

    def may_start(self) -> bool:
        return (
            self.state.doomed is None
            and self.has_pending()
            and self.started_this_execution < self.options.chunks_per_execution
        )

    @property
    def finished(self) -> bool:
        return not self.lanes and (self.state.doomed is not None or not self.has_pending())

    @property
    def should_continue_as_new(self) -> bool:
        """Drained (nothing in flight) with work left but this execution's chunk budget spent."""
        return not self.lanes and not self.finished and not self.may_start()

    # --- transitions -----------------------------------------------------------------------------------------
    def fill(self) -> list[Step]:
        """Start lanes until K are in flight (or nothing may start); returns their first steps."""
        steps: list[Step] = []
        while len(self.lanes) < self.options.max_concurrency and self.may_start():
            if self.state.requeued:
                chunk = self.state.requeued.pop(0)
            else:
                chunk = self.spec.planned_chunk(self.state.cursor)
                self.state.cursor += 1
            lane = Lane(self.state.next_lane, chunk, SUBMIT if self.spec.source == "graph" else COLLECT)
            self.state.next_lane += 1
            self.started_this_execution += 1
            self.lanes[lane.id] = lane
            steps.append(self._call(lane))
        return steps

    def on_timer(self, lane_id: int) -> list[Step]:
        """A lane's poll or back-off timer fired: issue its current step again."""
        return [self._call(self.lanes[lane_id])]

    def on_result(self, lane_id: int, result: ActivityResult) -> list[Step]:
        """A lane's activity finished; returns that lane's next step, or ``[]`` when the lane is done."""
        lane = self.lanes[lane_id]
        if lane.phase == DELETE:  # best effort: the chunk's outcome was decided before the delete
            self._count_query(str(result.data.get("disposition")) if result.ok else "deleteFailed")
            return self._end(lane)
        if result.needs_split:
            return self._needs_split(lane)
        if result.error is not None:
            return self._error(lane, result.error)
        lane.step_failures = 0
        if lane.phase == SUBMIT:
            lane.query_id = str(result.data["queryId"])
            lane.phase = POLL
            return [Wait(lane.id, self.options.poll_delay(0))]
        if lane.phase == POLL:
            return self._polled(lane, result.data)
        summary = ChunkSummary.from_json(result.data)
        return self._conclude(lane, ("done", summary))

    def _polled(self, lane: Lane, data: JsonDict) -> list[Step]:
        state = str(data.get("state"))
        if state == "pending":
            lane.polls += 1
            if lane.polls >= self.options.max_polls:
                error = ActivityError("poll_timeout", f"query still running after {lane.polls} status checks")
                return self._conclude(lane, ("failed", self._failure(lane, error)))
            return [Wait(lane.id, self.options.poll_delay(lane.polls))]
        if state != "succeeded":
            error = ActivityError("query_failed", f"the audit query ended {data.get('rawStatus', state)}")
            return self._conclude(lane, ("failed", self._failure(lane, error)))
        if data.get("limitExceeded") and not lane.allow_incomplete:
            return self._needs_split(lane)
        if self._over_budget(data.get("approximateCount")) and lane.chunk.seconds / 2 >= self.options.min_split_seconds:
            # Complete but too big for one export activity: halves export faster (a minimum window exports as is).
            return self._conclude(lane, ("split", None))
        lane.phase = EXPORT
        return [self._call(lane)]

    def _over_budget(self, approximate: object) -> bool:
        limit = self.options.max_records_per_chunk
        return limit > 0 and isinstance(approximate, int | float) and approximate > limit

    def _needs_split(self, lane: Lane) -> list[Step]:
        if lane.allow_incomplete:  # the activity was told to accept a partial window; a loop here would never end
            error = ActivityError("needs_split", "the source still reports the window over its cap")
            return self._conclude(lane, ("failed", self._failure(lane, error)))
        if lane.chunk.seconds / 2 >= self.options.min_split_seconds:
            return self._conclude(lane, ("split", None))
        # A minimum window still over the cap: collect as much as the source gives and report it incomplete.
        lane.allow_incomplete = True
        lane.phase = EXPORT if lane.query_id else lane.phase
        return [self._call(lane)]

    def _error(self, lane: Lane, error: ActivityError) -> list[Step]:
        lane.step_failures += 1
        if error.dooms_collection:
            self.state.doomed = self.state.doomed or error
        elif error.retryable and lane.step_failures < self.options.max_attempts:
            return [Wait(lane.id, self.options.retry_delay(lane.step_failures, error.retry_after))]
        return self._conclude(lane, ("failed", self._failure(lane, error)))

    def _failure(self, lane: Lane, error: ActivityError) -> Failure:
        return Failure(lane.chunk, error.kind, error.message, lane.attempts)

    def _conclude(self, lane: Lane, ending: tuple[str, object]) -> list[Step]:
        lane.ending = ending
        if lane.query_id is not None:
            if self.options.delete_queries:  # ask the service to delete it before the lane gives up its slot
                lane.phase = DELETE
                return [self._call(lane)]
            self._count_query("leftOnService")
        return self._end(lane)

    def _count_query(self, disposition: str) -> None:
        """What became of a lane's query; a delete result naming no known outcome counts as a failed delete."""
        self.state.queries[disposition if disposition in QUERY_DISPOSITIONS else "deleteFailed"] += 1

    def _end(self, lane: Lane) -> list[Step]:
        del self.lanes[lane.id]
        assert lane.ending is not None
        kind, value = lane.ending
        if kind == "done":
            assert isinstance(value, ChunkSummary)
            self.state.completed += 1
            self.state.records += value.records
            self.state.incomplete += int(value.incomplete)
            if value.incomplete:
                self.state.incomplete_windows.append(lane.chunk)
        elif kind == "failed":
            assert isinstance(value, Failure)
            self.state.failed += 1
            self.state.failures.append(value)
        else:
            self.state.splits += 1
            self.state.requeued[:0] = list(lane.chunk.halves())
        return []

    def _call(self, lane: Lane) -> CallActivity:
        if lane.attempts == 0 or lane.step_failures > 0:
            # An attempt is one try at the chunk: its first call, and every call that retries a failed step.
            # Polls and the submit → export hand-over belong to the same attempt.
            lane.attempts += 1
        payload: JsonDict = {
            "collectionId": self.spec.collection_id,
            "tenantId": self.spec.tenant_id,
            "chunk": lane.chunk.to_json(),
            "filters": self.spec.filters,
            "queryId": lane.query_id,
            "allowIncomplete": lane.allow_incomplete,
            "attempt": lane.attempts,
            "highCompleteness": self.options.high_completeness,
        }
        name = {
            SUBMIT: names.ACTIVITY_GRAPH_SUBMIT,
            POLL: names.ACTIVITY_GRAPH_STATUS,
            EXPORT: names.ACTIVITY_GRAPH_EXPORT,
            DELETE: names.ACTIVITY_GRAPH_DELETE,
            COLLECT: names.ACTIVITY_EXCHANGE_COLLECT,
        }[lane.phase]
        return CallActivity(lane.id, name, payload)

    # --- continue-as-new, status, output ---------------------------------------------------------------------
    def carry(self) -> Carried:
        """The state for the next execution (call only at a drained point)."""
        if self.lanes:
            raise RuntimeError("continue-as-new with lanes in flight would lose them")
        carried = Carried.from_json(self.state.to_json())
        carried.execution += 1
        return carried

    def status(self) -> JsonDict:
        done = self.state.completed + self.state.failed
        total = self.total
        return {
            "collectionId": self.spec.collection_id,
            "total": total,
            "completed": self.state.completed,
            "failed": self.state.failed,
            "inFlight": len(self.lanes),
            "records": self.state.records,
            "splits": self.state.splits,
            "incomplete": self.state.incomplete,
            "percent": round(100.0 * done / total, 1) if total else 100.0,
            "windowsInFlight": [lane.chunk.label() for lane in self.lanes.values()],
            "execution": self.state.execution,
            "stopping": self.state.doomed.message if self.state.doomed else None,
            "grid": self.grid.publish(self.state, self.lanes.values()),
            "queries": dict(self.state.queries) if self.spec.source == "graph" else None,
        }

    def output(self, manifest: str | None) -> JsonDict:
        if self.state.doomed is not None:
            status = "Failed"
        elif self.state.failed or self.state.incomplete:
            status = "CompletedWithFailures"
        else:
            status = "Completed"
        summary = self.status()
        del summary["inFlight"], summary["windowsInFlight"], summary["stopping"]
        return {
            **summary,
            "grid": self.grid.publish(self.state, (), bounded=False),
            "status": status,
            "reason": self.state.doomed.to_json() if self.state.doomed else None,
            "failures": [f.to_json() for f in self.state.failures],
            "remaining": {
                "requeued": [c.to_json() for c in self.state.requeued],
                "cursor": self.state.cursor,
                "planned": self.spec.planned,
            },
            "manifest": manifest,
            "parentCollectionId": self.spec.parent_collection_id,
        }
