"""A follower's plan and state: the rules a hand mutation showed no other test held (docs/testing.md, "Mutation")."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from shared.follow.plan import apply, plan, status
from shared.follow.state import FollowSpec, FollowState, WindowFailure
from shared.models import Chunk, iso
from shared.timeline.latency import AUDIT_LATENCY
from tests.collector.test_follow_plan import SPEC, START, ok, windows

DAY = timedelta(days=1)


def two_days() -> FollowState:
    """Covered to day 2 noon, with provisional windows and a failed window due on each of days 1 and 2."""
    now = START + timedelta(days=2)
    failures = [
        WindowFailure(Chunk(START + timedelta(hours=5), START + timedelta(hours=5, minutes=15)), "x", "m", 1, now),
        WindowFailure(Chunk(START + timedelta(hours=30), START + timedelta(hours=30, minutes=15)), "x", "m", 1, now),
    ]
    provisional = windows(START + timedelta(hours=23), 2) + windows(START + timedelta(hours=35), 2)
    return FollowState(covered_until=START + timedelta(hours=36), provisional=provisional, failures=failures)


def test_each_days_pass_scopes_only_that_days_failures_and_provisional_windows() -> None:
    state = two_days()
    state.failures = [*state.failures, WindowFailure(Chunk(START + DAY, START + DAY + SPEC.interval), "x", "m", 1,
                                                     START + timedelta(days=9))]  # fmt: skip
    first, second = plan(SPEC, state, START + 2 * DAY)
    assert (first.day, second.day) == (START.date(), (START + DAY).date())
    assert first.scope["failures"] == [] and second.scope["failures"] == [state.failures[2].manifest_json()]
    assert first.scope["provisional"] == [c.span_json() for c in windows(START + timedelta(hours=23), 2)]
    assert second.scope["provisional"] == [c.span_json() for c in windows(START + timedelta(hours=35), 2)]


def test_a_days_pass_keeps_the_other_days_provisional_windows() -> None:
    state = two_days()
    now = START + timedelta(days=2)
    passes = plan(SPEC, state, now)
    second = next(p for p in passes if p.day == (START + DAY).date())
    assert apply(SPEC, state, second, ok(*second.new), now)
    assert windows(START + timedelta(hours=23), 2) == [c for c in state.provisional if c.start < START + DAY]


def test_a_pass_whose_collection_itself_failed_does_not_pause_the_follower() -> None:
    state = FollowState(covered_until=START)
    now = START + timedelta(hours=3)
    (first,) = plan(SPEC, state, now)
    assert apply(SPEC, state, first, None, now), "the next pass of the cycle still runs"
    assert state.paused is None and state.covered_until == START and state.passes == 1
    assert state.last_error is not None and state.last_error["kind"] == "pass_failed"


def test_the_status_says_when_the_provisional_windows_will_be_final() -> None:
    state = FollowState(covered_until=START + timedelta(hours=2), provisional=windows(START, 8))
    shown = status(SPEC, state, START + timedelta(hours=3))["provisional"]
    assert shown == {
        "windows": 8,
        "start": iso(START),
        "end": iso(START + timedelta(hours=2)),
        "settledAfter": iso(START + timedelta(hours=2) + AUDIT_LATENCY),
    }


def test_everything_a_follower_carries_survives_continue_as_new() -> None:
    """The state and spec as the next execution reads them: a failure's attempts (its back-off and the manifest's
    count), the passes so far (each pass's instance id), the wake, the stop, and the tenant GUID its budget is keyed
    by."""
    state = two_days()
    state.failures[0].attempts = 3
    state.paused = {"since": iso(START), "kind": "permission", "message": "403"}
    state.last_error = {"at": iso(START), "kind": "permission", "message": "403"}
    state.passes, state.cycles, state.next_wake, state.stopped = 7, 5, START + 3 * DAY, True
    assert FollowState.from_json(state.to_json()) == state
    spec = replace(SPEC, tenant_guid="72f988bf-86f1-41af-91ab-2d7cd011db47", filters={"operations": ["Send"]})
    assert FollowSpec.from_json(spec.to_json()) == spec
