"""A feed follower's plan as pure functions: which source reads each window, the passes of a day with both, the
windows the feed could not prove read by search, and the reconcile's sample."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from shared.follow.plan import FEED_SETTLE_MARGIN, apply, plan, rescoped, window_source
from shared.follow.state import FeedUse, FollowState
from shared.models import Chunk
from shared.requests.run_options import RunOptions
from shared.timeline.latency import AUDIT_LATENCY
from tests.collector.test_follow_plan import SPEC as PLAN_SPEC

START = datetime(2024, 6, 3, tzinfo=UTC)
HOUR = timedelta(hours=1)
FEED = FeedUse(
    source="feed",
    options=RunOptions(max_concurrency=2),
    reach=timedelta(days=7) - 2 * HOUR,
    since=START + 8 * HOUR,
    why="granted",
    reconcile_every=timedelta(hours=24),
    reconcile_source="exchange",
    reconcile_options=RunOptions(max_concurrency=1),
)
SPEC = replace(PLAN_SPEC, interval=4 * HOUR, feed=FEED)  # the plan tests' follower, with 4-hour windows and the feed


def test_each_window_goes_to_the_feed_only_where_the_feed_can_cover_it() -> None:
    state = FollowState(covered_until=START)
    now = START + timedelta(days=2)
    assert window_source(SPEC, state, Chunk(START + 4 * HOUR, START + 8 * HOUR), now) == "graph"  # before its start
    assert window_source(SPEC, state, Chunk(START + 8 * HOUR, START + 12 * HOUR), now) == "feed"
    later = now + timedelta(days=7)  # older than the feed's reach
    assert window_source(SPEC, state, Chunk(START + 8 * HOUR, START + 12 * HOUR), later) == "graph"
    unproved = FollowState(covered_until=START, backfill=[Chunk(START + 8 * HOUR, START + 12 * HOUR)])
    assert window_source(SPEC, unproved, Chunk(START + 8 * HOUR, START + 12 * HOUR), now) == "graph"
    assert window_source(replace(SPEC, feed=None), state, Chunk(START + 8 * HOUR, START + 12 * HOUR), now) == "graph"


def test_a_day_with_both_runs_the_search_pass_first_then_the_feeds() -> None:
    state = FollowState(covered_until=START)
    passes = plan(SPEC, state, START + 14 * HOUR)
    assert [(p.source, len(p.new)) for p in passes] == [("graph", 2), ("feed", 1)]
    assert passes[0].collection_id == passes[1].collection_id and passes[0].instance_id != passes[1].instance_id
    assert (
        passes[1].scope["sampled"] == []
        and "sampled" not in plan(replace(SPEC, feed=None), state, START + 14 * HOUR)[0].scope
    )


def test_a_window_the_feed_could_not_prove_is_read_by_search_at_the_next_cycle() -> None:
    state = FollowState(covered_until=START + 8 * HOUR)
    now = START + 14 * HOUR
    (feed_pass,) = plan(SPEC, state, now)
    window = feed_pass.new[0]
    output = {"status": "CompletedWithFailures", "failures": [], "provisionalWindows": [window.to_json()]}
    output["incompleteWindows"] = [{"window": window.span_json(), "reasons": ["a subscription started"]}]
    assert apply(SPEC, state, feed_pass, output, now)
    assert state.backfill == [window] and state.backfill_due == [window]
    (search_pass,) = plan(SPEC, state, now + 15 * timedelta(minutes=1))
    assert search_pass.source == "graph" and search_pass.settle == (window,)
    done = {"status": "Completed", "failures": [], "provisionalWindows": [window.to_json()]}
    apply(SPEC, state, search_pass, done, now)
    assert state.backfill_due == [] and state.backfill == [window]  # search's until its day is final


def test_the_reconcile_samples_one_feed_window_after_its_last_read_and_records_it() -> None:
    window = Chunk(START + 8 * HOUR, START + 12 * HOUR)
    state = FollowState(covered_until=START + 12 * HOUR, provisional=[window])
    early = window.end + AUDIT_LATENCY + FEED_SETTLE_MARGIN / 2
    assert all(window not in p.settle for p in plan(SPEC, state, early))  # the feed's last read waits past the band
    now = window.end + AUDIT_LATENCY + FEED_SETTLE_MARGIN
    passes = plan(SPEC, state, now)
    (at,) = [n for n, p in enumerate(passes) if p.reconcile]
    feed_pass, reconcile = passes[at - 1], passes[at]
    assert feed_pass.source == "feed" and window in feed_pass.settle
    assert (reconcile.source, reconcile.reconcile, reconcile.settle) == ("exchange", True, (window,))
    assert reconcile.scope["sampled"] == [window.to_json()]
    assert SPEC.options_of("exchange") == FEED.reconcile_options and SPEC.options_of("feed") == FEED.options
    output = {"status": "Completed", "failures": [], "provisionalWindows": []}
    apply(SPEC, state, reconcile, output, now)
    assert state.reconciles == 1 and state.reconciled_at == now
    assert rescoped(SPEC, state, reconcile).scope["sampled"] == [window.to_json(), window.to_json()]
    assert all(not p.reconcile for p in plan(SPEC, state, now + HOUR))  # one a day
