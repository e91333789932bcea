"""The sliding-window state machine, driven by a tiny simulator that answers its steps (executions switching:
``test_window_switch.py``)."""

from __future__ import annotations

import random
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from shared import names
from shared.audit.ports import QueryState, QueryStatus
from shared.models import ActivityError, ActivityResult, Chunk
from shared.sources.graph import query_rules as chunk_rules
from shared.sources.registry import window_for
from shared.window.machine import CollectionWindow, can_split
from shared.window.state import CallActivity, Carried, RunOptions, Wait
from tests.collector.window_sim import PENDING, T0, collected, happy, run, spec, summary_for


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40), k=st.integers(1, 6), seed=st.integers(0, 10**6), source=st.sampled_from(["graph", "exchange"])
)
def test_never_more_than_k_and_k_held_until_the_tail(n: int, k: int, seed: int, source: str) -> None:
    window = window_for(spec(n, k, source))
    in_flight: list[int] = []
    run(window, happy, random.Random(seed), in_flight)
    assert max(in_flight) <= k
    assert window.finished and window.state.completed == n and window.state.failed == 0
    assert window.state.records == 5 * n
    assert window.output("m")["status"] == "Completed"


def test_lane_refills_as_soon_as_one_finishes() -> None:
    window = window_for(spec(5, 2, "exchange"))
    first = window.fill()
    assert [s.lane for s in first] == [0, 1] and window.fill() == []
    assert isinstance(first[1], CallActivity)
    assert window.on_result(1, summary_for(first[1])) == []
    refill = window.fill()
    assert len(refill) == 1 and isinstance(refill[0], CallActivity)
    assert refill[0].input["chunk"]["start"] == "2024-11-17T02:00:00Z"


def test_graph_lane_keeps_its_slot_through_submit_polls_export_delete() -> None:
    options = {"poll_interval_seconds": 30, "poll_min_interval_seconds": 10, "poll_max_interval_seconds": 100}
    window = window_for(spec(1, 1, delete_queries=True, **options), now=T0)
    (step,) = window.fill()
    assert isinstance(step, CallActivity) and step.name == names.ACTIVITY_GRAPH_SUBMIT
    (wait,) = window.on_result(0, ActivityResult.success({"queryId": "q-7"}))
    assert wait == Wait(0, T0 + timedelta(seconds=30))  # nothing learned yet: the first check after 30 s
    delays = []
    for _ in range(5):
        window.now = wait.until
        (check,) = window.on_timer(0)
        assert isinstance(check, CallActivity) and check.name == names.ACTIVITY_GRAPH_COLLECT
        assert check.input["queryId"] == "q-7"
        (wait,) = window.on_result(0, PENDING)
        assert isinstance(wait, Wait)
        delays.append(wait.after(window.now))
    # a tenth of the time the query has run, at least 10 s, at most 100 s
    assert delays == [10, 10, 10, 10, 10]
    window.now = T0 + timedelta(seconds=600)
    window.on_timer(0)
    (wait,) = window.on_result(0, PENDING)
    assert wait.after(window.now) == 60
    window.now = T0 + timedelta(seconds=3000)
    (check,) = window.on_timer(0)
    (wait,) = window.on_result(0, PENDING)
    assert wait.after(window.now) == 100
    window.now = wait.until
    (check,) = window.on_timer(0)
    assert isinstance(check, CallActivity)
    (delete,) = window.on_result(0, collected(check, 9))
    assert isinstance(delete, CallActivity) and delete.name == names.ACTIVITY_GRAPH_DELETE
    assert len(window.lanes) == 1 and window.state.completed == 0  # still holds its slot
    assert window.on_result(0, ActivityResult.success({"deleted": False})) == []
    assert window.state.completed == 1 and window.state.records == 9 and window.finished
    assert window.source.durations == [3100.0]  # submitted at T0, found finished by the check issued at 3,100 s


