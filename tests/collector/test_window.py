"""The sliding-window state machine, driven by a tiny simulator that answers its steps."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from shared import names
from shared.models import ActivityError, ActivityResult, Chunk, ChunkSummary
from shared.planning import ChunkPlan
from shared.window import CollectionSpec, CollectionWindow
from shared.window_state import CallActivity, Carried, RunOptions, Step, Wait

T0 = datetime(2024, 11, 17, tzinfo=UTC)
Responder = Callable[[CallActivity, CollectionWindow], ActivityResult]


def spec(n: int = 12, k: int = 3, source: str = "graph", m: int = 1000, **options: object) -> CollectionSpec:
    return CollectionSpec(
        collection_id="c1",
        tenant_id="contoso.onmicrosoft.com",
        source=source,
        filters={},
        options=RunOptions(max_concurrency=k, chunks_per_execution=m, **options),  # type: ignore[arg-type]
        plan=ChunkPlan(T0, T0 + timedelta(hours=n), timedelta(hours=1)),
    )


def summary_for(step: CallActivity, records: int = 5) -> ActivityResult:
    chunk = Chunk.from_json(step.input["chunk"])
    return ActivityResult.success(
        ChunkSummary(chunk, records, 0, 0, 0, "b", "h", 1, bool(step.input["allowIncomplete"])).to_json()
    )


def happy(step: CallActivity, _: CollectionWindow) -> ActivityResult:
    if step.name == names.ACTIVITY_GRAPH_SUBMIT:
        return ActivityResult.success({"queryId": f"q-{step.lane}"})
    if step.name == names.ACTIVITY_GRAPH_STATUS:
        return ActivityResult.success({"state": "succeeded", "limitExceeded": False})
    if step.name == names.ACTIVITY_GRAPH_DELETE:
        return ActivityResult.success({"deleted": True, "disposition": "deleted"})
    return summary_for(step)


def run(window: CollectionWindow, respond: Responder, rng: random.Random, log: list[int] | None = None) -> list[Step]:
    """Answer steps in random order until the window drains; returns every step issued."""
    pending: list[Step] = window.fill()
    issued = list(pending)
    while pending:
        assert len(window.lanes) <= window.options.max_concurrency
        step = pending.pop(rng.randrange(len(pending)))
        if log is not None:
            log.append(len(window.lanes))
        if isinstance(step, Wait):
            new = window.on_timer(step.lane)
        else:
            new = window.on_result(step.lane, respond(step, window))
        new += window.fill()
        if window.may_start():  # work left and budget left: the window must be full
            assert len(window.lanes) == window.options.max_concurrency
        issued += new
        pending += new
        # one outstanding step per lane, always
        assert sorted(s.lane for s in pending) == sorted(window.lanes)
    return issued


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40), k=st.integers(1, 6), seed=st.integers(0, 10**6), source=st.sampled_from(["graph", "exchange"])
)
def test_never_more_than_k_and_k_held_until_the_tail(n: int, k: int, seed: int, source: str) -> None:
    window = CollectionWindow(spec(n, k, source))
    in_flight: list[int] = []
    run(window, happy, random.Random(seed), in_flight)
    assert max(in_flight) <= k
    assert window.finished and window.state.completed == n and window.state.failed == 0
    assert window.state.records == 5 * n
    assert window.output("m")["status"] == "Completed"


def test_lane_refills_as_soon_as_one_finishes() -> None:
    window = CollectionWindow(spec(5, 2, "exchange"))
    first = window.fill()
    assert [s.lane for s in first] == [0, 1] and window.fill() == []
    assert isinstance(first[1], CallActivity)
    assert window.on_result(1, summary_for(first[1])) == []
    refill = window.fill()
    assert len(refill) == 1 and isinstance(refill[0], CallActivity)
    assert refill[0].input["chunk"]["start"] == "2024-11-17T02:00:00Z"


def test_graph_lane_keeps_its_slot_through_submit_poll_export_delete() -> None:
    options = {"poll_interval_seconds": 30, "poll_backoff": 2, "poll_max_interval_seconds": 100}
    window = CollectionWindow(spec(1, 1, delete_queries=True, **options))
    (step,) = window.fill()
    assert isinstance(step, CallActivity) and step.name == names.ACTIVITY_GRAPH_SUBMIT
    (wait,) = window.on_result(0, ActivityResult.success({"queryId": "q-7"}))
    assert wait == Wait(0, 30)
    (status,) = window.on_timer(0)
    assert isinstance(status, CallActivity) and status.name == names.ACTIVITY_GRAPH_STATUS
    assert status.input["queryId"] == "q-7"
    delays = []
    for _ in range(4):
        (wait,) = window.on_result(0, ActivityResult.success({"state": "pending"}))
        assert isinstance(wait, Wait)
        delays.append(wait.seconds)
        window.on_timer(0)
    assert delays == [30, 60, 100, 100]  # back-off, capped
    (export,) = window.on_result(0, ActivityResult.success({"state": "succeeded"}))
    assert isinstance(export, CallActivity) and export.name == names.ACTIVITY_GRAPH_EXPORT
    (delete,) = window.on_result(0, summary_for(export, 9))
    assert isinstance(delete, CallActivity) and delete.name == names.ACTIVITY_GRAPH_DELETE
    assert len(window.lanes) == 1 and window.state.completed == 0  # still holds its slot
    assert window.on_result(0, ActivityResult.success({"deleted": False})) == []
    assert window.state.completed == 1 and window.state.records == 9 and window.finished


def test_transient_errors_retry_with_backoff_then_fail_the_chunk_and_go_on() -> None:
    window = CollectionWindow(spec(2, 1, "exchange", max_attempts=3, retry_base_seconds=10, retry_max_seconds=15))
    (_step,) = window.fill()
    transient = ActivityResult(False, error=ActivityError("transient", "429", retry_after=None))
    assert window.on_result(0, transient) == [Wait(0, 10)]
    (again,) = window.on_timer(0)
    assert isinstance(again, CallActivity) and again.input["attempt"] == 2
    throttled = ActivityResult(False, error=ActivityError("transient", "429", retry_after=40))
    assert window.on_result(0, throttled) == [Wait(0, 40)]  # Retry-After wins over the cap
    window.on_timer(0)
    assert window.on_result(0, transient) == []  # third failure: the chunk fails, the collection goes on
    assert window.state.failed == 1 and window.state.failures[0].attempts == 3
    (next_step,) = window.fill()
    assert isinstance(next_step, CallActivity) and next_step.lane == 1


def test_retried_graph_export_reuses_the_query() -> None:
    window = CollectionWindow(spec(1, 1, max_attempts=3))
    window.fill()
    window.on_result(0, ActivityResult.success({"queryId": "q-1"}))
    window.on_timer(0)
    (export,) = window.on_result(0, ActivityResult.success({"state": "succeeded"}))
    assert isinstance(export, CallActivity)
    window.on_result(0, ActivityResult(False, error=ActivityError("transient", "503")))
    (retry,) = window.on_timer(0)
    assert isinstance(retry, CallActivity)
    assert retry.name == names.ACTIVITY_GRAPH_EXPORT and retry.input["queryId"] == "q-1"


def test_needs_split_halves_and_requeues_down_to_the_minimum_then_incomplete() -> None:
    window = CollectionWindow(spec(1, 1, "exchange", min_split_seconds=1200))  # 60 min -> 30 -> 15 (< 20: stop)
    issued: list[CallActivity] = []

    def respond(step: CallActivity, _: CollectionWindow) -> ActivityResult:
        issued.append(step)
        chunk = Chunk.from_json(step.input["chunk"])
        if chunk.start == T0 and not step.input["allowIncomplete"]:
            return ActivityResult.split({"limit": 50})
        return summary_for(step)

    run(window, respond, random.Random(1))
    windows = [
        (s.input["chunk"]["start"][11:16], s.input["chunk"]["end"][11:16], s.input["allowIncomplete"]) for s in issued
    ]
    assert windows[:2] == [("00:00", "01:00", False), ("00:00", "00:30", False)]
    assert ("00:00", "00:30", True) in windows  # minimum window: collected as far as possible
    assert window.state.splits == 1 and window.total == 2
    assert window.state.completed == 2 and window.state.incomplete == 1
    assert window.output(None)["status"] == "CompletedWithFailures"


def test_graph_limit_exceeded_splits_and_deletes_the_query_first() -> None:
    window = CollectionWindow(spec(1, 1, min_split_seconds=60, delete_queries=True))
    window.fill()
    window.on_result(0, ActivityResult.success({"queryId": "q-1"}))
    window.on_timer(0)
    (delete,) = window.on_result(0, ActivityResult.success({"state": "succeeded", "limitExceeded": True}))
    assert isinstance(delete, CallActivity) and delete.name == names.ACTIVITY_GRAPH_DELETE
    window.on_result(0, ActivityResult.success({"deleted": True, "disposition": "deleted"}))
    assert [c.label() for c in window.state.requeued] == [
        "2024-11-17T00:00:00Z/2024-11-17T00:30:00Z",
        "2024-11-17T00:30:00Z/2024-11-17T01:00:00Z",
    ]
    # Deletion off (the default): the split happens at once and the query is left on the service.
    plain = CollectionWindow(spec(1, 1, min_split_seconds=60))
    plain.fill()
    plain.on_result(0, ActivityResult.success({"queryId": "q-1"}))
    plain.on_timer(0)
    assert plain.on_result(0, ActivityResult.success({"state": "succeeded", "limitExceeded": True})) == []
    assert plain.state.splits == 1 and plain.state.queries["leftOnService"] == 1


def test_dooming_error_stops_scheduling_lets_lanes_finish_and_fails_the_collection() -> None:
    window = CollectionWindow(spec(10, 3, "exchange"))
    steps = window.fill()
    assert len(steps) == 3
    doom = ActivityResult(False, error=ActivityError("authentication", "bad secret (AUDIT_CLIENT_SECRET)", True))
    assert window.on_result(0, doom) == []
    assert window.fill() == []  # nothing new starts
    assert len(window.lanes) == 2  # in-flight lanes go on
    for step in steps[1:]:
        assert isinstance(step, CallActivity)
        window.on_result(step.lane, summary_for(step))
    assert window.finished and not window.should_continue_as_new
    out = window.output(None)
    assert out["status"] == "Failed" and out["reason"]["kind"] == "authentication"
    assert out["completed"] == 2 and out["failed"] == 1
    assert len(window.spec.retry_chunks(out)) == 8  # the failed one plus the seven never started


def test_continue_as_new_only_at_drained_points_and_progress_carries_over() -> None:
    spec_ = spec(7, 2, "exchange", m=3)
    carried: Carried | None = None
    executions = 0
    while True:
        window = CollectionWindow(spec_, carried)
        executions += 1
        issued = run(window, happy, random.Random(executions))
        assert len([s for s in issued if isinstance(s, CallActivity)]) <= 3  # at most M chunks per execution
        assert not window.lanes
        if not window.should_continue_as_new:
            break
        carried = Carried.from_json(window.carry().to_json())  # through JSON, as continue_as_new does
    assert executions == 3 and window.state.execution == 3
    assert window.state.completed == 7 and window.state.cursor == 7
    assert window.status()["percent"] == 100.0


def test_status_lists_windows_in_flight() -> None:
    window = CollectionWindow(spec(4, 2))
    window.fill()
    status = window.status()
    assert status["inFlight"] == 2 and status["total"] == 4 and status["percent"] == 0.0
    assert status["windowsInFlight"] == [
        "2024-11-17T00:00:00Z/2024-11-17T01:00:00Z",
        "2024-11-17T01:00:00Z/2024-11-17T02:00:00Z",
    ]


def test_attempts_count_tries_of_the_chunk_not_its_steps() -> None:
    """Submit, polls and export of one clean try are one attempt; each retry of a failed step is another."""
    exports: dict[int, list[int]] = {}
    failed_once: set[int] = set()

    def export_fails_once_on_lane_0(step: CallActivity, window: CollectionWindow) -> ActivityResult:
        if step.name == names.ACTIVITY_GRAPH_EXPORT:
            exports.setdefault(step.lane, []).append(int(step.input["attempt"]))
            if step.lane == 0 and 0 not in failed_once:
                failed_once.add(0)
                return ActivityResult(False, error=ActivityError("transient", "503"))
        return happy(step, window)

    window = CollectionWindow(spec(2, 2, retry_base_seconds=1.0))
    run(window, export_fails_once_on_lane_0, random.Random(3))
    assert exports == {0: [1, 2], 1: [1]}
    assert window.state.completed == 2 and window.state.failed == 0


def test_sink_and_crash_failures_are_retried_but_permanent_ones_are_not() -> None:
    window = CollectionWindow(spec(3, 3, "exchange", max_attempts=2, retry_base_seconds=10))
    steps = window.fill()
    assert len(steps) == 3
    # An output write that failed is idempotent to redo; an activity that raised may have met a worker crash.
    assert window.on_result(0, ActivityResult(False, error=ActivityError("sink", "blob write failed"))) == [Wait(0, 10)]
    assert window.on_result(1, ActivityResult(False, error=ActivityError("activity_crashed", "boom"))) == [Wait(1, 10)]
    # A permanent API error would fail the same way again: the chunk fails at once.
    assert window.on_result(2, ActivityResult(False, error=ActivityError("permanent", "400 bad filter"))) == []
    assert [f.kind for f in window.state.failures] == ["permanent"]
    (again,) = window.on_timer(0)
    assert isinstance(again, CallActivity) and again.input["attempt"] == 2
    assert window.on_result(0, summary_for(again)) == []
    assert window.state.completed == 1


def test_a_graph_chunk_over_the_record_budget_is_split_until_the_minimum_window() -> None:
    window = CollectionWindow(spec(1, 1, max_records_per_chunk=500, min_split_seconds=1800, delete_queries=True))
    (_submit,) = window.fill()
    window.on_result(0, ActivityResult.success({"queryId": "q-0"}))
    (_poll,) = window.on_timer(0)
    big = {"state": "succeeded", "limitExceeded": False, "approximateCount": 900}
    (delete,) = window.on_result(0, ActivityResult.success(big))
    assert isinstance(delete, CallActivity) and delete.name == names.ACTIVITY_GRAPH_DELETE  # frees the query first
    assert window.on_result(0, ActivityResult.success({"deleted": True})) == []
    assert window.state.splits == 1 and [c.seconds for c in window.state.requeued] == [1800, 1800]
    (_half,) = window.fill()
    window.on_result(1, ActivityResult.success({"queryId": "q-1"}))
    window.on_timer(1)
    # A half at the minimum window is exported as is, complete (not reported incomplete).
    (export,) = window.on_result(1, ActivityResult.success(big))
    assert isinstance(export, CallActivity) and export.name == names.ACTIVITY_GRAPH_EXPORT
    assert export.input["allowIncomplete"] is False
    # Under the budget (or with the budget off) nothing splits.
    small = CollectionWindow(spec(1, 1, max_records_per_chunk=0))
    small.fill()
    small.on_result(0, ActivityResult.success({"queryId": "q-0"}))
    small.on_timer(0)
    (export,) = small.on_result(0, ActivityResult.success(big))
    assert export.name == names.ACTIVITY_GRAPH_EXPORT and small.state.splits == 0
