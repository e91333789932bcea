"""The collection's sliding window as a pure state machine: which chunk lanes run, and what each does next.

The orchestrator generator only translates the ``Step`` decisions returned here into SDK calls (``CallActivity`` ->
``call_activity``, ``Wait`` -> ``create_timer``) and feeds completions back. Because this module is pure and
deterministic (no clocks, no I/O, no randomness: "now" is the orchestration's ``current_utc_datetime``, handed in),
replaying the same completions rebuilds the same state, which is what keeps progress across replays (the seed's
question) without globals or "is replaying" tricks.

Executions are switched without draining: once an execution has started its budget of chunks, no new chunk starts,
each lane whose next step is a timer or an activity not yet issued is *parked* (its timer cancelled by the
orchestrator), the activities already in flight are awaited, and ``carry()`` hands the parked lanes to the next
execution, which re-creates their timers at the same due time or issues their calls at once (``resume()``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from shared.audit.error_body import THROTTLED
from shared.errors import SlotExpiredError
from shared.models import ActivityError, ActivityResult, Chunk, JsonDict
from shared.requests.collection_spec import CollectionSpec
from shared.window import progress_grid
from shared.window.budget import LaneBudget
from shared.window.calls import ChunkCall
from shared.window.lanes import SourceLanes
from shared.window.state import (
    BUDGET,
    PARKED_CALL,
    PARKED_TIMER,
    RENEW,
    CallActivity,
    CallEntity,
    Carried,
    Failure,
    Lane,
    RunOptions,
    Step,
    Wait,
    later,
)

THROTTLED_RETRIES = 20
"""Steps answered 429 to the end of their HTTP retries that a chunk retries without spending an attempt (the service
is busy, possibly with other tools' queries: waiting is the remedy, CIPP defers), each after a growing back-off."""


def can_split(chunk_seconds: float, min_split_seconds: float) -> bool:
    """Halves of the window would still be at least the minimum split."""
    return chunk_seconds / 2 >= min_split_seconds


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

__all__ = ["CollectionSpec", "CollectionWindow"]


class CollectionWindow:
    """At most K lanes in flight, refilled as lanes finish; splits, retries, doom and execution switches.

    It holds the collection's source (``source``: its lanes, ``shared.window.lanes.SourceLanes``) and its tenant
    budget (``budget``: ``shared.window.budget.LaneBudget``); it is the ``LaneHost`` both act through.
    """

    def __init__(
        self,
        spec: CollectionSpec,
        carried: Carried | None = None,
        *,
        source: SourceLanes,
        now: datetime = EPOCH,
        budget_token: str = "",
    ) -> None:
        self.spec = spec
        self.planned = spec.planned
        self.state = carried or Carried()
        self.source = source
        self.lanes: dict[int, Lane] = {}
        self.started_this_execution = 0
        self.transitions = 0
        """Completions this execution handled (timers, results, answers): a bound on its history's length."""
        self.now = now
        """The orchestration's ``current_utc_datetime``; the orchestrator sets it before each transition."""
        self._last_call_seconds: float | None = None
        """How long the most recent activity of any lane took (what a chunk started while switching may take)."""
        self._carried_lanes, self.state.lanes = self.state.lanes, []
        self.grid = progress_grid.GridPublisher(spec)
        self.budget = LaneBudget(self, spec.options.budget, budget_token)
        self.ended: list[Lane] = []
        """Lanes ended since the orchestrator last took them (it logs each chunk's end, when not replaying)."""

    # --- queries ---------------------------------------------------------------------------------------------
    @property
    def options(self) -> RunOptions:
        return self.spec.options

    @property
    def budget_token(self) -> str:
        return self.budget.token

    @property
    def renewing(self) -> bool:
        """The collection-wide renewal of its budget slots is in flight (an entity call of this execution)."""
        return self.budget.renewing

    @property
    def total(self) -> int:
        """Chunks the collection will have processed: planned ones plus one per split, and the chunks its source
        added (one window became two)."""
        return self.planned + self.state.splits + self.source.added_chunks

    def has_pending(self) -> bool:
        return bool(self.state.requeued) or self.state.cursor < self.planned

    @property
    def budget_spent(self) -> bool:
        """This execution started its chunks, or (window version 1) handled ``transitions_per_execution`` completions:
        at realistic latency a Graph chunk is about 25 of them (its status checks), so the chunk count alone let a
        history grow to thousands of events, every episode replaying them all."""
        bound = self.options.transitions_per_execution
        return self.started_this_execution >= self.options.chunks_per_execution or 0 < bound <= self.transitions

    def may_start(self) -> bool:
        return self.state.doomed is None and self.has_pending() and not self.budget_spent

    @property
    def finished(self) -> bool:
        return not self.lanes and not self._carried_lanes and (self.state.doomed is not None or not self.has_pending())

    @property
    def switching(self) -> bool:
        """This execution has started its chunks and more wait: lanes park, and the execution ends once none is busy."""
        return self.state.doomed is None and self.budget_spent and self.has_pending()

    @property
    def should_continue_as_new(self) -> bool:
        """Switching, and every lane is parked (no activity or entity call of this execution is still in flight)."""
        return self.switching and not self.renewing and all(lane.parked for lane in self.lanes.values())

    @property
    def busy(self) -> bool:
        """Lanes remain, or the renewal's answer is awaited (an entity answer reaches only the execution that asked)."""
        return bool(self.lanes) or self.renewing

    # --- transitions -----------------------------------------------------------------------------------------
    def resume(self) -> list[Step]:
        """The first steps of the lanes carried from the previous execution: their timers again, or their calls."""
        for lane in self._carried_lanes:
            self.lanes[lane.id] = lane
        self._carried_lanes = []
        steps = self._unpark()
        return steps + self.budget.resumed()  # the renewal of the previous execution, again

    def _unpark(self) -> list[Step]:
        """Steps for the parked lanes: a timer at the due time they kept, or their call at once.

        Also when a switch is called off (the collection is doomed, or a lane started while switching took the
        last waiting chunk): the execution then ends when its lanes do, and parked lanes must go on in it.
        """
        steps: list[Step] = []
        for lane in self.lanes.values():
            parked, lane.parked = lane.parked, None
            if parked is None:
                continue
            if parked == PARKED_TIMER and lane.due is not None and lane.due > self.now:
                steps += self.wait(lane, lane.due)
            else:
                steps += self.next_call(lane)
        return steps

    def fill(self) -> list[Step]:
        """Start lanes until K are in flight (or nothing may start); returns their first steps.

        While switching, a free lane still starts a chunk whose first call should end before the activities in
        flight do (the budget of chunks per execution is a bound on history, not a reason to idle).
        """
        steps: list[Step] = []
        while (
            len(self.lanes) < self.options.max_concurrency
            and self.budget.may_ask()  # while a lane waits for tenant budget, the others wait unstarted
            and self.source.may_start(self.lanes)  # Exchange: the first lane probes the tenant alone
            and (self.may_start() or (self.switching and self._fits_before_switch(self._last_call_seconds)))
        ):
            if self.state.requeued:
                chunk = self.state.requeued.pop(0)
            else:
                chunk = self.spec.planned_chunk(self.state.cursor)
                self.state.cursor += 1
            steps += self._start_lane(self.source.sized(self, chunk))
        if not self.switching:
            steps += self._unpark()
        return steps + self.budget.settle()

    def _start_lane(self, chunk: Chunk) -> list[Step]:
        """The one place a chunk's lane begins (it holds its slot until ``_end``); with a tenant budget it takes the
        slot of a lane that just ended, or asks for one (``BUDGET``) and its server-side work starts once granted."""
        lane = Lane(self.state.next_lane, chunk, self.source.first_phase)
        lane.started_at = self.now
        self.state.next_lane += 1
        self.started_this_execution += 1
        self.lanes[lane.id] = lane
        if self.budget.enabled:
            return self.budget.take_slot(lane)
        return [self.call(lane)]

    def park(self, lane_id: int, *, fired: bool = False) -> None:
        """The orchestrator cancelled this lane's timer to switch executions: it waits for ``due`` in the next one.

        ``fired``: the timer fired before it could be cancelled, so the lane's call is due at once.
        """
        lane = self.lanes[lane_id]
        lane.parked = PARKED_TIMER if lane.due is not None and not fired else PARKED_CALL

    def on_timer(self, lane_id: int) -> list[Step]:
        """A lane's poll or back-off timer fired: issue its current step again (or the collection's renewal)."""
        self.transitions += 1
        if lane_id == RENEW:
            return self.budget.renewal_timer()
        lane = self.lanes[lane_id]
        if lane.phase == BUDGET and self.state.doomed is not None:
            return self.conclude(lane, ("unstarted", None))
        return self.next_call(lane)

    def on_budget(self, lane_id: int, answer: JsonDict | None) -> list[Step]:
        """The tenant budget answered a lane's ``acquire`` (or the collection's renewal); ``None``: the call failed."""
        self.transitions += 1
        return self.budget.on_budget(lane_id, answer)

    def on_result(self, lane_id: int, result: ActivityResult) -> list[Step]:
        """A lane's activity finished; returns that lane's next step, or ``[]`` when the lane is done or parked."""
        self.transitions += 1
        lane = self.lanes[lane_id]
        due, lane.due = lane.due, None
        self.source.learn(lane, result)
        checked_at, lane.issued_at = lane.issued_at, None
        if checked_at is not None:
            lane.call_seconds = (self.now - checked_at).total_seconds()
            self._last_call_seconds = lane.call_seconds
        ended = self.source.ended(self, lane, result)
        if ended is not None:  # a clean-up call: the chunk's outcome was decided before it
            return ended
        if result.needs_split:
            return self._needs_split(lane)
        if result.error is not None and result.error.kind == SlotExpiredError.kind:
            return self.budget.slot_expired(lane, result.error)
        if result.error is not None:
            return self.error(lane, result.error)
        lane.step_failures = 0
        return self.source.succeeded(self, lane, result, checked_at, due)

    def _needs_split(self, lane: Lane) -> list[Step]:
        if not self.splittable(lane.chunk):
            # The activity was told the window cannot be split (it exports what it can, reported incomplete):
            # asking for a split anyway would loop forever.
            error = ActivityError("needs_split", "the source still reports the window over its cap")
            return self.conclude(lane, ("failed", self.failure(lane, error)))
        return self.conclude(lane, ("split", None))

    def splittable(self, chunk: Chunk) -> bool:
        return can_split(chunk.seconds, self.options.min_split_seconds)

    def error(self, lane: Lane, error: ActivityError) -> list[Step]:
        """A failed step: throttling waits without spending an attempt, a retryable failure is tried again after a
        back-off until the attempts run out, anything else fails the chunk (or dooms the collection)."""
        if error.transient and error.message.startswith(THROTTLED) and lane.throttled < THROTTLED_RETRIES:
            lane.throttled += 1  # the service is busy (429 to the end of the HTTP retries): wait, without an attempt
            return self.wait(lane, later(self.now, self.options.retry_delay(lane.throttled, error.retry_after)))
        lane.step_failures += 1
        if error.dooms_collection:
            self.state.doomed = self.state.doomed or error
        elif error.retryable and lane.step_failures < self.options.max_attempts:
            delay = self.options.retry_delay(lane.step_failures, error.retry_after)
            return self.wait(lane, later(self.now, delay))
        return self.conclude(lane, ("failed", self.failure(lane, error)))

    def failure(self, lane: Lane, error: ActivityError) -> Failure:
        return Failure(lane.chunk, error.kind, error.message, lane.attempts)

    def conclude(self, lane: Lane, ending: tuple[str, object]) -> list[Step]:
        """The chunk is decided; the source may clean up first (a Graph query deleted), then the lane ends."""
        lane.ending = ending
        cleaning = self.source.concluding(self, lane)
        if cleaning is not None:
            return cleaning
        return self.end(lane)

    def end(self, lane: Lane) -> list[Step]:
        """The one place a lane ends: its chunk is done, failed or split, and its slot is free."""
        del self.lanes[lane.id]
        assert lane.ending is not None
        self.ended.append(lane)
        kind, value = lane.ending
        if kind == "done":  # the activity's ChunkSummary JSON: only its counts matter here
            assert isinstance(value, dict)
            self.state.completed += 1
            self.state.records += int(value["records"])
            if value.get("incomplete", False):
                self.state.incomplete += 1
                self.state.incomplete_windows.append(lane.chunk)
                self._note_incomplete(lane, value)
        elif kind == "failed":
            assert isinstance(value, Failure)
            self.state.failed += 1
            self.state.failures.append(value)
        elif kind == "unstarted":  # it waited for tenant budget and gave up its turn (or the collection is doomed)
            self.state.requeued.insert(0, lane.chunk)
            self.started_this_execution -= 1  # it added a few events, not a chunk's: it does not bring a switch closer
        else:
            self.state.splits += 1
            self.state.requeued[:0] = list(lane.chunk.halves())
        return self.budget.give_back(lane)

    def _note_incomplete(self, lane: Lane, summary: JsonDict) -> None:
        """Why the window is incomplete, as its evidence says (for the output)."""
        reasons = [str(e.get("detail")) for e in summary.get("evidence") or () if not e.get("complete", True)]
        self.state.incomplete_notes.append({"window": lane.chunk.span_json(), "reasons": reasons})

    # --- issuing steps (or parking them while the window switches executions) ---------------------------------
    def next_call(self, lane: Lane) -> list[Step]:
        if self.switching and not self._fits_before_switch(lane.call_seconds):
            lane.parked = PARKED_CALL
            return []
        return [self.call(lane)]

    def _fits_before_switch(self, expected: float | None) -> bool:
        """While switching, a call is still issued if it should end before the activities in flight do anyway.

        The execution cannot end before its slowest activity in flight (each expected to take as long as its lane's
        previous one), so a lane that would otherwise idle until then keeps working. Expectations come from times
        this execution recorded (``current_utc_datetime``), so every replay decides the same.
        """
        if expected is None:
            return False
        ends = self.calls_end()
        return ends is not None and later(self.now, expected) <= ends

    def calls_end(self) -> datetime | None:
        """When the activities in flight should all have ended (each expected to take as long as its lane's previous
        call); None when none is in flight."""
        ends = [
            max(self.now, later(lane.issued_at, lane.call_seconds or 0.0))
            for lane in self.lanes.values()
            if lane.issued_at is not None
        ]
        return max(ends) if ends else None

    def wait(self, lane: Lane, until: datetime) -> list[Step]:
        lane.due = until
        if self.switching:
            lane.parked = PARKED_TIMER
            return []
        return [Wait(lane.id, until)]

    def call(self, lane: Lane) -> CallActivity | CallEntity:
        """The lane's next call: the budget's when it must ask for a slot, else its source's activity."""
        if lane.phase == BUDGET:
            return self.budget.acquire(lane)
        if self.budget.needs_credit(lane) and not self.budget.kept_credit(lane):
            # a query is submitted only with a credit of the tenant's daily quota (one the collection kept, or asked)
            return self.budget.ask_credit(lane)
        if self.budget.needs_slot(lane):  # its slot is gone or its deadline passed: ask again before calling
            return self.budget.ask_again(lane)
        if self.source.submits(lane.phase):
            self.budget.spend_credit(lane)
        if lane.attempts == 0 or lane.step_failures > 0:
            # An attempt is one try at the chunk: its first call, and every call that retries a failed step.
            # Polls and the submit → collect hand-over belong to the same attempt.
            lane.attempts += 1
        lane.issued_at = self.now
        lane.calls += 1
        deadline, pages = self.budget.slot_fields(lane) if self.budget.uses_slot(lane) else (None, None)
        base = ChunkCall(
            collection_id=self.spec.collection_id,
            tenant_id=self.spec.tenant_id,
            chunk_json=lane.chunk_json(),
            filters_json=self.spec.filters,
            query_id=lane.query_id,
            allow_incomplete=lane.allow_incomplete or not self.splittable(lane.chunk),
            max_records=self.options.max_records_per_chunk,
            attempt=lane.attempts,
            high_completeness=self.options.high_completeness,
            slot_deadline=deadline,
            slot_pages=pages,
        )
        return self.source.call(lane, base)

    # --- continue-as-new, status, output ---------------------------------------------------------------------
    def carry(self) -> Carried:
        """The state for the next execution: counters, what the source learned, and every lane, parked."""
        busy = [lane.id for lane in self.lanes.values() if not lane.parked] + ([RENEW] if self.renewing else [])
        if busy:
            raise RuntimeError(f"continue-as-new with lanes {busy} busy would lose their results")
        self.source.save(self.state)
        carried = Carried.from_json(self.state.to_json())
        carried.lanes = [Lane.from_json(lane.to_json()) for lane in self.lanes.values()]
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
            "windowsInFlight": [lane.label() for lane in self.lanes.values()],
            "execution": self.state.execution,
            "stopping": self.state.doomed.message if self.state.doomed else None,
            "switching": self.switching,
            "grid": self.grid.publish(self.state, self.lanes.values()),
            "budget": self.budget.status(),
            **self.source.status(),
        }

    def output(self, manifest: str | None) -> JsonDict:
        if self.state.doomed is not None:
            status = "Failed"
        elif self.state.failed or self.state.incomplete:
            status = "CompletedWithFailures"
        else:
            status = "Completed"
        summary = self.status()
        del summary["inFlight"], summary["windowsInFlight"], summary["stopping"], summary["switching"]
        return {
            **summary,
            "grid": self.grid.publish(self.state, (), bounded=False),
            "status": status,
            "reason": self.state.doomed.to_json() if self.state.doomed else None,
            "failures": [f.to_json() for f in self.state.failures],
            "incompleteWindows": [dict(n) for n in self.state.incomplete_notes],
            "remaining": {
                "requeued": [c.to_json() for c in self.state.requeued],
                "cursor": self.state.cursor,
                "planned": self.spec.planned,
            },
            "manifest": manifest,
            "parentCollectionId": self.spec.parent_collection_id,
        }
