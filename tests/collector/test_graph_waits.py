"""Window version 2: a Graph status check waits for its query in the activity (``activities.graph_waits``).

The schedule of one waiting check, on a test clock: the checks are the ones the lane's timers would have made (at
``notBefore``, then ``next_poll`` of the running time after each), it ends at the first finished answer or before a
check that would fall past its wait or the slot's deadline, and it says how many checks it made and when the last
was sent. Then the collector orchestrator through the real SDK replay executor in SHIM mode, versions 1 and 2 side by
side on queries that finish by time: K in flight, every record once, the same checks at the same moments (so a
finished query is noticed no later), and under half the orchestration episodes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from activities.graph_waits import CHECK, Waiter, checks, run
from durable_local.model import RuntimeStatus
from shared.audit.ports import QueryState, QueryStatus, TimeWindow
from shared.models import ActivityError, ActivityResult, Chunk, iso
from shared.sinks.memory import MemorySink
from shared.sources.graph.calls import GraphChecked, GraphPoll
from shared.values import AuditFilters
from shared.window.calls import ChunkCall
from tests.collector.fakes import FakeQueryApi, synthetic
from tests.collector.replay_driver import ReplayDriver, orchestrator_handle
from tests.collector.test_orchestrator_replay import START, TENANT, collected_ids, graph_activities, head_mean, payload

T0 = datetime(2026, 3, 2, 12, tzinfo=UTC)
PENDING = ActivityResult.success(GraphChecked("pending", "running").to_json())
DONE = ActivityResult.success(GraphChecked("export", "succeeded", summary={"records": 3}, reads=1).to_json())


def poll(not_before: float, wait: float = 60.0, *, submitted: float = 0.0, deadline: float | None = None) -> GraphPoll:
    chunk = Chunk(T0, T0 + timedelta(hours=1))
    call = ChunkCall(
        "c1",
        TENANT,
        chunk.to_json(),
        {},
        query_id="q1",
        slot_deadline=iso(T0 + timedelta(seconds=deadline)) if deadline is not None else None,
        slot_pages=True if deadline is not None else None,
    )
    at = T0 + timedelta(seconds=submitted)
    return GraphPoll(call, T0 + timedelta(seconds=not_before), at, wait, 0.1, 10.0, 300.0)


class Clock:
    def __init__(self, start: float = 0.0) -> None:
        self.now = T0 + timedelta(seconds=start)

    def sleep(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def at(self) -> float:
        return (self.now - T0).total_seconds()


def played(p: GraphPoll, clock: Clock, answers: list[ActivityResult]) -> tuple[list[float], ActivityResult]:
    """The moments (seconds from T0) the schedule checked at, and its result."""
    moments: list[float] = []

    def check() -> ActivityResult:
        moments.append(clock.at())
        return answers.pop(0) if answers else PENDING

    return moments, run(p, Waiter(lambda: clock.now, clock.sleep), check)


def test_a_waiting_check_keeps_the_lanes_schedule_within_its_wait() -> None:
    """Submitted at 0, first check due at 30: checks every 10 s (the floor) while they fall within 60 s of the
    activity's start at 5; the one at 70 would not: it returns after the check at 60, saying 4 checks."""
    clock = Clock(5.0)
    moments, result = played(poll(30.0), clock, [])
    assert moments == [30.0, 40.0, 50.0, 60.0]
    checked = GraphChecked.from_json(result.data)
    assert checked.outcome == "pending" and checked.checks == 4 and checked.checked_at == T0 + timedelta(seconds=60)
    assert clock.at() == 60.0  # it returned at once, without sleeping towards the check it will not make


def test_the_intervals_grow_with_the_running_time_as_the_lanes_do() -> None:
    clock = Clock(200.0)
    moments, _ = played(poll(200.0, wait=60.0), clock, [])
    assert moments == [200.0, 220.0, 242.0]  # 10% of 200 s, then of 220 s; 266.2 is past 260


def test_it_returns_at_the_first_finished_answer_with_the_export() -> None:
    clock = Clock(0.0)
    moments, result = played(poll(30.0), clock, [PENDING, DONE])
    assert moments == [30.0, 40.0]
    checked = GraphChecked.from_json(result.data)
    assert checked.outcome == "export" and checked.summary == {"records": 3}
    assert checked.checks == 2 and checked.checked_at == T0 + timedelta(seconds=40)


