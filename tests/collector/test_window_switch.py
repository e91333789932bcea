"""The sliding window across executions: switching without draining, parked lanes carried and resumed, and every
chunk completed once whatever the switches."""

from __future__ import annotations

import random
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from shared import names
from shared.models import ActivityError, ActivityResult, Chunk
from shared.sources.registry import window_for
from shared.window.machine import CollectionWindow
from shared.window.state import CallActivity, Carried, Lane, Step, Wait
from tests.collector.window_sim import T0, happy, run, spec, summary_for


def test_executions_switch_without_draining_and_carry_their_lanes() -> None:
    spec_ = spec(9, 3, "exchange", m=3)
    carried: Carried | None = None
    executions = 0
    carried_lanes: list[int] = []
    while True:
        window = window_for(spec_, carried, now=T0 + timedelta(hours=executions))
        executions += 1
        issued = run(window, happy, random.Random(executions))
        started = [s for s in issued if isinstance(s, CallActivity) and s.input["attempt"] == 1]
        assert len(started) - len(carried.lanes if carried else []) <= 3  # at most M new chunks per execution
        if not window.should_continue_as_new:
            break
        assert all(lane.parked for lane in window.lanes.values())
        carried = Carried.from_json(window.carry().to_json())  # through JSON, as continue_as_new does
        carried_lanes.append(len(carried.lanes))
    assert window.finished and executions >= 3 and window.state.execution == executions
    assert window.state.completed == 9 and window.state.cursor == 9
    assert window.status()["percent"] == 100.0


def test_a_parked_lane_resumes_its_timer_at_the_carried_due_time_or_its_call_at_once() -> None:
    options = {"poll_interval_seconds": 60, "poll_min_interval_seconds": 60}
    window = window_for(spec(4, 2, m=2, **options), now=T0)
    first = window.fill()
    assert len(first) == 2 and window.switching  # two chunks started, the budget is spent, more are planned
    # switching: lane 0's first poll is parked with its due time instead of being issued
    assert window.on_result(0, ActivityResult.success({"queryId": "q-0"})) == []
    assert window.lanes[0].parked == "timer" and window.lanes[0].due == T0 + timedelta(seconds=60)
    assert not window.should_continue_as_new  # lane 1's submit is still in flight: wait for it
    window.now = T0 + timedelta(seconds=5)
    assert window.on_result(1, ActivityResult.success({"queryId": "q-1"})) == []  # parked, never issued here
    assert window.should_continue_as_new
    carried = Carried.from_json(window.carry().to_json())
    assert [(lane.id, lane.parked, lane.due) for lane in carried.lanes] == [
        (0, "timer", T0 + timedelta(seconds=60)),
        (1, "timer", T0 + timedelta(seconds=65)),
    ]
    nxt = window_for(window.spec, carried, now=T0 + timedelta(seconds=62))
    resumed = nxt.resume()
    # lane 0's check is overdue: issued at once; lane 1 waits for its own due time, not a fresh interval
    assert isinstance(resumed[0], CallActivity) and resumed[0].name == names.ACTIVITY_GRAPH_COLLECT
    assert resumed[1] == Wait(1, T0 + timedelta(seconds=65))
    assert nxt.lanes[0].query_id == "q-0" and nxt.lanes[1].query_id == "q-1"
    assert [s.lane for s in nxt.fill()] == []  # K lanes already in flight: nothing new starts
    assert nxt.state.execution == 2


def test_a_lane_carries_state_it_does_not_know() -> None:
    lane = Lane(3, Chunk(T0, T0 + timedelta(hours=1)), "poll", query_id="q", submitted_at=T0, due=T0, parked="timer")
    data = {**lane.to_json(), "tenantSlot": {"lease": "abc", "expires": "2024-11-17T01:00:00Z"}}
    again = Lane.from_json(data)
    assert again.extra == {"tenantSlot": {"lease": "abc", "expires": "2024-11-17T01:00:00Z"}}
    assert again.to_json() == data  # a newer version's per-lane state survives an older execution untouched
    assert (again.query_id, again.submitted_at, again.due, again.parked) == ("q", T0, T0, "timer")


def test_while_switching_a_lane_keeps_working_if_its_call_ends_before_the_slowest_in_flight() -> None:
    cursor = {"typeIndex": 0, "sessionId": "s", "nextIndex": 21}
    hours = [Chunk(T0 + timedelta(hours=i), T0 + timedelta(hours=i + 1)) for i in range(2)]
    lanes = [
        Lane(0, hours[0], "collect", attempts=1, calls=1, cursor=cursor, call_seconds=10, parked="call"),
        Lane(1, hours[1], "collect", attempts=1, calls=1, cursor=cursor, call_seconds=60, parked="call"),
    ]
    window = window_for(spec(12, 2, "exchange", m=1), Carried(cursor=2, next_lane=2, lanes=lanes), now=T0)
    first = window.resume()
    assert [s.lane for s in first] == [0, 1] and not window.switching  # carried lanes do not count as starts

    def going_on() -> ActivityResult:
        return ActivityResult.success({"cursor": cursor})

    window.now = T0 + timedelta(seconds=10)
    assert isinstance(first[0], CallActivity)
    assert window.on_result(0, summary_for(first[0])) == []  # lane 0's chunk is done
    (new,) = window.fill()  # a new chunk starts: the budget of one start is spent, the window switches
    assert new.lane == 2 and window.switching
    window.now = T0 + timedelta(seconds=20)
    # lane 2's call took 10 s; lane 1's call (expected 60 s, issued at 0) ends at 60 s at the earliest: go on
    (step,) = window.on_result(2, going_on())
    assert isinstance(step, CallActivity) and step.input["call"] == 1 and step.input["cursor"] == cursor
    window.now = T0 + timedelta(seconds=30)
    assert len(window.on_result(2, going_on())) == 1  # 30 + 10 <= 60
    window.now = T0 + timedelta(seconds=55)
    assert window.on_result(2, going_on()) == []  # 55 + 25 > 60: parked
    assert window.lanes[2].parked == "call" and not window.should_continue_as_new
    window.now = T0 + timedelta(seconds=61)
    assert window.on_result(1, going_on()) == [] and window.should_continue_as_new
    assert window.fill() == []  # nothing fits any more: nothing in flight
    carried = Carried.from_json(window.carry().to_json())
    assert [(lane.id, lane.parked, lane.calls, lane.call_seconds) for lane in carried.lanes] == [
        (1, "call", 2, 61.0),
        (2, "call", 3, 25.0),
    ]
    assert all(lane.cursor == cursor for lane in carried.lanes)


