"""A follower's cycle as pure functions: which windows each pass reads, what a pass's outcome changes, when to wake."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from shared.follow.plan import MAX_LISTED, MAX_NEW_WINDOWS, RETRY_CAP, apply, frontier, next_wake, plan, status
from shared.follow.state import FollowSpec, FollowState, WindowFailure, day_collection_id, follow_id
from shared.models import Chunk, iso
from shared.requests.run_options import RunOptions
from shared.timeline.latency import AUDIT_LATENCY

START = datetime(2024, 6, 3, tzinfo=UTC)
MIN = timedelta(minutes=1)
SPEC = FollowSpec(
    follow_id="follow-graph-abc",
    tenant_id="contoso.onmicrosoft.com",
    source="graph",
    filters={},
    options=RunOptions(max_concurrency=2),
    start=START,
    interval=15 * MIN,
    every=15 * MIN,
    delay=90 * MIN,
)


def windows(first: datetime, count: int, size: timedelta = 15 * MIN) -> list[Chunk]:
    return [Chunk(first + size * i, first + size * (i + 1)) for i in range(count)]


def ok(*written: Chunk, failures: list[dict] | None = None) -> dict:  # type: ignore[type-arg]
    return {"status": "Completed", "failures": failures or [], "provisionalWindows": [c.to_json() for c in written]}


def test_a_window_is_read_first_once_it_closed_the_usual_delay_ago() -> None:
    now = START + timedelta(hours=3, minutes=7)
    assert frontier(SPEC, now) == START + timedelta(hours=1, minutes=30)  # 3:07 - 1:30 = 1:37, on the 15-minute grid
    assert frontier(SPEC, START + 10 * MIN) == START  # nothing has closed long enough
    state = FollowState(covered_until=START)
    (only,) = plan(SPEC, state, now)
    assert only.new == tuple(windows(START, 6)) and only.settle == () and only.retry == ()
    assert only.collection_id == day_collection_id("follow-graph-abc", START.date()) == "follow-graph-abc-20240603"
    assert only.instance_id == "follow-graph-abc-20240603-p0"
    assert only.scope == {
        "ranges": [{"start": iso(START), "end": iso(START + timedelta(hours=1, minutes=30))}],
        "failures": [],
        "provisional": [],
    }


def test_a_pass_advances_coverage_and_its_manifest_says_what_is_provisional() -> None:
    state = FollowState(covered_until=START)
    now = START + timedelta(hours=3)
    (first,) = plan(SPEC, state, now)
    assert apply(SPEC, state, first, ok(*first.new), now)
    assert state.covered_until == START + timedelta(hours=1, minutes=30)
    assert state.provisional == list(first.new) and state.passes == 1
    assert plan(SPEC, state, now) == [], "nothing more until the next window closes"
    later = now + 15 * MIN
    (second,) = plan(SPEC, state, later)
    assert second.new == (Chunk(state.covered_until, state.covered_until + 15 * MIN),)
    assert second.instance_id.endswith("-p1")
    assert second.scope["provisional"] == [c.span_json() for c in first.new]


def test_windows_are_read_again_once_their_band_has_passed_in_their_own_days_pass() -> None:
    state = FollowState(covered_until=START + timedelta(hours=24), provisional=windows(START + timedelta(hours=23), 4))
    now = START + timedelta(hours=47, minutes=40)  # the first two of those windows ended 24 hours ago or more
    passes = plan(SPEC, state, now)
    assert [p.day.isoformat() for p in passes] == ["2024-06-03", "2024-06-04"]
    settle, new = passes
    assert settle.settle == tuple(windows(START + timedelta(hours=23), 2)) and settle.new == ()
    assert settle.scope["ranges"] == [{"start": iso(START), "end": iso(START + timedelta(days=1))}]
    assert settle.scope["provisional"] == [c.span_json() for c in state.provisional]
    assert new.new[0].start == START + timedelta(hours=24) and new.settle == ()
    assert [p.instance_id[-3:] for p in passes] == ["-p0", "-p1"]
    # the settle pass's manifest says the two windows read again are final: the follower keeps the other two
    assert apply(SPEC, state, settle, ok(*windows(START + timedelta(hours=23, minutes=30), 2)), now)
    assert state.provisional == windows(START + timedelta(hours=23, minutes=30), 2)
    assert all(c.end + AUDIT_LATENCY > now for c in state.provisional)


def test_a_failed_window_is_listed_retried_later_and_forgotten_once_collected() -> None:
    state = FollowState(covered_until=START)
    now = START + timedelta(hours=2)
    (first,) = plan(SPEC, state, now)
    bad = first.new[1]
    failure = {"chunk": bad.to_json(), "kind": "query_failed", "message": "the query failed", "attempts": 4}
    assert apply(SPEC, state, first, ok(first.new[0], failures=[failure]), now)
    assert state.covered_until == first.new[-1].end, "coverage goes on: the failed window is listed, not a gap"
    assert [f.chunk for f in state.failures] == [bad] and state.failures[0].retry_at == now + 15 * MIN
    assert state.last_error and state.last_error["window"] == bad.label()
    assert plan(SPEC, state, now + 5 * MIN) == [], "not before its back-off"
    (retry,) = plan(SPEC, state, now + 15 * MIN)
    assert retry.retry == (bad,) and retry.scope["failures"] == []
    assert apply(SPEC, state, retry, ok(bad, *retry.new), now + 15 * MIN)
    assert state.failures == []


def test_a_refused_pass_pauses_the_follower_and_advances_nothing() -> None:
    state = FollowState(covered_until=START)
    now = START + timedelta(hours=2)
    (first,) = plan(SPEC, state, now)
    refused = {"status": "Failed", "reason": {"kind": "permission", "message": "403 Authorization_RequestDenied"}}
    assert not apply(SPEC, state, first, refused, now)
    assert state.covered_until == START and state.provisional == []
    assert state.paused == {"since": iso(now), "kind": "permission", "message": "403 Authorization_RequestDenied"}
    assert next_wake(SPEC, state, now) == START + timedelta(hours=2, minutes=15), "tries again at its next wake"
    later = now + timedelta(hours=1)
    (again,) = plan(SPEC, state, later)
    assert again.new[0].start == START, "it goes on from where its coverage ends"
    assert not apply(SPEC, state, again, refused, later)
    assert state.paused and state.paused["since"] == iso(now), "paused since the first refusal"
    assert apply(SPEC, state, again, ok(*again.new), later)
    assert state.paused is None and state.covered_until == again.new[-1].end


def test_after_an_outage_it_catches_up_in_bounded_passes_without_waiting() -> None:
    state = FollowState(covered_until=START)
    now = START + timedelta(days=3)
    passes = plan(SPEC, state, now)
    assert sum(len(p.new) for p in passes) == MAX_NEW_WINDOWS
    assert [p.day.isoformat() for p in passes] == ["2024-06-03", "2024-06-04"]
    for p in passes:
        assert apply(SPEC, state, p, ok(*p.new), now)
    assert next_wake(SPEC, state, now) == now, "more closed windows wait: the next cycle starts at once"
    while plan(SPEC, state, now):
        for p in plan(SPEC, state, now):
            apply(SPEC, state, p, ok(*p.new), now)
    assert state.covered_until == frontier(SPEC, now)
    assert next_wake(SPEC, state, now) == now + 15 * MIN


def test_one_follower_per_tenant_source_and_filters() -> None:
    a = follow_id("contoso.onmicrosoft.com", "graph", {"operations": ["A", "B"]})
    assert a == follow_id("contoso.onmicrosoft.com", "graph", {"operations": ["B", "A"]})
    assert a.startswith("follow-graph-") and len(a) == len("follow-graph-") + 12
    assert a != follow_id("contoso.onmicrosoft.com", "exchange", {"operations": ["A", "B"]})
    assert a != follow_id("contoso.onmicrosoft.com", "graph", {})
    assert a != follow_id("fabrikam.onmicrosoft.com", "graph", {"operations": ["A", "B"]})


def test_state_survives_continue_as_new() -> None:
    state = FollowState(covered_until=START, provisional=windows(START, 2))
    (first,) = plan(SPEC, state, START + timedelta(hours=3))
    apply(SPEC, state, first, {"status": "Completed", "failures": [], "provisionalWindows": None}, START)
    again = FollowState.from_json(state.to_json())
    assert again == state
    assert FollowSpec.from_json(SPEC.to_json()) == SPEC


def test_the_first_days_scope_begins_where_the_follower_does_not_at_midnight() -> None:
    """A follower started at 06:00 covers its first day from 06:00: a scope from midnight would list six hours no
    window covers as a gap of that day's manifest."""
    late_start = START + timedelta(hours=6)
    spec = replace(SPEC, start=late_start)
    (first,) = plan(spec, FollowState(covered_until=late_start), late_start + timedelta(hours=3))
    assert first.scope["ranges"] == [
        {"start": iso(late_start), "end": iso(late_start + timedelta(hours=1, minutes=30))}
    ]
    (next_day,) = plan(spec, FollowState(covered_until=START + timedelta(days=1)), START + timedelta(days=1, hours=3))
    assert next_day.scope["ranges"][0]["start"] == iso(START + timedelta(days=1)), "a later day begins at midnight"


