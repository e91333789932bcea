"""A Graph chunk's lane: submit its audit query, check it on durable timers (an export at once when it is done),
resubmit a query given up on, delete it when deletion is on; what the collection learns of its queries' running
times, and what became of each query.

Phases: ``SUBMIT`` -> ``POLL`` (a timer, then one activity that checks the query and exports it once it is done;
from window version 2 a check due within ``RunOptions.poll_wait`` is an activity called at once that waits for it
and goes on checking, ``shared.sources.graph.calls.GraphPoll``) [-> ``DELETE`` when deletion is on]. Pure, like
the window it runs in (``shared.window.lanes.SourceLanes``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from shared import names
from shared.models import ActivityError, ActivityResult, Chunk, JsonDict
from shared.requests.collection_spec import CollectionSpec
from shared.sources.graph import query_rules
from shared.sources.graph.calls import GraphChecked, GraphDeleted, GraphPoll, GraphSubmit, GraphSubmitted
from shared.window.calls import ChunkCall
from shared.window.lanes import LaneHost
from shared.window.state import CallActivity, Carried, Lane, Step, later

SUBMIT, POLL, DELETE = "submit", "poll", "delete"

QUERY_DISPOSITIONS = ("deleted", "leftOnService", "deleteUnsupported", "deleteFailed")
"""What became of each Graph query: deleted (a 2xx said so), left on the service (deletion off), delete answered
404 (not supported), delete failed otherwise."""

LEARNED_DURATIONS = 8
"""How many recent query running times the expectation is learned from (carried across continue-as-new)."""

QUERIES, DURATIONS = "queries", "durations"
"""Its sections of the carried state (``Carried.sections``)."""


def no_queries() -> dict[str, int]:
    return dict.fromkeys(QUERY_DISPOSITIONS, 0)


class GraphLanes:
    """The lanes of one Graph collection (``shared.window.lanes.SourceLanes``)."""

    first_phase = SUBMIT
    added_chunks = 0

    def __init__(self, spec: CollectionSpec, state: Carried) -> None:
        self.options = spec.options
        carried = state.sections.get(QUERIES) or {}
        self.queries: dict[str, int] = {**no_queries(), **{k: int(v) for k, v in carried.items()}}
        """Graph queries by disposition (``QUERY_DISPOSITIONS``)."""
        self.durations: list[float] = [float(d) for d in state.sections.get(DURATIONS) or []]
        """Running times (seconds) of this collection's most recent finished queries, newest last."""
        self._wait_until: dict[int, datetime] = {}
        """Version 2, while the window switches: the moment a lane's check just called must end its wait by."""

    # --- what the window asks --------------------------------------------------------------------------------
    def resume_phase(self, lane: Lane) -> str:
        return POLL if lane.query_id is not None else SUBMIT

    def uses_slot(self, phase: str) -> bool:
        return phase in (SUBMIT, POLL)  # a DELETE ends a query: it needs no slot

    def submits(self, phase: str) -> bool:
        return phase == SUBMIT  # each submission takes a credit of the tenant's daily quota

    def has_progress(self, lane: Lane) -> bool:
        return lane.query_id is not None

    def may_start(self, lanes: Mapping[int, Lane]) -> bool:
        return True

    def sized(self, host: LaneHost, chunk: Chunk) -> Chunk:
        return chunk

    def learn(self, lane: Lane, result: ActivityResult) -> None:
        return None

    def call(self, lane: Lane, base: ChunkCall) -> CallActivity:
        if lane.phase == SUBMIT:
            return CallActivity(lane.id, names.ACTIVITY_GRAPH_SUBMIT, GraphSubmit(base, lane.resubmits).to_json())
        if lane.phase == DELETE:
            return CallActivity(lane.id, names.ACTIVITY_GRAPH_DELETE, base.to_json())
        options = self.options
        poll = GraphPoll(
            base,
            lane.due,
            lane.submitted_at,
            options.poll_wait,
            options.poll_fraction,
            options.poll_min_interval_seconds,
            options.poll_max_interval_seconds,
            self._wait_until.pop(lane.id, None),
        )
        return CallActivity(lane.id, names.ACTIVITY_GRAPH_COLLECT, poll.to_json())

    def ended(self, host: LaneHost, lane: Lane, result: ActivityResult) -> list[Step] | None:
        if lane.phase != DELETE:
            return None
        # best effort: the chunk's outcome was decided before the delete
        self._count(GraphDeleted.from_json(result.data).disposition if result.ok else "deleteFailed")
        return host.end(lane)

    def succeeded(
        self, host: LaneHost, lane: Lane, result: ActivityResult, checked_at: datetime | None, due: datetime | None
    ) -> list[Step]:
        if lane.phase == SUBMIT:
            lane.query_id = GraphSubmitted.from_json(result.data).query_id
            lane.phase = POLL
            lane.submitted_at = host.now
            return self._check_at(host, lane, later(host.now, self.options.first_poll(self.expected_duration)))
        return self._polled(host, lane, GraphChecked.from_json(result.data), checked_at, due)

    def concluding(self, host: LaneHost, lane: Lane) -> list[Step] | None:
        if lane.query_id is None:
            return None
        if self.options.delete_queries:  # ask the service to delete it before the lane gives up its slot
            lane.phase = DELETE
            lane.step_failures = 0
            return host.next_call(lane)
        self._count("leftOnService")
        return None

    def status(self) -> JsonDict:
        return {QUERIES: dict(self.queries)}

    def save(self, state: Carried) -> None:
        state.sections[QUERIES] = dict(self.queries)
        state.sections[DURATIONS] = list(self.durations)

    # --- the query's life ------------------------------------------------------------------------------------
    def _polled(
        self, host: LaneHost, lane: Lane, checked: GraphChecked, checked_at: datetime | None, due: datetime | None
    ) -> list[Step]:
        """The collect activity checked the query (and exported it when it was finished); ``due``: when the check was
        planned."""
        lane.polls += checked.checks or 1
        now = host.now
        if checked.outcome == query_rules.PENDING:
            # Counted from when this check was issued, not from when its answer arrived: the delay of delivering
            # the answer is not added to every interval, so checks stay a fraction of the running time apart.
            # An activity that waited for its checks (version 2) says when it sent its last one.
            issued = checked.checked_at or checked_at or now
            running = (issued - (lane.submitted_at or issued)).total_seconds()
            if query_rules.stuck(lane.polls, running, self.options.max_polls):
                why = f"still running after {lane.polls} status checks ({running:.0f} s)"
                return self._resubmit(host, lane, ActivityError("poll_timeout", f"the audit query was {why}"))
            return self._check_at(host, lane, max(now, later(issued, self.options.next_poll(running))))
        if checked.outcome == query_rules.FAILED:
            error = ActivityError("query_failed", f"the audit query ended {checked.raw_status}")
            return self._resubmit(host, lane, error)
        if lane.submitted_at is not None and checked.checked_at is not None:
            # The activity made the check that found it finished: it counts as done when that check was due (it is
            # sent at that moment or a little after; late when the activity started late), as below.
            done_by = min(checked.checked_at, checked.due_at or checked.checked_at)
            self._learn_duration((done_by - lane.submitted_at).total_seconds())
        elif lane.submitted_at is not None and checked_at is not None:
            # A check issued later than planned (the host was down) tells nothing about the time in between: the
            # query counts as done when the check was due, else an outage would be learned as a running time.
            done_by = min(checked_at, due) if due is not None else checked_at
            self._learn_duration((done_by - lane.submitted_at).total_seconds())
        return host.conclude(lane, ("done", checked.summary))

    def _check_at(self, host: LaneHost, lane: Lane, due: datetime) -> list[Step]:
        """The lane's next status check, due at ``due``: from version 2, when it is due within the activity's wait,
        the activity is called at once and waits for it itself (``lane.due`` is its ``notBefore``): one episode for
        its checks instead of two per check (the timer's, then the activity's)."""
        wait = self.options.poll_wait
        if wait > 0 and host.switching:
            # The execution ends once the activities in flight have (a waiting check among them, up to its wait):
            # a check due before then is still made, waiting no longer than they do, rather than parked until the
            # next execution; the others park with their due time.
            ends = host.calls_end()
            if ends is not None and due < ends:
                lane.due = due
                # what the window expects of this call: to end with the others (a millisecond early: it fits)
                lane.call_seconds = max(0.0, (ends - host.now).total_seconds() - 0.001)
                self._wait_until[lane.id] = ends
                return host.next_call(lane)
            return host.wait(lane, due)
        if wait > 0 and (due - host.now).total_seconds() <= wait:
            lane.due = due
            return host.next_call(lane)
        return host.wait(lane, due)

    def _resubmit(self, host: LaneHost, lane: Lane, error: ActivityError) -> list[Step]:
        """A query given up on (failed, vanished, stuck): submitted again under a new name, a bounded number of times
        (each costs a submission of the tenant's daily quota); then the chunk fails with the reason."""
        if lane.resubmits >= query_rules.RESUBMITS:
            times = f"{lane.resubmits + 1} queries" if lane.resubmits else "the query"
            final = ActivityError(error.kind, f"{error.message} ({times} given up on; resubmitted {lane.resubmits}x)")
            return host.conclude(lane, ("failed", host.failure(lane, final)))
        self._count("leftOnService")  # the query given up on stays on the service
        lane.resubmits += 1
        lane.phase, lane.query_id, lane.polls, lane.submitted_at = SUBMIT, None, 0, None
        return host.next_call(lane)

    def _count(self, disposition: str) -> None:
        """What became of a lane's query; a delete result naming no known outcome counts as a failed delete."""
        self.queries[disposition if disposition in QUERY_DISPOSITIONS else "deleteFailed"] += 1

    def _learn_duration(self, seconds: float) -> None:
        self.durations = [*self.durations, max(0.0, seconds)][-LEARNED_DURATIONS:]

    @property
    def expected_duration(self) -> float | None:
        """The shortest recent running time: a first check a little before it is rarely late for any query."""
        return min(self.durations) if self.durations else None
