"""The feed as a source: its request rules, its options, its lanes in the window, its plan and manifest fields."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from http_api.plan_report import plan_report
from shared.models import ActivityResult, Chunk, ChunkSummary
from shared.requests.validation import InvalidRequest
from shared.settings import Settings
from shared.sources.feed.calls import ACTIVITY, CONTENT_TYPES, FeedRead, Tally
from shared.sources.registry import manifest_sections, source, validate_collection_request, window_for
from shared.window.state import CallActivity, Carried
from tests.collector.window_sim import run, spec

NOW = datetime(2026, 3, 10, 12, tzinfo=UTC)
TENANT = "contoso.onmicrosoft.com"


def body(**extra: Any) -> dict[str, Any]:
    return {
        "tenantId": TENANT,
        "startDate": "2026-03-08T00:00:00Z",
        "endDate": "2026-03-10T00:00:00Z",
        "source": "feed",
        **extra,
    }


def refused(**extra: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        validate_collection_request(body(**extra), Settings(), NOW)
    return caught.value


def test_a_feed_request_names_any_tenant_form_and_defaults_to_day_chunks() -> None:
    request = validate_collection_request(body(), Settings(), NOW)
    assert (request.source, request.interval_minutes, request.chunk_count, request.interval_defaulted) == (
        "feed",
        1440,
        2,
        True,
    )
    options = source("feed").run_options(Settings(), 3, high_completeness=False)
    assert options.source_options == {"lagSeconds": 48 * 3600.0, "contentTypes": list(CONTENT_TYPES)}
    assert options.budget_capacity == 3
    assert "source_options" in options.to_json()
    assert "source_options" not in source("graph").run_options(Settings(), 3, high_completeness=False).to_json()


def test_a_window_older_than_the_feeds_7_days_is_refused_naming_start_date() -> None:
    error = refused(startDate="2026-03-03T11:59:00Z")
    assert (error.field, error.rule) == ("startDate", "feed_lookback")
    assert "7 days" in error.message and "graph or exchange" in error.message
    validate_collection_request(body(startDate="2026-03-03T12:00:00Z"), Settings(), NOW)  # exactly 7 days: listed


def test_the_feed_applies_every_filter_a_record_shows_and_refuses_a_keyword() -> None:
    filters = {"recordTypes": ["ExchangeItem", "SharePoint"], "service": "Exchange", "operations": ["Send"]}
    request = validate_collection_request(body(filters=filters), Settings(), NOW)
    assert request.filters.record_types == ("ExchangeItem", "SharePoint") and request.filters.service == "Exchange"
    error = refused(filters={"keyword": "invoice"})
    assert (error.field, error.rule) == ("filters.keyword", "not_feed")
    error = refused(highCompleteness=True)
    assert (error.field, error.rule) == ("highCompleteness", "exchange_only")


def test_the_feed_exists_in_the_national_clouds() -> None:
    settings = Settings.from_env(
        {
            "AUDIT_AUTHORITY_HOST": "https://login.microsoftonline.us",
            "AUDIT_GRAPH_BASE_URL": "https://graph.microsoft.us",
            "AUDIT_EXCHANGE_BASE_URL": "https://outlook.office365.us",
            "AUDIT_FEED_BASE_URL": "https://manage.office365.us",
        }
    )
    assert validate_collection_request(body(), settings, NOW).source == "feed"


def read_result(step: CallActivity, calls: int = 3, records: int = 4) -> ActivityResult:
    """The feed activity's answer: go on until the lane's ``calls``-th call, which commits the chunk."""
    read = FeedRead.from_json(step.input)
    stats = Tally(calls=1, listed=2, fetched=2, records=records, repeats=1).to_json()
    if read.number + 1 < calls:
        return ActivityResult.success({"cursor": {"call": read.number + 1}, "feed": stats})
    chunk = read.call.chunk
    summary = ChunkSummary(chunk, records, 0, 0, 0, "b", "h", 1, False).to_json()
    return ActivityResult.success({"summary": summary, "feed": stats})


def feed_spec(n: int = 6, k: int = 2, m: int = 1000, **options: Any) -> Any:
    lag = {"lagSeconds": 3600.0, "contentTypes": list(CONTENT_TYPES)}
    return spec(n, k, "feed", m, source_options=lag, **options)


def test_a_feed_lane_reads_its_chunk_call_by_call_and_the_window_adds_up_what_the_reads_did() -> None:
    window = window_for(feed_spec())
    issued = run(window, lambda step, _: read_result(step), random.Random(4))
    calls = [s for s in issued if isinstance(s, CallActivity)]
    assert {s.name for s in calls} == {ACTIVITY} and len(calls) == 6 * 3
    first = FeedRead.from_json(calls[0].input)
    assert first.cursor is None and first.number == 0 and first.lag_seconds == 3600.0
    assert first.content_types == CONTENT_TYPES
    later = [FeedRead.from_json(s.input) for s in calls if s.input["cursor"]]
    assert all(r.cursor == {"call": r.number} for r in later)  # the cursor the previous call returned, and its part
    output = window.output("m")
    assert output["status"] == "Completed" and output["records"] == 6 * 4
    assert output["feed"]["calls"] == 18 and output["feed"]["repeats"] == 18 and output["feed"]["lagHours"] == 1.0
    assert output.get("queries") is None and output.get("exchange") is None


def test_what_the_reads_did_survives_continue_as_new() -> None:
    window = window_for(feed_spec(n=6, m=2))
    run(window, lambda step, _: read_result(step, calls=2), random.Random(1))
    assert window.should_continue_as_new
    carried = Carried.from_json(window.carry().to_json())
    assert carried.sections["feed"]["calls"] == window.status()["feed"]["calls"] > 0
    again = window_for(window.spec, carried)
    assert again.status()["feed"]["calls"] == window.status()["feed"]["calls"]
    assert {"queries", "durations", "exchange"} <= set(carried.to_json())  # the sections every state keeps


def test_a_feed_lane_takes_a_slot_of_the_feeds_own_budget() -> None:
    window = window_for(feed_spec(budget_capacity=2))
    (ask,) = window.fill()
    assert ask.operation == "acquire"  # type: ignore[union-attr]
    steps = window.on_budget(ask.lane, {"granted": True, "grant": 1, "leaseUntil": "2024-11-17T00:10:00Z"})  # type: ignore[union-attr]
    read = next(s for s in steps if isinstance(s, CallActivity))
    assert read.name == ACTIVITY and read.input["slotDeadline"] == "2024-11-17T00:09:50Z"
    assert Settings().budget("feed").capacity == 3


def test_the_plan_says_what_each_chunk_reads_and_warns_while_late_publications_are_out() -> None:
    settings = Settings()
    recent = plan_report(
        source="feed", chunks=2, settings=settings, now=NOW, ranges=[Chunk(NOW - timedelta(days=2), NOW)]
    )
    assert recent["feedContentTypes"] == list(CONTENT_TYPES) and recent["feedLagHours"] == 48.0
    assert recent["graphQueries"] is None and any("publishes records late" in w for w in recent["warnings"])
    settled = plan_report(
        source="feed",
        chunks=1,
        settings=settings,
        now=NOW,
        ranges=[Chunk(NOW - timedelta(days=6), NOW - timedelta(days=5))],
    )
    assert not settled["warnings"]
    graph = plan_report(
        source="graph", chunks=2, settings=settings, now=NOW, ranges=[Chunk(NOW - timedelta(days=2), NOW)]
    )
    assert "feedContentTypes" not in graph and graph["graphQueries"] == 2  # adding a source changes no other's plan


def test_the_manifest_says_what_the_feed_proves_and_cannot() -> None:
    tally = {**Tally(calls=3, listed=5, fetched=5, records=9).to_json(), "lagHours": 48.0}
    sections = manifest_sections({"source": "feed", "filters": {"operations": ["Send"]}, "feed": tally})
    assert sections["feed"]["calls"] == 3 and "publishedUntil" in sections["feed"]["proves"]
    assert "late" in sections["feed"]["cannotProve"]
    assert sections["filterCheck"] == {"checked": ["operations"], "trusted": []}
    assert sections["queries"] is None and sections["exchange"] is None
    assert "feed" not in manifest_sections({"source": "exchange", "exchange": {"calls": 1}})