def test_the_back_off_of_a_failed_window_doubles_up_to_six_hours() -> None:
    state = FollowState(covered_until=START)
    now = START + timedelta(hours=2)
    (first,) = plan(SPEC, state, now)
    bad = first.new[0]
    failure = {"chunk": bad.to_json(), "kind": "query_failed", "message": "the query failed", "attempts": 4}
    assert apply(SPEC, state, first, ok(*first.new[1:], failures=[failure]), now)
    waits = [state.failures[0].retry_at - now]
    for _ in range(8):
        now = state.failures[0].retry_at
        (retry,) = [p for p in plan(SPEC, state, now) if bad in p.retry]
        assert apply(SPEC, state, retry, ok(failures=[failure]), now)
        waits.append(state.failures[0].retry_at - now)
    assert waits[:5] == [15 * MIN, 30 * MIN, 60 * MIN, 120 * MIN, 240 * MIN]
    assert waits[5:] == [RETRY_CAP] * 4 == [timedelta(hours=6)] * 4, "capped, not 8, 16, 32 hours"
    assert state.failures[0].attempts == 9


def test_a_failed_read_again_leaves_the_window_provisional_not_failed() -> None:
    """A window read again whose new read failed keeps its earlier read (collected, provisional): it is read again at
    the next cycle, and it is no failed window (a failure would send it to the retries and the manifest's failures)."""
    window = windows(START, 1)[0]
    state = FollowState(covered_until=START + timedelta(hours=2), provisional=[window])
    now = window.end + AUDIT_LATENCY
    (again,) = [p for p in plan(SPEC, state, now) if p.settle]
    assert again.settle == (window,)
    failure = {"chunk": window.to_json(), "kind": "query_failed", "message": "the query failed", "attempts": 4}
    assert apply(SPEC, state, again, ok(window, failures=[failure]), now)
    assert state.failures == [] and window in state.provisional
    assert state.last_error and state.last_error["window"] == window.label(), "the error is still reported"
    (next_try,) = [p for p in plan(SPEC, state, now + 15 * MIN) if p.settle]
    assert next_try.settle == (window,), "read again at the next cycle"


