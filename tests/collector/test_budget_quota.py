"""The tenant's daily Graph quota as the tenant budget keeps it (``shared.budget.quota`` inside
``shared.budget.machine``): a credit per submission over a rolling 24 hours, refused past the allowance, given again
when the oldest submission leaves the window; its state stays bounded."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from shared.budget.machine import Budget, BudgetState, Limits
from shared.budget.quota import SubmissionLog, quota_view, wait_until
from shared.budget.wire import BudgetOptions, BudgetRequest
from shared.errors import RequestValidationError
from shared.settings import Settings

T0 = datetime(2026, 12, 7, 8, 0, 0, tzinfo=UTC)
DAY = timedelta(hours=24)
LEASE, WAIT = 600.0, 10.0
QUOTA, RESERVE = 200, 50
LIMITS = Limits(6, LEASE, WAIT, QUOTA - RESERVE)


def submit(holder: str, number: int) -> BudgetRequest:
    return BudgetRequest("acquire", holder, lease_seconds=LEASE, wait_seconds=WAIT, submit=number)


def release(holder: str) -> BudgetRequest:
    return BudgetRequest("release", holder)


def test_the_151st_submission_in_24_hours_is_refused_with_a_reserve_of_50_and_granted_when_the_oldest_leaves() -> None:
    budget = Budget()
    for n in range(1, 151):  # 150 submissions, one a minute, each on a slot given back at once
        answer = budget.handle(submit("c1/0", n), T0 + timedelta(minutes=n - 1), LIMITS)
        assert answer["granted"] is True and answer["credit"] == n, (n, answer)
        budget.handle(release("c1/0"), T0 + timedelta(minutes=n - 1, seconds=30), LIMITS)
    assert answer["quota"] == {"allowed": 150, "used": 150, "left": 0, "until": "2026-12-08T08:00:00Z"}

    refused = budget.handle(submit("c2/3", 1), T0 + timedelta(hours=23), LIMITS)
    assert refused["granted"] is False and refused["position"] is None  # not queued: it waits for the quota
    assert refused["quotaUntil"] == "2026-12-08T08:00:00Z"  # when the first submission leaves the window
    assert budget.state.quota_refused == 1 and not budget.state.waiters and not budget.state.leases

    assert budget.handle(submit("c2/3", 1), T0 + DAY - timedelta(seconds=1), LIMITS)["granted"] is False
    again = budget.handle(submit("c2/3", 1), T0 + DAY, LIMITS)
    assert again["granted"] is True and again["credit"] == 1
    assert again["quota"]["used"] == 150 and again["quota"]["left"] == 0  # the oldest left, the new one came in
    assert again["quota"]["until"] == "2026-12-08T08:01:00Z"
    assert budget.handle(submit("c3/0", 1), T0 + DAY + timedelta(seconds=1), LIMITS)["quotaUntil"] == (
        "2026-12-08T08:01:00Z"
    )


def test_a_credit_is_taken_once_per_submission_number_even_when_the_acquire_is_sent_twice() -> None:
    budget = Budget()
    first = budget.handle(submit("c/0", 7), T0, LIMITS)
    resent = budget.handle(submit("c/0", 7), T0 + timedelta(seconds=1), LIMITS)  # a crash re-sent it
    assert first["granted"] and resent["granted"] and resent["credit"] == 7
    assert resent["quota"]["used"] == 1
    resubmission = budget.handle(submit("c/0", 8), T0 + timedelta(seconds=2), LIMITS)  # the same slot, a new query
    assert resubmission["granted"] and resubmission["grant"] == first["grant"] and resubmission["quota"]["used"] == 2


def test_a_holder_refused_for_the_quota_gives_its_slot_and_queue_place_back() -> None:
    limits = Limits(1, LEASE, WAIT, 2)
    budget = Budget()
    assert budget.handle(submit("a/0", 1), T0, limits)["granted"]
    assert budget.handle(submit("b/0", 1), T0, limits)["position"] == 1  # queued for the slot: no credit taken
    assert budget.handle(submit("a/0", 2), T0, limits)["credit"] == 2  # a resubmission on the held slot: the 2nd
    refused = budget.handle(submit("a/0", 3), T0 + timedelta(seconds=5), limits)
    assert refused["granted"] is False and "quotaUntil" in refused
    assert budget.state.leases == {} and budget.state.released == 1
    queued = budget.handle(submit("b/0", 1), T0 + timedelta(seconds=6), limits)
    assert queued["granted"] is False and queued["quotaUntil"] == "2026-12-08T08:00:00Z"
    assert budget.state.waiters == []  # it waits for the quota now, not in the slot queue


def test_acquires_without_a_submission_and_exchange_budgets_take_no_credit() -> None:
    budget = Budget()
    plain = budget.handle(BudgetRequest("acquire", "c/0", lease_seconds=LEASE, wait_seconds=WAIT), T0, LIMITS)
    assert plain["granted"] and plain["quota"]["used"] == 0 and "credit" not in plain
    exchange = Budget()
    answer = exchange.handle(submit("c/0", 1), T0, Limits(3, LEASE, WAIT))  # no quota for this source
    assert answer["granted"] and "quota" not in answer and exchange.state.submissions.buckets == []


def test_the_state_stays_bounded_whatever_the_quota() -> None:
    budget = Budget()
    limits = Limits(1000, LEASE, WAIT, 1_000_000)
    moment = T0
    for n in range(1, 5_001):  # 5,000 submissions over two days, one every 34.56 seconds
        moment = T0 + timedelta(seconds=34.56 * n)
        assert budget.handle(submit(f"c{n % 500}/0", n), moment, limits)["granted"]
        budget.handle(release(f"c{n % 500}/0"), moment, limits)
    buckets = budget.state.submissions.buckets
    assert len(buckets) <= 24 * 60 + 1
    assert sum(count for _, count in buckets) == budget.handle(BudgetRequest("status"), moment, limits)["quota"]["used"]
    assert len(json.dumps(budget.state.to_json())) < 40_000
    restored = BudgetState.from_json(json.loads(json.dumps(budget.state.to_json())))
    assert restored.submissions.buckets == buckets


def test_a_submission_never_leaves_the_window_early() -> None:
    log = SubmissionLog()
    log.take(T0 + timedelta(seconds=10.2))
    log.take(T0 + timedelta(seconds=40))  # the same minute: one entry, the newer time
    assert log.buckets == [[int((T0 + timedelta(seconds=40)).timestamp()), 2]]
    assert log.used(T0 + DAY + timedelta(seconds=39)) == 2
    assert log.used(T0 + DAY + timedelta(seconds=40)) == 0
    assert quota_view({"submissions": [[int(T0.timestamp()), 3]]}, T0 + timedelta(hours=1), 3)["until"] == (
        "2026-12-08T08:00:00Z"
    )


def test_a_lane_asks_again_after_the_quota_frees_and_never_sooner_than_a_poll() -> None:
    until = T0 + timedelta(hours=5)
    assert wait_until(until, T0, 10.0, 10.0) == until + timedelta(seconds=10)
    assert wait_until(T0 - timedelta(seconds=30), T0, 10.0, 10.0) == T0 + timedelta(seconds=10)


def test_the_submission_number_is_checked_and_carried() -> None:
    request = BudgetOptions(6, LEASE, WAIT, 150).acquire("c/1", submit=4)
    assert BudgetRequest.parse("acquire", request.to_json()) == request
    for bad in (-1, True, "1", 1.5):
        with pytest.raises(RequestValidationError) as caught:
            BudgetRequest.parse("acquire", {**request.to_json(), "submit": bad})
        assert caught.value.field == "submit"
    assert BudgetOptions.from_json(BudgetOptions(6, LEASE, WAIT, 150).to_json()).quota == 150
    assert BudgetOptions.from_json({"capacity": 6, "leaseSeconds": 60, "pollSeconds": 1}).quota == 0  # older input


def test_settings_give_graph_the_quota_less_the_reserve_and_exchange_none() -> None:
    settings = Settings.from_env({})
    assert (settings.graph_daily_queries, settings.graph_daily_reserve) == (200, 50)
    assert settings.budget("graph").quota == 150 and settings.budget("exchange").quota == 0
    assert settings.budget("graph").capacity == 6
    tuned = Settings.from_env({"COLLECTOR_GRAPH_DAILY_QUERIES": "40", "COLLECTOR_GRAPH_DAILY_RESERVE": "10"})
    assert tuned.budget("graph").quota == 30
    with pytest.raises(Exception, match="COLLECTOR_GRAPH_DAILY_RESERVE"):
        Settings.from_env({"COLLECTOR_GRAPH_DAILY_QUERIES": "40", "COLLECTOR_GRAPH_DAILY_RESERVE": "40"})