def test_a_check_already_due_is_made_at_once_and_a_due_past_the_wait_is_made_at_the_bound() -> None:
    late = Clock(100.0)
    moments, result = played(poll(30.0, wait=5.0), late, [])
    assert moments == [100.0]  # due long ago: at once; the next (110) is past its 5 s
    checked = GraphChecked.from_json(result.data)  # sent at 100, due at 30: a running time is learned from the 30
    assert (checked.checked_at, checked.due_at) == (T0 + timedelta(seconds=100), T0 + timedelta(seconds=30))
    early = Clock(0.0)
    moments, _ = played(poll(90.0, wait=60.0), early, [])
    assert moments == [60.0]  # never waits longer than its bound, and checks once at least


def test_the_slot_deadline_bounds_the_wait() -> None:
    clock = Clock(0.0)
    moments, _ = played(poll(30.0, wait=60.0, deadline=45.0), clock, [])
    assert moments == [30.0, 40.0]  # the check at 50 would be past the slot's lease: the lane renews first


def test_a_failure_comes_back_as_it_was() -> None:
    failed = ActivityResult(False, error=ActivityError("transient", "503"))
    clock = Clock(0.0)
    moments, result = played(poll(30.0), clock, [PENDING, failed])
    assert moments == [30.0, 40.0] and result == failed


def test_a_cancel_request_ends_the_wait_before_its_next_check() -> None:
    """The cancel route writes the collection's cancel marker before it terminates it; a waiting check looks for it
    before each check and returns what the previous one found (or that it checked nothing): no check, no export
    after the cancel."""
    from activities.bodies import _cancel_requested
    from shared import names
    from shared.sinks.base import write_bytes

    sink = MemorySink()

    def watched(clock: Clock, answers: list[ActivityResult], cancel_at: float | None) -> tuple[list[float], Any]:
        moments: list[float] = []

        def check() -> ActivityResult:
            moments.append(clock.at())
            if cancel_at is not None and clock.at() >= cancel_at:
                write_bytes(sink, names.cancel_marker_name(TENANT, "c1"), b"{}")
            return answers.pop(0) if answers else PENDING

        cancelled = _cancel_requested(sink, poll(30.0).call)
        return moments, run(poll(30.0), Waiter(lambda: clock.now, clock.sleep), check, cancelled)

    moments, result = watched(Clock(5.0), [PENDING, DONE], None)
    assert moments == [30.0, 40.0] and GraphChecked.from_json(result.data).outcome == "export"  # no cancel
    moments, result = watched(Clock(5.0), [PENDING, DONE], 30.0)  # cancelled while its first check ran
    checked = GraphChecked.from_json(result.data)
    assert moments == [30.0] and checked.outcome == "pending" and checked.checks == 1  # the finished query unexported
    moments, result = watched(Clock(5.0), [DONE], None)  # the marker is there before its first check: none is made
    checked = GraphChecked.from_json(result.data)
    assert moments == [] and checked.outcome == "pending" and checked.checks == 0


def test_a_payload_written_before_version_2_is_one_check_at_once() -> None:
    old = GraphPoll(poll(30.0).call)
    assert old.to_json() == old.call.to_json()  # the payload of versions 0 and 1, unchanged
    assert GraphPoll.from_json(old.to_json()).wait_seconds == 0.0
    steps = checks(GraphPoll.from_json(poll(0.0).to_json()), lambda: T0)
    assert next(steps) is CHECK


# --- the orchestrator, versions 1 and 2 side by side ---------------------------------------------------------------
@dataclass
class TimedQueryApi(FakeQueryApi):
    """Queries that finish ``30 + [0, 270)`` seconds after their creation, by the running activity's clock; it notes
    how late each finished query was first seen finished, and every status check."""

    clock: Any = None
    rng: random.Random = field(default_factory=lambda: random.Random(5))
    born: dict[str, tuple[datetime, float]] = field(default_factory=dict)
    noticed: dict[str, float] = field(default_factory=dict)
    status_checks: int = 0

    def create_query(self, window: TimeWindow, filters: AuditFilters, *, display_name: str) -> str:
        query_id = super().create_query(window, filters, display_name=display_name)
        self.born[query_id] = (self.clock(), 30.0 + self.rng.random() * 270.0)
        return query_id

    def get_query(self, query_id: str) -> QueryStatus:
        self.status_checks += 1
        born, duration = self.born[query_id]
        late = (self.clock() - born).total_seconds() - duration
        if late < 0:
            return QueryStatus(QueryState.PENDING, "running")
        self.noticed.setdefault(query_id, late)
        return super().get_query(query_id)