def test_a_window_is_read_again_in_the_cycle_its_band_ends_not_one_later() -> None:
    window = windows(START, 1)[0]
    state = FollowState(covered_until=START + timedelta(hours=2), provisional=[window])
    assert [p.settle for p in plan(SPEC, state, window.end + AUDIT_LATENCY - timedelta(seconds=1))] == [()]
    (on_time,) = [p for p in plan(SPEC, state, window.end + AUDIT_LATENCY) if p.settle]
    assert on_time.settle == (window,)


def test_a_pass_without_a_manifest_keeps_its_days_provisional_windows() -> None:
    """The manifest was not written (``provisionalWindows`` missing): nothing read again counts as final, so the day's
    provisional windows stay, and the pass's new windows join them."""
    earlier = windows(START, 2)
    state = FollowState(covered_until=START + 30 * MIN, provisional=list(earlier))
    now = START + timedelta(hours=3)
    (first,) = plan(SPEC, state, now)
    assert apply(SPEC, state, first, {"status": "Completed", "failures": [], "provisionalWindows": None}, now)
    assert state.provisional == sorted({*earlier, *first.new}, key=lambda c: c.start)


def test_the_status_says_catching_up_only_when_more_than_one_window_waits() -> None:
    state = FollowState(covered_until=START)
    one_due = START + SPEC.delay + SPEC.interval  # exactly one window closed the usual delay ago
    assert status(SPEC, state, one_due)["status"] == "following"
    assert status(SPEC, state, one_due + SPEC.interval)["status"] == "catching up"


def test_the_status_lists_the_newest_failures() -> None:
    failed = [WindowFailure(c, "query_failed", "boom", 1, START) for c in windows(START, 25)]
    state = FollowState(covered_until=START + timedelta(days=1), failures=failed)
    shown = status(SPEC, state, START + timedelta(days=1))
    assert shown["failureCount"] == 25 and len(shown["failures"]) == MAX_LISTED == 20
    assert shown["failures"][0]["chunk"] == failed[5].chunk.to_json(), "the newest 20, oldest first"
