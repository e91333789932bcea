"""The plan report against the tenant's daily Graph quota: how many submissions a collection or a follower needs, how
many the tenant has left now (read from the budget entity's state), that it will wait when it needs more; a follower
whose steady state cannot fit is refused with a 400 naming ``intervalMinutes``."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from http_api import follow_service, service
from http_api.follow_request import validate_follow_request
from http_api.plan_report import follow_default
from orchestrators.budget_entity import entity_id
from shared import names
from shared.budget.machine import Budget, Limits
from shared.budget.wire import BudgetRequest
from shared.requests.validation import InvalidRequest
from shared.settings import Settings
from shared.sinks.memory import MemorySink
from shared.sources.graph.submissions import follow_per_day
from tests.collector.test_http_service import GUID, NOW, FakeClient, call, resolve

TENANT = "contoso.onmicrosoft.com"
SETTINGS = Settings()


def spend(client: FakeClient, submissions: int, *, hours_ago: float = 2.0) -> None:
    """``submissions`` Graph queries submitted through the tenant's budget entity, ``hours_ago`` before NOW."""
    key = (names.ENTITY_BUDGET, entity_id(GUID, "graph").key)
    budget = Budget()
    limits = Limits(6, 600, 10, SETTINGS.graph_quota)
    for n in range(1, submissions + 1):
        moment = NOW - timedelta(hours=hours_ago) + timedelta(seconds=n)
        request = BudgetRequest("acquire", f"other/{n % 6}", lease_seconds=600, wait_seconds=10, submit=n)
        assert budget.handle(request, moment, limits)["granted"]
        budget.handle(BudgetRequest("release", f"other/{n % 6}"), moment, limits)
    client.entities[key] = budget.state.to_json()


def start(client: FakeClient, body: dict[str, Any]) -> service.ApiResponse:
    raw = json.dumps({"tenantId": TENANT, **body}).encode()
    return call(
        service.start_collection(client, raw, SETTINGS, NOW, lambda: "quota0001", sink=MemorySink(), resolve=resolve)
    )


def follow(client: FakeClient, body: dict[str, Any]) -> service.ApiResponse:
    # a search follower: these test Graph's daily quota, and the fake settings hold no app to check the feed with
    raw = json.dumps({"tenantId": TENANT, "feed": False, **body}).encode()
    return call(follow_service.start_follow(client, raw, SETTINGS, NOW, sink=MemorySink(), resolve=resolve))


def test_the_plan_says_what_the_tenant_has_left_now_and_that_the_collection_will_wait() -> None:
    client = FakeClient()
    spend(client, 140)  # another collection of the tenant used 140 of the collector's 150 two hours ago
    body = {"startDate": "2024-10-01T00:00:00Z", "endDate": "2024-10-31T00:00:00Z"}  # 30 day-long queries
    response = start(client, body)
    assert response.status == 202, response.body
    submissions = response.body["plan"]["submissions"]
    assert submissions == {
        "needed": 30, "rereads": 0, "allowedPerDay": 150, "reserve": 50, "leftNow": 10,
        "nextFreeAt": None, "kept": True, "waits": True,
    }  # fmt: skip
    (warning,) = response.body["plan"]["warnings"]
    assert "10 of them are left now" in warning and "the collection waits for the quota" in warning
    assert "at least 1 more day" in warning


def test_with_the_quota_spent_the_plan_says_when_the_next_submission_may_be_made() -> None:
    client = FakeClient()
    spend(client, 150, hours_ago=3)
    plan = start(client, {"startDate": "2024-11-01T00:00:00Z", "endDate": "2024-11-02T00:00:00Z"}).body["plan"]
    assert plan["submissions"]["leftNow"] == 0 and plan["submissions"]["waits"] is True
    # the first minute's newest submission + 24 h (one entry a minute: never early, at most a minute late)
    assert plan["submissions"]["nextFreeAt"] == "2024-11-19T09:00:59Z"


def test_a_settling_collection_counts_the_windows_it_will_read_again() -> None:
    client = FakeClient()
    body = {"startDate": "2024-11-16T12:00:00Z", "endDate": "2024-11-18T12:00:00Z", "intervalMinutes": 360}
    plain = start(client, body).body["plan"]["submissions"]
    settled = start(FakeClient(), {**body, "settle": True}).body["plan"]["submissions"]
    assert (plain["needed"], plain["rereads"]) == (8, 0)
    assert (settled["needed"], settled["rereads"]) == (12, 4)  # the last day's four windows are read again


def test_an_exchange_plan_has_no_graph_submissions() -> None:
    body = {"startDate": "2024-11-01T00:00:00Z", "endDate": "2024-11-02T00:00:00Z", "source": "exchange"}
    plan = start(FakeClient(), body).body["plan"]
    assert plan["graphQueries"] is None and plan["submissions"] is None


def test_a_follower_answers_with_its_plan_a_day_and_what_is_left_now() -> None:
    client = FakeClient()
    spend(client, 120)
    response = follow(client, {"startDate": "2024-11-18T00:00:00Z", "intervalMinutes": 60, "everyMinutes": 15})
    assert response.status == 202, response.body
    plan = response.body["plan"]
    assert plan["windowsPerDay"] == 24 and plan["graphQueriesPerDay"] == 48  # 24 windows, each read again once
    assert plan["submissions"]["leftNow"] == 30 and plan["submissions"]["waits"] is True
    assert "its passes wait for the quota" in plan["warnings"][0]


def test_a_follower_whose_steady_state_cannot_fit_is_refused_naming_interval_minutes() -> None:
    client = FakeClient()
    refused = follow(client, {"startDate": "2024-11-18T00:00:00Z", "intervalMinutes": 15})
    assert refused.status == 400
    error = refused.body["error"]
    assert (error["field"], error["rule"]) == ("intervalMinutes", "daily_quota")
    assert "192 audit queries a day" in error["message"] and "150 per rolling 24 hours" in error["message"]
    assert "intervalMinutes >= 20 fits" in error["message"] and "everyMinutes does not change it" in error["message"]
    assert client.started == []  # nothing started
    exchange = follow(client, {"startDate": "2024-11-18T00:00:00Z", "intervalMinutes": 15, "source": "exchange"})
    assert exchange.status == 202, exchange.body  # Exchange has no daily submission quota


def test_a_graph_follower_s_default_windows_use_at_most_a_third_of_the_daily_submissions() -> None:
    assert follow_default(SETTINGS, "graph") == 60 and follow_per_day(60) == 48
    assert follow_default(SETTINGS, "exchange") == 15
    request = validate_follow_request({"tenantId": TENANT}, SETTINGS, NOW)
    assert request.interval_minutes == 60 and request.every_minutes == 15
    tight = Settings(graph_daily_queries=20, graph_daily_reserve=10)  # 10 a day: windows of 288 minutes or more fit
    assert follow_default(tight, "graph") == 1440  # a third of 10 is 3: only day-long windows (2 a day) stay under
    try:
        # a search follower is judged at validation; one asking for the feed once its start checked the feed
        # (tests/collector/test_follow_feed_quota.py)
        validate_follow_request({"tenantId": TENANT, "intervalMinutes": 120, "feed": False}, tight, NOW)
    except InvalidRequest as exc:
        assert (exc.field, exc.rule) == ("intervalMinutes", "daily_quota")
        assert "intervalMinutes >= 288 fits" in exc.message
    else:
        raise AssertionError("a follower of 24 queries a day was accepted under a quota of 10")
