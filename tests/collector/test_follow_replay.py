"""The follower orchestrator's own decisions, replayed through the shim emulation (``tests.collector.follow_replay``):
a pass the service refuses ends the cycle (no other pass runs against a service that refuses), and a pass whose
collection itself failed is reported and tried again later."""

from __future__ import annotations

import json
from datetime import timedelta

from durable_local.model import RuntimeStatus
from shared.follow.state import FollowState
from tests.collector.follow_replay import HOUR, NOW, Follower, payload, written

REFUSED = {"status": "Failed", "reason": {"kind": "permission", "message": "403 Authorization_RequestDenied"}}


def two_days() -> Follower:
    """A follower with windows of two days due: yesterday's evening and this morning."""
    start = NOW.replace(hour=0) - timedelta(days=1)
    return Follower(payload(start, covered=NOW.replace(hour=0) - 6 * HOUR))


def test_a_refused_pass_ends_the_cycle_without_running_the_other_days_pass() -> None:
    follower = two_days()
    follower.run_until_pass()
    (first,) = follower.passes
    executions = follower.executions
    follower.deliver([follower.pass_answer(REFUSED)])
    assert len(follower.passes) == 1, "no pass against a service that refuses"
    assert follower.executions == executions + 1 and follower.status is RuntimeStatus.RUNNING
    state = _state(follower)
    assert state.paused and state.paused["kind"] == "permission"
    assert state.covered_until == NOW.replace(hour=0) - 6 * HOUR, "nothing advanced"
    assert follower.statuses[-1]["status"] == "paused"
    assert first[2]["spec"]["collectionId"].endswith((NOW - timedelta(days=1)).strftime("%Y%m%d"))


def test_after_a_pass_that_was_not_refused_the_next_days_pass_runs_in_the_same_cycle() -> None:
    follower = two_days()
    follower.run_until_pass()
    executions = follower.executions
    follower.deliver([follower.pass_answer(written(follower.passes[0][2]))])
    assert len(follower.passes) == 2 and follower.executions == executions, "the second pass, same execution"


def test_a_pass_whose_collection_failed_is_reported_and_the_follower_goes_on() -> None:
    follower = Follower(payload(NOW - 6 * HOUR))
    follower.run_until_pass()
    follower.deliver([follower.pass_answer(None)])
    state = _state(follower)
    assert state.last_error and state.last_error["kind"] == "pass_failed" and "boom" in state.last_error["message"]
    assert state.covered_until == NOW - 6 * HOUR and state.passes == 1
    follower.now += HOUR
    follower.run_until_pass()
    assert len(follower.passes) == 2, "tried again at its next wake"


def _state(follower: Follower) -> FollowState:
    """The state the current execution started with (its input)."""
    started = next(e for e in follower.history if e.get("EventType") == 0)
    data = json.loads(started["Input"])
    while isinstance(data, str):
        data = json.loads(data)
    return FollowState.from_json(data["state"])


def test_a_follower_that_caught_up_sleeps_until_its_next_wake() -> None:
    follower = Follower(payload(NOW - 6 * HOUR))
    follower.run_until_pass()
    follower.deliver([follower.pass_answer(written(follower.passes[0][2]))])
    state = _state(follower)
    assert state.next_wake is not None and state.next_wake > follower.now
    (timer,) = [t for t in follower.timers if t.message.execution_id == follower.execution]
    assert timer.visible_at == state.next_wake, "its timer is set for the next wake, not now"
    assert not follower.fire_timers(), "nothing fires before then"


def test_a_pass_answering_something_other_than_an_object_counts_as_failed_and_cycles_are_counted() -> None:
    follower = Follower(payload(NOW - 6 * HOUR))
    follower.run_until_pass()
    follower.deliver([follower.pass_answer("not an object")])  # type: ignore[arg-type]
    state = _state(follower)
    assert state.last_error and state.last_error["kind"] == "pass_failed" and state.cycles == 1
    follower.now += HOUR
    follower.run_until_pass()
    follower.deliver([follower.pass_answer(written(follower.passes[-1][2]))])
    assert _state(follower).cycles == 2