def test_a_switch_called_off_sends_the_parked_lanes_on_in_this_execution() -> None:
    # Doom while switching: the execution ends with its lanes, so a parked lane must go on here.
    window = window_for(spec(6, 2, m=2, poll_interval_seconds=60, poll_min_interval_seconds=60), now=T0)
    window.fill()
    assert window.switching
    assert window.on_result(0, ActivityResult.success({"queryId": "q-0"})) == []  # parked with its due time
    doom = ActivityResult(False, error=ActivityError("permission", "AuditLogsQuery.Read.All missing", True))
    assert window.on_result(1, doom) == []
    assert not window.switching and not window.should_continue_as_new
    window.now = T0 + timedelta(seconds=30)
    (timer,) = window.fill()  # lane 0 goes on: its timer again, at the due time it kept
    assert timer == Wait(0, T0 + timedelta(seconds=60)) and window.lanes[0].parked is None
    # A lane started while switching took the last chunk: nothing waits any more, no switch.
    cursor = {"typeIndex": 0, "sessionId": "s", "nextIndex": 21}
    hours = [Chunk(T0 + timedelta(hours=i), T0 + timedelta(hours=i + 1)) for i in range(3)]
    lanes = [
        Lane(i, hours[i], "collect", attempts=1, calls=1, cursor=cursor, call_seconds=took, parked="call")
        for i, took in enumerate([10.0, 60.0, 50.0])
    ]
    window = window_for(spec(5, 3, "exchange", m=1), Carried(cursor=3, next_lane=3, lanes=lanes), now=T0)
    first = window.resume()
    going_on = ActivityResult.success({"cursor": cursor})
    window.now = T0 + timedelta(seconds=10)
    assert isinstance(first[0], CallActivity)
    window.on_result(0, summary_for(first[0]))
    (started,) = window.fill()  # chunk 3: the one start this execution may make; chunk 4 still waits
    assert started.lane == 3 and window.switching
    for moment in range(12, 52, 2):
        window.now = T0 + timedelta(seconds=moment)
        assert len(window.on_result(3, going_on)) == 1  # 2-second calls fit before lane 1's (ends at 60 s)
        if moment == 48:
            window.now = T0 + timedelta(seconds=49)
            assert window.on_result(2, going_on) == [] and window.lanes[2].parked == "call"  # 49 + 49 > 60
    window.now = T0 + timedelta(seconds=52)
    assert isinstance(started, CallActivity)
    assert window.on_result(3, summary_for(started)) == []
    steps = window.fill()  # chunk 4 fits before 60 s too: nothing is left waiting, the switch is off
    assert not window.switching and not window.has_pending()
    assert sorted(s.lane for s in steps) == [2, 4] and window.lanes[2].parked is None  # lane 2 goes on here


def three_calls(step: CallActivity, window: CollectionWindow) -> ActivityResult:
    """Exchange chunks of three calls each (the cursor counts them); Graph as ``happy``."""
    if step.name != names.ACTIVITY_EXCHANGE_COLLECT:
        return happy(step, window)
    done = int((step.input.get("cursor") or {}).get("calls", 0)) + 1
    if done == 3:
        return summary_for(step)
    return ActivityResult.success({"cursor": {"calls": done}})


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 25),
    k=st.integers(1, 5),
    m=st.integers(1, 6),
    seed=st.integers(0, 10**6),
    source=st.sampled_from(["graph", "exchange"]),
)
def test_every_chunk_completes_once_across_switches(n: int, k: int, m: int, seed: int, source: str) -> None:
    carried: Carried | None = None
    rng = random.Random(seed)
    issued: list[Step] = []
    for execution in range(1, 10 * n + 2):
        window = window_for(spec(n, k, source, m=m), carried, now=T0 + timedelta(hours=execution))
        issued += run(window, three_calls, rng)
        if not window.should_continue_as_new:
            break
        carried = Carried.from_json(window.carry().to_json())
    assert window.finished and window.state.completed == n and window.state.failed == 0
    assert window.state.execution == execution
    first_calls = {s.input["chunk"]["start"] for s in issued if isinstance(s, CallActivity) and s.input["attempt"] == 1}
    assert len(first_calls) == n  # every planned chunk was worked on, none lost at a switch