def test_polls_start_a_little_before_the_learned_running_time() -> None:
    options = {"poll_interval_seconds": 30, "poll_min_interval_seconds": 5, "poll_max_interval_seconds": 300}
    learned = Carried()
    learned.sections["durations"] = [400.0, 200.0, 300.0]
    window = window_for(spec(4, 1, **options), learned, now=T0)
    window.fill()
    (wait,) = window.on_result(0, ActivityResult.success({"queryId": "q-0"}))
    assert wait.after(T0) == 180  # 0.9 x the shortest recent running time
    window.now = wait.until
    (check,) = window.on_timer(0)
    (wait,) = window.on_result(0, PENDING)
    assert wait.after(window.now) == 18  # then a tenth of the time it has run
    window.now = wait.until
    (check,) = window.on_timer(0)
    assert isinstance(check, CallActivity)
    assert window.on_result(0, collected(check)) == []
    assert window.source.durations == [400.0, 200.0, 300.0, 198.0]
    carried = Carried.from_json(window.carry().to_json())
    lanes = window_for(window.spec, carried).source
    assert lanes.expected_duration == 198.0  # what was learned survives continue-as-new
    for i in range(10):
        lanes._learn_duration(1000.0 + i)
    assert len(lanes.durations) == 8 and lanes.expected_duration == 1002.0  # only the recent ones count


def test_poll_options_keep_the_noticing_delay_within_the_fraction() -> None:
    options = RunOptions(poll_min_interval_seconds=1, poll_fraction=0.1, poll_max_interval_seconds=10_000)
    running = options.first_poll(None)
    for _ in range(200):
        step = options.next_poll(running)
        # a query that finished just after this check is noticed at the next: at most 10% of its running time late
        assert step <= 0.1 * running + 1e-9 or step == options.poll_min_interval_seconds
        running += step
    assert options.first_poll(20.0) == 18.0 and RunOptions(poll_min_interval_seconds=30).first_poll(20.0) == 30.0


def test_a_maximum_poll_interval_below_the_minimum_caps_every_check() -> None:
    # COLLECTOR_POLL_MAX_INTERVAL_SECONDS=0.2 with the minimum left at its default (10 s): checks stay 0.2 s apart,
    # instead of the default minimum silently stretching every poll (and a fast test collection) to 10 s.
    options = RunOptions(poll_interval_seconds=0.1, poll_max_interval_seconds=0.2)
    assert options.poll_min_interval_seconds == 10.0
    assert options.first_poll(None) == 0.2
    assert options.next_poll(1.0) == 0.2 and options.next_poll(10_000.0) == 0.2


def test_transient_errors_retry_with_backoff_then_fail_the_chunk_and_go_on() -> None:
    window = window_for(spec(2, 1, "exchange", max_attempts=3, retry_base_seconds=10, retry_max_seconds=15), now=T0)
    (_step,) = window.fill()
    transient = ActivityResult(False, error=ActivityError("transient", "429", retry_after=None))
    assert window.on_result(0, transient) == [Wait(0, T0 + timedelta(seconds=10))]
    (again,) = window.on_timer(0)
    assert isinstance(again, CallActivity) and again.input["attempt"] == 2
    throttled = ActivityResult(False, error=ActivityError("transient", "429", retry_after=40))
    assert window.on_result(0, throttled) == [Wait(0, T0 + timedelta(seconds=40))]  # Retry-After wins over the cap
    window.on_timer(0)
    assert window.on_result(0, transient) == []  # third failure: the chunk fails, the collection goes on
    assert window.state.failed == 1 and window.state.failures[0].attempts == 3
    (next_step,) = window.fill()
    assert isinstance(next_step, CallActivity) and next_step.lane == 1


def test_retried_graph_export_reuses_the_query() -> None:
    window = window_for(spec(1, 1, max_attempts=3))
    window.fill()
    window.on_result(0, ActivityResult.success({"queryId": "q-1"}))
    (check,) = window.on_timer(0)
    assert isinstance(check, CallActivity)
    window.on_result(0, ActivityResult(False, error=ActivityError("transient", "503")))
    (retry,) = window.on_timer(0)
    assert isinstance(retry, CallActivity)
    assert retry.name == names.ACTIVITY_GRAPH_COLLECT and retry.input["queryId"] == "q-1"
    assert retry.input["attempt"] == 2


