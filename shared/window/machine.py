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

from shared import names
from shared.audit.error_body import THROTTLED
from shared.errors import SlotExpiredError
from shared.models import ActivityError, ActivityResult, Chunk, JsonDict
from shared.requests.collection_spec import CollectionSpec
from shared.window import chunk_rules, progress_grid
from shared.window.budget_lanes import SERVER_PHASES, BudgetLanes
from shared.window.exchange_lanes import ExchangeLanes
from shared.window.state import (
    BUDGET,
    COLLECT,
    DELETE,
    PARKED_CALL,
    PARKED_TIMER,
    POLL,
    QUERY_DISPOSITIONS,
    RENEW,
    SUBMIT,
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

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

__all__ = ["CollectionSpec", "CollectionWindow"]


class CollectionWindow(BudgetLanes, ExchangeLanes):
    """At most K lanes in flight, refilled as lanes finish; splits, retries, doom and execution switches."""

    def __init__(
        self, spec: CollectionSpec, carried: Carried | None = None, *, now: datetime = EPOCH, budget_token: str = ""
    ) -> None:
        self.spec = spec
        self.planned = spec.planned
        self.state = carried or Carried()
        self.lanes: dict[int, Lane] = {}
        self.started_this_execution = 0
        self.now = now
        """The orchestration's ``current_utc_datetime``; the orchestrator sets it before each transition."""
        self._last_call_seconds: float | None = None
        """How long the most recent activity of any lane took (what a chunk started while switching may take)."""
        self._carried_lanes, self.state.lanes = self.state.lanes, []
        self.grid = progress_grid.GridPublisher(spec)
        self.renewing = False
        """The collection-wide renewal of its budget slots is in flight (an entity call of this execution)."""
        self.renew_holders: list[str] = []
        self.budget = spec.options.budget
        self.budget_token = budget_token
        self.free_slots = 1
        """Slots the tenant budget's latest answer left free to nobody waiting (one before any answer)."""
        self.ended: list[Lane] = []
        """Lanes ended since the orchestrator last took them (it logs each chunk's end, when not replaying)."""

    # --- queries ---------------------------------------------------------------------------------------------
    @property
    def options(self) -> RunOptions:
        return self.spec.options

    @property
    def total(self) -> int:
        """Chunks the collection will have processed: planned ones plus one per split or pre-split (one window
        became two)."""
        return self.planned + self.state.splits + self.state.exchange.presplits

    def has_pending(self) -> bool:
        return bool(self.state.requeued) or self.state.cursor < self.planned

    @property
    def budget_spent(self) -> bool:
        return self.started_this_execution >= self.options.chunks_per_execution

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
        if self.state.renew_due is not None:  # the renewal timer of the previous execution, again
            due = self.state.renew_due
            steps += [Wait(RENEW, due)] if due > self.now else self._renew()
        return steps

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
                steps += self._wait(lane, lane.due)
            else:
                steps += self._next_call(lane)
        return steps

    def fill(self) -> list[Step]:
        """Start lanes until K are in flight (or nothing may start); returns their first steps.

        While switching, a free lane still starts a chunk whose first call should end before the activities in
        flight do (the budget of chunks per execution is a bound on history, not a reason to idle).
        """
        steps: list[Step] = []
        while (
            len(self.lanes) < self.options.max_concurrency
            and self._may_ask()  # while a lane waits for tenant budget, the others wait unstarted
            and self._may_start_sized()  # Exchange: the first lane probes the tenant alone
            and (self.may_start() or (self.switching and self._fits_before_switch(self._last_call_seconds)))
        ):
            if self.state.requeued:
                chunk = self.state.requeued.pop(0)
            else:
                chunk = self.spec.planned_chunk(self.state.cursor)
                self.state.cursor += 1
            steps += self._start_lane(self._sized(chunk))
        if not self.switching:
            steps += self._unpark()
        return steps + self._settle_spares()

    def _start_lane(self, chunk: Chunk) -> list[Step]:
        """The one place a chunk's lane begins (it holds its slot until ``_end``); with a tenant budget it takes the
        slot of a lane that just ended, or asks for one (``BUDGET``) and its server-side work starts once granted."""
        lane = Lane(self.state.next_lane, chunk, self._first_phase())
        lane.started_at = self.now
        self.state.next_lane += 1
        self.started_this_execution += 1
        self.lanes[lane.id] = lane
        if self.budget.enabled:
            return self._take_slot(lane)
        return [self._call(lane)]

    def park(self, lane_id: int, *, fired: bool = False) -> None:
        """The orchestrator cancelled this lane's timer to switch executions: it waits for ``due`` in the next one.

        ``fired``: the timer fired before it could be cancelled, so the lane's call is due at once.
        """
        lane = self.lanes[lane_id]
        lane.parked = PARKED_TIMER if lane.due is not None and not fired else PARKED_CALL

    def on_timer(self, lane_id: int) -> list[Step]:
        """A lane's poll or back-off timer fired: issue its current step again (or the collection's renewal)."""
        if lane_id == RENEW:
            return self._renew()
        lane = self.lanes[lane_id]
        if lane.phase == BUDGET and self.state.doomed is not None:
            return self._conclude(lane, ("unstarted", None))
        return self._next_call(lane)

    def on_result(self, lane_id: int, result: ActivityResult) -> list[Step]:
        """A lane's activity finished; returns that lane's next step, or ``[]`` when the lane is done or parked."""
        lane = self.lanes[lane_id]
        due, lane.due = lane.due, None
        self._learn_exchange(lane, result)
        checked_at, lane.issued_at = lane.issued_at, None
        if checked_at is not None:
            lane.call_seconds = (self.now - checked_at).total_seconds()
            self._last_call_seconds = lane.call_seconds
        if lane.phase == DELETE:  # best effort: the chunk's outcome was decided before the delete
            self._count_query(str(result.data.get("disposition")) if result.ok else "deleteFailed")
            return self._end(lane)
        if result.needs_split:
            return self._needs_split(lane)
        if result.error is not None and result.error.kind == SlotExpiredError.kind:
            return self._slot_expired(lane, result.error)
        if result.error is not None:
            return self._error(lane, result.error)
        lane.step_failures = 0
        if lane.phase == SUBMIT:
            lane.query_id = str(result.data["queryId"])
            lane.phase = POLL
            lane.submitted_at = self.now
            return self._wait(lane, later(self.now, self.options.first_poll(self.state.expected_duration)))
        if lane.phase == POLL:
            return self._polled(lane, result.data, checked_at, due)
        if "summary" in result.data:  # the Exchange lane's last call committed its chunk
            return self._conclude(lane, ("done", result.data["summary"]))
        lane.cursor = dict(result.data["cursor"])  # where its next call goes on
        return self._next_call(lane)

    def _polled(self, lane: Lane, data: JsonDict, checked_at: datetime | None, due: datetime | None) -> list[Step]:
        """The Graph collect activity checked the query (and exported it when it was finished); ``due``: when the
        check was planned."""
        lane.polls += 1
        outcome = str(data.get("outcome"))
        if outcome == chunk_rules.PENDING:
            # Counted from when this check was issued, not from when its answer arrived: the delay of delivering
            # the answer is not added to every interval, so checks stay a fraction of the running time apart.
            checked = checked_at or self.now
            running = (checked - (lane.submitted_at or checked)).total_seconds()
            if chunk_rules.stuck(lane.polls, running, self.options.max_polls):
                why = f"still running after {lane.polls} status checks ({running:.0f} s)"
                return self._resubmit(lane, ActivityError("poll_timeout", f"the audit query was {why}"))
            return self._wait(lane, max(self.now, later(checked, self.options.next_poll(running))))
        if outcome == chunk_rules.FAILED:
            error = ActivityError("query_failed", f"the audit query ended {data.get('rawStatus', 'failed')}")
            return self._resubmit(lane, error)
        if lane.submitted_at is not None and checked_at is not None:
            # A check issued later than planned (the host was down) tells nothing about the time in between: the
            # query counts as done when the check was due, else an outage would be learned as a running time.
            done_by = min(checked_at, due) if due is not None else checked_at
            self.state.learn_duration((done_by - lane.submitted_at).total_seconds())
        return self._conclude(lane, ("done", data["summary"]))

    def _resubmit(self, lane: Lane, error: ActivityError) -> list[Step]:
        """A Graph query given up on (failed, vanished, stuck): submitted again under a new name, a bounded number of
        times (each costs a submission of the tenant's daily quota); then the chunk fails with the reason."""
        if lane.resubmits >= chunk_rules.RESUBMITS:
            times = f"{lane.resubmits + 1} queries" if lane.resubmits else "the query"
            final = ActivityError(error.kind, f"{error.message} ({times} given up on; resubmitted {lane.resubmits}x)")
            return self._conclude(lane, ("failed", self._failure(lane, final)))
        self._count_query("leftOnService")  # the query given up on stays on the service
        lane.resubmits += 1
        lane.phase, lane.query_id, lane.polls, lane.submitted_at = SUBMIT, None, 0, None
        return self._next_call(lane)

    def _needs_split(self, lane: Lane) -> list[Step]:
        if not self.splittable(lane.chunk):
            # The activity was told the window cannot be split (it exports what it can, reported incomplete):
            # asking for a split anyway would loop forever.
            error = ActivityError("needs_split", "the source still reports the window over its cap")
            return self._conclude(lane, ("failed", self._failure(lane, error)))
        return self._conclude(lane, ("split", None))

    def splittable(self, chunk: Chunk) -> bool:
        return chunk_rules.can_split(chunk.seconds, self.options.min_split_seconds)

    def _error(self, lane: Lane, error: ActivityError) -> list[Step]:
        if error.transient and error.message.startswith(THROTTLED) and lane.throttled < chunk_rules.THROTTLED_RETRIES:
            lane.throttled += 1  # the service is busy (429 to the end of the HTTP retries): wait, without an attempt
            return self._wait(lane, later(self.now, self.options.retry_delay(lane.throttled, error.retry_after)))
        lane.step_failures += 1
        if error.dooms_collection:
            self.state.doomed = self.state.doomed or error
        elif error.retryable and lane.step_failures < self.options.max_attempts:
            delay = self.options.retry_delay(lane.step_failures, error.retry_after)
            return self._wait(lane, later(self.now, delay))
        return self._conclude(lane, ("failed", self._failure(lane, error)))

    def _failure(self, lane: Lane, error: ActivityError) -> Failure:
        return Failure(lane.chunk, error.kind, error.message, lane.attempts)

    def _conclude(self, lane: Lane, ending: tuple[str, object]) -> list[Step]:
        lane.ending = ending
        if lane.query_id is not None:
            if self.options.delete_queries:  # ask the service to delete it before the lane gives up its slot
                lane.phase = DELETE
                lane.step_failures = 0
                return self._next_call(lane)
            self._count_query("leftOnService")
        return self._end(lane)

    def _count_query(self, disposition: str) -> None:
        """What became of a lane's query; a delete result naming no known outcome counts as a failed delete."""
        self.state.queries[disposition if disposition in QUERY_DISPOSITIONS else "deleteFailed"] += 1

    def _end(self, lane: Lane) -> list[Step]:
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
        return self._give_back(lane)

    # --- issuing steps (or parking them while the window switches executions) ---------------------------------
    def _next_call(self, lane: Lane) -> list[Step]:
        if self.switching and not self._fits_before_switch(lane.call_seconds):
            lane.parked = PARKED_CALL
            return []
        return [self._call(lane)]

    def _fits_before_switch(self, expected: float | None) -> bool:
        """While switching, a call is still issued if it should end before the activities in flight do anyway.

        The execution cannot end before its slowest activity in flight (each expected to take as long as its lane's
        previous one), so a lane that would otherwise idle until then keeps working. Expectations come from times
        this execution recorded (``current_utc_datetime``), so every replay decides the same.
        """
        if expected is None:
            return False
        ends = [
            max(self.now, later(lane.issued_at, lane.call_seconds or 0.0))
            for lane in self.lanes.values()
            if lane.issued_at is not None
        ]
        return bool(ends) and later(self.now, expected) <= max(ends)

    def _wait(self, lane: Lane, until: datetime) -> list[Step]:
        lane.due = until
        if self.switching:
            lane.parked = PARKED_TIMER
            return []
        return [Wait(lane.id, until)]

    def _call(self, lane: Lane) -> CallActivity | CallEntity:
        if lane.phase == BUDGET:
            return self._acquire(lane)
        if self._needs_credit(lane):  # a Graph query is submitted only with a credit of the tenant's daily quota
            return self._ask_credit(lane)
        if self._needs_slot(lane):  # its slot is gone or its deadline passed: ask again before calling
            return self._ask_again(lane)
        if lane.phase == SUBMIT:
            self._spend_credit(lane)
        if lane.attempts == 0 or lane.step_failures > 0:
            # An attempt is one try at the chunk: its first call, and every call that retries a failed step.
            # Polls and the submit → collect hand-over belong to the same attempt.
            lane.attempts += 1
        lane.issued_at = self.now
        lane.calls += 1
        payload: JsonDict = {
            "collectionId": self.spec.collection_id,
            "tenantId": self.spec.tenant_id,
            "chunk": lane.chunk_json(),
            "filters": self.spec.filters,
            "queryId": lane.query_id,
            "allowIncomplete": lane.allow_incomplete or not self.splittable(lane.chunk),
            "maxRecords": self.options.max_records_per_chunk,
            "attempt": lane.attempts,
            "highCompleteness": self.options.high_completeness,
        }
        if lane.phase in SERVER_PHASES and self.budget.enabled:
            payload.update(self._slot_payload(lane))
        if lane.phase == SUBMIT and lane.resubmits:
            payload["resubmit"] = lane.resubmits  # a new query under a name of its own
        if lane.phase == COLLECT:
            payload["cursor"] = lane.cursor
            payload["call"] = lane.calls - 1  # every call writes its own part, retries included
            payload["splitOnFull"] = self._split_on_full()
            payload["expectedRecords"] = self._expected_records(lane)  # when an empty first answer is surprising
        name = {
            SUBMIT: names.ACTIVITY_GRAPH_SUBMIT,
            POLL: names.ACTIVITY_GRAPH_COLLECT,
            DELETE: names.ACTIVITY_GRAPH_DELETE,
            COLLECT: names.ACTIVITY_EXCHANGE_COLLECT,
        }[lane.phase]
        return CallActivity(lane.id, name, payload)

    # --- continue-as-new, status, output ---------------------------------------------------------------------
    def carry(self) -> Carried:
        """The state for the next execution: counters, what polling learned, and every lane, parked."""
        busy = [lane.id for lane in self.lanes.values() if not lane.parked] + ([RENEW] if self.renewing else [])
        if busy:
            raise RuntimeError(f"continue-as-new with lanes {busy} busy would lose their results")
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
            "queries": dict(self.state.queries) if self.spec.source == "graph" else None,
            "budget": self._budget_status(),
            "exchange": self._exchange_status(),
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