@pytest.mark.parametrize("seed", [1, 2])
def test_version_2_holds_k_collects_every_record_once_and_halves_the_episodes_under_the_shim(seed: int) -> None:
    n, k = 16, 3
    runs: dict[int, tuple[ReplayDriver, TimedQueryApi]] = {}
    for version, wait in ((1, 0.0), (2, 60.0)):
        records = synthetic(START, n, 30)
        sink = MemorySink()
        api = TimedQueryApi(records, limit=1000, polls_until_done=1)
        driver = ReplayDriver(orchestrator_handle(), graph_activities(api, sink), seed=seed)
        api.clock = driver.activity_time
        options = {"window_version": version, "poll_wait_seconds": wait, "transitions_per_execution": 100}
        driver.start(payload("graph", n, k, m=5, **options))  # a few executions: the window switches
        assert driver.run().status is RuntimeStatus.COMPLETED
        assert max(driver.activities_in_flight) <= k
        assert sorted(collected_ids(sink)) == sorted(r["id"] for r in records)  # every record, once
        assert len(api.noticed) == n
        runs[version] = (driver, api)
    (old, old_api), (new, new_api) = runs[1], runs[2]
    assert head_mean(new.activities_in_flight, n, k) >= 0.9 * head_mean(old.activities_in_flight, n, k)
    assert new.waited > 0 and old.waited == 0 and new.executions > 2
    assert new.episodes <= old.episodes / 2, (old.episodes, new.episodes)
    # the same schedule: a finished query is noticed no later, with about as many status checks
    mean = {v: sum(api.noticed.values()) / n for v, (_, api) in runs.items()}
    assert mean[2] <= mean[1] + 0.5, mean
    assert new_api.status_checks <= old_api.status_checks * 1.1, (old_api.status_checks, new_api.status_checks)


def test_on_an_event_loop_it_sleeps_without_a_thread_and_checks_in_one() -> None:
    """The hosted trigger's path: ``asyncio.sleep`` in short steps on a moved clock (here one that runs 10 s per
    read), each check in a worker thread, the same result as the synchronous path."""
    import asyncio
    import threading

    from activities.graph_waits import run_async

    reads = iter(range(10_000))

    def moved_now() -> datetime:
        return T0 + timedelta(seconds=10 * next(reads))

    threads: list[str] = []

    def check() -> ActivityResult:
        threads.append(threading.current_thread().name)
        return DONE if len(threads) == 2 else PENDING

    result = asyncio.run(run_async(poll(30.0), Waiter(moved_now, moved=True), check))
    checked = GraphChecked.from_json(result.data)
    assert checked.outcome == "export" and checked.checks == 2
    assert threading.current_thread().name not in threads


# --- the lane's choice between a waiting call and a timer (pure) ---------------------------------------------------
class Host:
    """A window as a Graph lane sees it (``LaneHost``), switching or not, with the steps it was asked for."""

    def __init__(self, switching: bool, ends: datetime | None) -> None:
        self.now, self.switching, self.ends = T0, switching, ends

    def calls_end(self) -> datetime | None:
        return self.ends

    def next_call(self, lane: Any) -> list[Any]:
        return [("call", lane.due)]

    def wait(self, lane: Any, until: datetime) -> list[Any]:
        lane.due = until
        return [("timer", until)]


def lanes_v2() -> Any:
    from shared.sources.graph.lanes import GraphLanes
    from shared.window.state import Carried
    from tests.collector.test_window_budget import spec

    return GraphLanes(spec(source="graph", b=0, window_version=2, poll_wait_seconds=60.0), Carried())


def lane() -> Any:
    from shared.window.state import Lane

    return Lane(0, Chunk(T0, T0 + timedelta(hours=1)), "poll", query_id="q1", submitted_at=T0)


@pytest.mark.parametrize(
    ("switching", "ends", "due", "step"),
    [
        (False, None, 30.0, "call"),  # due within the wait: the activity is called now and waits for it
        (False, None, 90.0, "timer"),  # past the wait: a timer first, as before
        (True, 50.0, 30.0, "call"),  # switching: due before the activities in flight end, checked meanwhile
        (True, 50.0, 55.0, "timer"),  # ...due after: parked with its due time (the window parks a timer)
        (True, None, 30.0, "timer"),
    ],
)
def test_a_version_2_lane_calls_a_waiting_check_only_within_its_wait_and_a_switch(
    switching: bool, ends: float | None, due: float, step: str
) -> None:
    lanes, chunk_lane = lanes_v2(), lane()
    host = Host(switching, T0 + timedelta(seconds=ends) if ends is not None else None)
    steps = lanes._check_at(host, chunk_lane, T0 + timedelta(seconds=due))
    assert steps == [(step, T0 + timedelta(seconds=due))]
    if step == "call":
        base = ChunkCall("c1", TENANT, chunk_lane.chunk.to_json(), {}, query_id="q1")
        sent = GraphPoll.from_json(lanes.call(chunk_lane, base).input)
        assert sent.not_before == T0 + timedelta(seconds=due) and sent.wait_seconds == 60.0
        assert sent.wait_until == host.ends  # while switching it waits no longer than the others