def test_needs_split_halves_and_requeues_down_to_the_minimum_then_incomplete() -> None:
    window = window_for(spec(1, 1, "exchange", min_split_seconds=1200))  # 60 min -> 30 -> 15 (< 20: stop)
    issued: list[CallActivity] = []

    def respond(step: CallActivity, _: CollectionWindow) -> ActivityResult:
        issued.append(step)
        chunk = Chunk.from_json(step.input["chunk"])
        if chunk.start == T0 and not step.input["allowIncomplete"]:
            return ActivityResult.split({"limit": 50})
        return summary_for(step, incomplete=chunk.start == T0)

    run(window, respond, random.Random(1))
    windows = [
        (s.input["chunk"]["start"][11:16], s.input["chunk"]["end"][11:16], s.input["allowIncomplete"]) for s in issued
    ]
    assert windows[:2] == [("00:00", "01:00", False), ("00:00", "00:30", True)]
    # the minimum window is told at once that it cannot be split: collected as far as possible, in one call
    assert window.state.splits == 1 and window.total == 2
    assert window.state.completed == 2 and window.state.incomplete == 1
    assert window.output(None)["status"] == "CompletedWithFailures"


OVER_CAP = ActivityResult.split({"outcome": "split", "limitExceeded": True})


def test_graph_limit_exceeded_splits_and_deletes_the_query_first() -> None:
    window = window_for(spec(1, 1, min_split_seconds=60, delete_queries=True))
    window.fill()
    window.on_result(0, ActivityResult.success({"queryId": "q-1"}))
    window.on_timer(0)
    (delete,) = window.on_result(0, OVER_CAP)
    assert isinstance(delete, CallActivity) and delete.name == names.ACTIVITY_GRAPH_DELETE
    window.on_result(0, ActivityResult.success({"deleted": True, "disposition": "deleted"}))
    assert [c.label() for c in window.state.requeued] == [
        "2024-11-17T00:00:00Z/2024-11-17T00:30:00Z",
        "2024-11-17T00:30:00Z/2024-11-17T01:00:00Z",
    ]
    # Deletion off (the default): the split happens at once and the query is left on the service.
    plain = window_for(spec(1, 1, min_split_seconds=60))
    plain.fill()
    plain.on_result(0, ActivityResult.success({"queryId": "q-1"}))
    plain.on_timer(0)
    assert plain.on_result(0, OVER_CAP) == []
    assert plain.state.splits == 1 and plain.source.queries["leftOnService"] == 1


def test_dooming_error_stops_scheduling_lets_lanes_finish_and_fails_the_collection() -> None:
    window = window_for(spec(10, 3, "exchange"))
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


def test_status_lists_windows_in_flight() -> None:
    window = window_for(spec(4, 2))
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
        if step.name == names.ACTIVITY_GRAPH_COLLECT:
            exports.setdefault(step.lane, []).append(int(step.input["attempt"]))
            if step.lane == 0 and 0 not in failed_once:
                failed_once.add(0)
                return ActivityResult(False, error=ActivityError("transient", "503"))
        return happy(step, window)

    window = window_for(spec(2, 2, retry_base_seconds=1.0))
    run(window, export_fails_once_on_lane_0, random.Random(3))
    assert exports == {0: [1, 2], 1: [1]}
    assert window.state.completed == 2 and window.state.failed == 0


def test_sink_and_crash_failures_are_retried_but_permanent_ones_are_not() -> None:
    window = window_for(spec(3, 3, "exchange", max_attempts=2, retry_base_seconds=10), now=T0)
    steps = window.fill()
    assert len(steps) == 3
    later = T0 + timedelta(seconds=10)
    # An output write that failed is idempotent to redo; an activity that raised may have met a worker crash.
    assert window.on_result(0, ActivityResult(False, error=ActivityError("sink", "blob write failed"))) == [
        Wait(0, later)
    ]
    assert window.on_result(1, ActivityResult(False, error=ActivityError("activity_crashed", "boom"))) == [
        Wait(1, later)
    ]
    # A permanent API error would fail the same way again: the chunk fails at once.
    assert window.on_result(2, ActivityResult(False, error=ActivityError("permanent", "400 bad filter"))) == []
    assert [f.kind for f in window.state.failures] == ["permanent"]
    (again,) = window.on_timer(0)
    assert isinstance(again, CallActivity) and again.input["attempt"] == 2
    assert window.on_result(0, summary_for(again)) == []
    assert window.state.completed == 1


