"""A Graph follower that reads the feed is judged on what search still reads: the reconcile's sample a day in steady
state, and once (the backlog) the windows the feed cannot cover. One that falls back to search (no ActivityFeed.Read)
keeps the search follower's judgement: every window read twice by Graph."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from http_api import follow_service, service
from shared.settings import Settings
from shared.sinks.memory import MemorySink
from shared.sources.base import FollowAccess
from tests.collector.test_http_service import NOW, FakeClient, call, resolve

TENANT = "contoso.onmicrosoft.com"
SETTINGS = Settings()


def granted(settings: Settings, tenant: str) -> FollowAccess:
    return FollowAccess(True, "every content type's subscription is enabled")


def refused(settings: Settings, tenant: str) -> FollowAccess:
    return FollowAccess(False, "the feed refused the subscription list (AF10001): no ActivityFeed.Read")


def started_now(settings: Settings, tenant: str) -> FollowAccess:
    return FollowAccess(True, "started Audit.General's subscription", since=NOW)


def follow(client: FakeClient, body: dict[str, Any], check: Any, settings: Settings = SETTINGS) -> service.ApiResponse:
    raw = json.dumps({"tenantId": TENANT, "feed": True, **body}).encode()
    return call(
        follow_service.start_follow(client, raw, settings, NOW, sink=MemorySink(), resolve=resolve, feed_check=check)
    )


def test_a_feed_follower_at_15_minute_windows_is_judged_on_the_reconcile_not_on_192_searches() -> None:
    client = FakeClient()
    response = follow(client, {"startDate": "2024-11-18T00:00:00Z", "intervalMinutes": 15}, granted)
    assert response.status == 202, response.body
    assert response.body["reads"]["source"] == "feed"
    plan = response.body["plan"]
    assert plan["windowsPerDay"] == 96 and plan["graphQueriesPerDay"] == 1  # the reconcile's one sample a day
    submissions = plan["submissions"]
    assert (submissions["perDay"], submissions["backlog"], submissions["needed"]) == (1, 0, 1)
    assert submissions["feed"] is True and submissions["waits"] is False
    assert plan["warnings"] == []


def test_a_feed_follower_without_activity_feed_read_keeps_the_search_judgement() -> None:
    client = FakeClient()
    response = follow(client, {"startDate": "2024-11-18T00:00:00Z", "intervalMinutes": 15}, refused)
    assert response.status == 400, response.body
    error = response.body["error"]
    assert (error["field"], error["rule"]) == ("intervalMinutes", "daily_quota")
    assert "192 audit queries a day" in error["message"]
    assert client.started == []  # nothing started


def test_the_backlog_beyond_the_feed_is_counted_once_and_the_plan_waits_for_it() -> None:
    client = FakeClient()
    # ten days back: the windows that began more than 7 days less 2 hours ago are search's, each read once
    response = follow(client, {"startDate": "2024-11-08T12:00:00Z", "intervalMinutes": 60}, granted)
    assert response.status == 202, response.body
    submissions = response.body["plan"]["submissions"]
    begin, edge = (
        datetime.fromisoformat("2024-11-08T12:00:00+00:00"),
        datetime.fromisoformat("2024-11-11T14:00:00+00:00"),
    )  # NOW less 7 days plus 2 hours
    assert submissions["backlog"] == (edge - begin).total_seconds() // 3600 == 74
    assert (submissions["perDay"], submissions["needed"]) == (1, 75)
    assert submissions["waits"] is False  # 75 of the 150 left


def test_windows_before_a_subscription_the_start_began_are_read_twice_by_search() -> None:
    client = FakeClient()
    # from midnight, subscription started at NOW (12:00): 12 hourly windows before it, each read and read again
    response = follow(client, {"startDate": "2024-11-18T00:00:00Z", "intervalMinutes": 60}, started_now)
    assert response.status == 202, response.body
    submissions = response.body["plan"]["submissions"]
    assert (submissions["backlog"], submissions["perDay"]) == (24, 1)


def test_a_reconcile_every_hour_at_15_minute_windows_is_24_searches_a_day() -> None:
    hourly = Settings(follow_reconcile_hours=1.0)
    response = follow(FakeClient(), {"startDate": "2024-11-18T00:00:00Z", "intervalMinutes": 15}, granted, hourly)
    assert response.status == 202, response.body
    assert response.body["plan"]["submissions"]["perDay"] == 24
    exchange = Settings(follow_reconcile_source="exchange")  # the reconcile searches Exchange: no Graph query at all
    response = follow(FakeClient(), {"startDate": "2024-11-18T00:00:00Z", "intervalMinutes": 15}, granted, exchange)
    assert response.status == 202, response.body
    assert response.body["plan"]["submissions"]["perDay"] == 0