def test_a_graph_chunk_over_the_record_budget_is_split_until_the_minimum_window() -> None:
    window = window_for(spec(1, 1, max_records_per_chunk=500, min_split_seconds=1800, delete_queries=True))
    (_submit,) = window.fill()
    window.on_result(0, ActivityResult.success({"queryId": "q-0"}))
    (check,) = window.on_timer(0)
    assert isinstance(check, CallActivity) and check.input["maxRecords"] == 500
    assert check.input["allowIncomplete"] is False  # an hour can still be halved to the 30-minute minimum
    (delete,) = window.on_result(0, ActivityResult.split({"outcome": "split", "approximateCount": 900}))
    assert isinstance(delete, CallActivity) and delete.name == names.ACTIVITY_GRAPH_DELETE  # frees the query first
    assert window.on_result(0, ActivityResult.success({"deleted": True})) == []
    assert window.state.splits == 1 and [c.seconds for c in window.state.requeued] == [1800, 1800]
    (_half,) = window.fill()
    window.on_result(1, ActivityResult.success({"queryId": "q-1"}))
    (check,) = window.on_timer(1)
    # A half at the minimum window is told so: the activity exports it as is (complete) instead of asking to split.
    assert isinstance(check, CallActivity) and check.input["allowIncomplete"] is True


def test_graph_outcomes_follow_the_status_and_the_lane_options() -> None:
    def status(state: QueryState, limit: bool = False, count: int | None = None) -> QueryStatus:
        return QueryStatus(state, state.value, limit, count)

    done = status(QueryState.SUCCEEDED, count=900)
    assert chunk_rules.graph_outcome(status(QueryState.PENDING), splittable=True, max_records=0) == "pending"
    assert chunk_rules.graph_outcome(status(QueryState.FAILED), splittable=True, max_records=0) == "failed"
    assert chunk_rules.graph_outcome(status(QueryState.CANCELLED), splittable=True, max_records=0) == "failed"
    assert chunk_rules.graph_outcome(done, splittable=True, max_records=0) == "export"
    assert chunk_rules.graph_outcome(done, splittable=True, max_records=500) == "split"
    assert chunk_rules.graph_outcome(done, splittable=False, max_records=500) == "export"
    capped = status(QueryState.SUCCEEDED, limit=True)
    assert chunk_rules.graph_outcome(capped, splittable=True, max_records=0) == "split"
    assert chunk_rules.graph_outcome(capped, splittable=False, max_records=0) == "export_incomplete"
    assert can_split(3600, 1800) and not can_split(3599, 1800)


def test_the_next_check_counts_from_when_the_last_was_issued_not_from_its_answer() -> None:
    options = {"poll_interval_seconds": 100, "poll_min_interval_seconds": 1, "poll_max_interval_seconds": 1000}
    window = window_for(spec(1, 1, **options), now=T0)
    window.fill()
    (wait,) = window.on_result(0, ActivityResult.success({"queryId": "q"}))
    window.now = wait.until  # 100 s after the submit
    window.on_timer(0)
    window.now = wait.until + timedelta(seconds=3)  # the answer took 3 s to come back
    (again,) = window.on_result(0, PENDING)
    assert again == Wait(0, T0 + timedelta(seconds=110))  # 100 + a tenth of 100, not 103 + 10
    window.now = T0 + timedelta(seconds=200)
    window.on_timer(0)
    window.now = T0 + timedelta(seconds=230)  # an answer later than the next check was due (200 + 20)
    (late,) = window.on_result(0, PENDING)
    assert late.until == window.now  # due at once


def test_a_check_delayed_by_a_host_outage_does_not_teach_the_outage_as_a_running_time() -> None:
    """A query submitted before the host went down for five hours and checked after it restarted: what the window
    learns is when it planned to check (the query was done by then, as far as anyone knows), not the five hours.
    Learning the outage made every later query's first check wait four and a half hours (a follower caught up after
    kill -9 stalled on it)."""
    options = {"poll_interval_seconds": 30, "poll_min_interval_seconds": 5, "poll_max_interval_seconds": 300}
    window = window_for(spec(3, 1, **options), now=T0)
    window.fill()
    (wait,) = window.on_result(0, ActivityResult.success({"queryId": "q-0"}))
    assert wait.after(T0) == 30
    window.now = wait.until + timedelta(hours=5)  # the timer fires once the host is back
    (check,) = window.on_timer(0)
    assert isinstance(check, CallActivity)
    assert window.on_result(0, collected(check)) == []
    assert window.source.durations == [30.0]
    (submit,) = window.fill()
    (wait,) = window.on_result(submit.lane, ActivityResult.success({"queryId": "q-1"}))
    assert wait.after(window.now) == 27  # 0.9 x 30 s, not 0.9 x five hours
