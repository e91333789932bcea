"""The feed's chunk activity (``activities.feed_reads``) over an in-memory feed and store: a chunk read call by call
holds every record of its window published by the end of its publication window, once; what it cannot prove (an
expired blob, a subscription it had to start, the feed's 7 days) makes it incomplete with the reason; a call run twice
changes nothing; the feed's throttling is the window's "throttled (429)"."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from activities import feed as feed_activity
from activities import feed_reads
from activities.chunk_parts import ID_CACHE
from shared.audit.error_body import THROTTLED
from shared.audit.feed_paging import LOOKBACK
from shared.errors import TransientApiError
from shared.models import ActivityResult, Chunk, ChunkSummary, iso
from shared.sinks.base import ChunkSink
from shared.sinks.memory import MemorySink
from shared.sources.feed.calls import CONTENT_TYPES, LISTING_MARGIN, FeedCursor
from tests.support.feed_fake import T0, FakeFeedApi, feed_record

TENANT = "3c9e1f2a-5b6d-4e7f-8a90-1b2c3d4e5f60"
CHUNK = Chunk(T0 - timedelta(days=2), T0 - timedelta(days=1))
LAG = 6 * 3600.0
NOW = T0


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    ID_CACHE.clear()


def subscribed(**overrides: Any) -> FakeFeedApi:
    api = FakeFeedApi(now=NOW, **overrides)
    for content_type in CONTENT_TYPES:
        api.subscriptions.setdefault(content_type, "enabled")
    return api


def payload(cursor: Any, number: int, chunk: Chunk = CHUNK) -> dict[str, Any]:
    return {
        "collectionId": "c1",
        "tenantId": TENANT,
        "chunk": chunk.to_json(),
        "filters": {},
        "attempt": 1,
        "cursor": cursor,
        "call": number,
        "feed": {"lagSeconds": LAG, "contentTypes": list(CONTENT_TYPES)},
    }


def call(api: FakeFeedApi, sink: ChunkSink, cursor: Any, number: int, chunk: Chunk = CHUNK) -> ActivityResult:
    return ActivityResult.from_json(feed_activity.read_chunk(api, sink, payload(cursor, number, chunk), lambda: NOW))


def whole(api: FakeFeedApi, sink: ChunkSink, chunk: Chunk = CHUNK) -> tuple[ChunkSummary, list[dict[str, Any]]]:
    """Every call of the chunk: its summary and each call's ``feed`` tally."""
    cursor, tallies = None, []
    for number in range(500):
        result = call(api, sink, cursor, number, chunk)
        assert result.ok, result
        tallies.append(result.data["feed"])
        if "summary" in result.data:
            return ChunkSummary.from_json(result.data["summary"]), tallies
        cursor = result.data["cursor"]
    raise AssertionError("never finished")


def ids_of(sink: ChunkSink, summary: ChunkSummary) -> list[str]:
    return [json.loads(line)["id"] for line in (sink.read_bytes(summary.blob) or b"").splitlines()]


def a_day_of_blobs(api: FakeFeedApi, *, repeat_every: int = 7) -> set[str]:
    """Records every 10 minutes around the chunk, each published 30-110 minutes after it happened, in blobs of
    five-minute publication slots per content type; every ``repeat_every``-th record published again an hour later
    in another blob (the feed repeats by design). Returns the ids of the chunk's window published by the end of its
    publication window."""
    workloads = {"Audit.Exchange": "Exchange", "Audit.SharePoint": "SharePoint", "Audit.General": "MicrosoftTeams"}
    published_by = CHUNK.end + timedelta(seconds=LAG)
    expected: set[str] = set()
    slots: dict[tuple[str, object], list[dict[str, Any]]] = {}
    moment = CHUNK.start - timedelta(hours=3)
    n = 0
    while moment < CHUNK.end + timedelta(hours=12):
        content_type = list(workloads)[n % 3]
        record = feed_record(f"r{n:05d}", moment, workload=workloads[content_type])
        published = moment + timedelta(minutes=30 + (n * 13) % 80)
        slot = published.replace(minute=published.minute - published.minute % 5, second=0)
        slots.setdefault((content_type, slot + timedelta(minutes=5)), []).append(record)
        if n % repeat_every == 0:
            slots.setdefault((content_type, slot + timedelta(minutes=65)), []).append(dict(record))
        if CHUNK.start <= moment < CHUNK.end and slot + timedelta(minutes=5) < published_by:
            expected.add(f"r{n:05d}")
        moment += timedelta(minutes=10)
        n += 1
    for (content_type, created), records in sorted(slots.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        api.publish(content_type, created, records)  # type: ignore[arg-type]
    return expected


def test_a_chunk_holds_every_record_of_its_window_published_by_its_end_once() -> None:
    api, sink = subscribed(), MemorySink()
    expected = a_day_of_blobs(api)
    summary, tallies = whole(api, sink)
    ids = ids_of(sink, summary)
    assert sorted(ids) == sorted(expected) and len(ids) == len(set(ids))
    assert not summary.incomplete and summary.records == len(expected)
    assert [e["contentType"] for e in summary.evidence] == list(CONTENT_TYPES)
    assert all(e["complete"] and e["published"]["end"] == "2024-11-16T16:00:00Z" for e in summary.evidence)
    repeats = sum(t["repeats"] for t in tallies)
    assert repeats > 0 and sum(t["fetched"] for t in tallies) == len(api.fetched)
    assert sum(t["calls"] for t in tallies) == len(tallies)  # one per call: the window adds them up


def test_a_piece_with_more_blobs_than_a_call_fetches_is_read_over_several_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(feed_reads, "MAX_BLOBS", 7)
    api, sink = subscribed(), MemorySink()
    expected = a_day_of_blobs(api)
    summary, tallies = whole(api, sink)
    assert sorted(ids_of(sink, summary)) == sorted(expected)
    assert len(api.fetched) == len(set(api.fetched))  # no blob fetched twice by the skip-and-cap paging
    assert len(tallies) > 4 * 3 and all(t["fetched"] <= 7 for t in tallies)


def test_an_expired_blob_makes_the_chunk_incomplete_and_is_named() -> None:
    api, sink = subscribed(retention=timedelta(days=7)), MemorySink()
    a_day_of_blobs(api)
    old = api.publish("Audit.Exchange", CHUNK.start + timedelta(minutes=7), [feed_record("gone", CHUNK.start)])
    api.blobs[-1] = (type(old)(old.content_type, old.content_id, old.content_uri, old.created, NOW), api.blobs[-1][1])
    summary, tallies = whole(api, sink)
    assert summary.incomplete and "gone" not in ids_of(sink, summary)
    exchange = next(e for e in summary.evidence if e["contentType"] == "Audit.Exchange")
    assert exchange["expired"] == 1 and not exchange["complete"] and old.content_id in exchange["detail"]
    assert all(e["complete"] for e in summary.evidence if e["contentType"] != "Audit.Exchange")
    assert sum(t["expired"] for t in tallies) == 1


def test_a_subscription_the_read_starts_is_not_read_and_says_why() -> None:
    api, sink = subscribed(), MemorySink()
    del api.subscriptions["Audit.SharePoint"]
    api.subscriptions["Audit.General"] = "disabled"
    a_day_of_blobs(api)
    summary, tallies = whole(api, sink)
    assert sorted(api.started) == ["Audit.General", "Audit.SharePoint"]
    assert summary.incomplete
    started = {e["contentType"]: e for e in summary.evidence if not e["complete"]}
    assert sorted(started) == ["Audit.General", "Audit.SharePoint"]
    assert all("started it" in e["detail"] and e["listed"] == 0 for e in started.values())
    assert sorted(tallies[0]["started"]) == ["Audit.General", "Audit.SharePoint"]


def test_a_window_the_feed_no_longer_lists_from_its_start_is_read_from_its_7_days_and_incomplete() -> None:
    api, sink = subscribed(), MemorySink()
    chunk = Chunk(NOW - LOOKBACK - timedelta(hours=1), NOW - LOOKBACK + timedelta(hours=5))
    summary, _ = whole(api, sink, chunk)
    assert summary.incomplete
    assert all("7 days back" in e["detail"] for e in summary.evidence)
    assert all(e["published"]["start"] > chunk.start.isoformat()[:19] for e in summary.evidence)


def test_a_chunk_of_the_last_minutes_reads_publications_up_to_a_few_minutes_ago() -> None:
    api, sink = subscribed(), MemorySink()
    chunk = Chunk(NOW - timedelta(hours=1), NOW - timedelta(minutes=2))
    summary, _ = whole(api, sink, chunk)
    until = summary.evidence[0]["published"]["end"]
    assert until == (NOW - LISTING_MARGIN).strftime("%Y-%m-%dT%H:%M:%SZ")
    # a feed that published nothing cannot show it is past the window's end: not proved (the feed may be behind)
    assert summary.incomplete and all("the feed is behind" in e["detail"] for e in summary.evidence)


def test_a_feed_whose_newest_record_is_before_the_windows_end_is_behind_and_the_chunk_unproved() -> None:
    api, sink = subscribed(), MemorySink()
    a_day_of_blobs(api)
    held = CHUNK.end - timedelta(hours=1)  # every record that happened after this is not published yet
    api.blobs = [(c, [r for r in records if r["CreationTime"] < held.strftime("%Y-%m-%dT%H:%M:%S")])
                 for c, records in api.blobs]  # fmt: skip
    summary, tallies = whole(api, sink)
    assert summary.incomplete
    assert all(
        e["detail"].startswith("the feed is behind") and (e["newest"] or "") < iso(held) for e in summary.evidence
    )
    assert "window's end " + iso(CHUNK.end) in summary.evidence[0]["detail"]
    assert max(t["newest"] for t in tallies) < iso(held)


def test_a_call_run_twice_returns_what_it_did_and_the_chunk_is_the_same() -> None:
    api, sink = subscribed(), MemorySink()
    expected = a_day_of_blobs(api)
    first = call(api, sink, None, 0)
    fetched = len(api.fetched)
    again = call(api, sink, None, 0)  # its worker died after the work: the same call again
    assert again.data == first.data and len(api.fetched) == fetched
    cursor, number = first.data["cursor"], 1
    while True:
        result = call(api, sink, cursor, number)
        if "summary" in result.data:
            break
        cursor, number = result.data["cursor"], number + 1
    rerun = call(api, sink, cursor, number)  # the committing call again: the same summary, nothing read
    assert rerun.data["summary"] == result.data["summary"] and rerun.data["feed"]["calls"] == 1
    assert sorted(ids_of(sink, ChunkSummary.from_json(result.data["summary"]))) == sorted(expected)


def test_the_cursor_says_where_the_read_is() -> None:
    api, sink = subscribed(), MemorySink()
    a_day_of_blobs(api)
    first = call(api, sink, None, 0)
    cursor = FeedCursor.from_json(first.data["cursor"])
    assert cursor.published_from == CHUNK.start and cursor.published_until == CHUNK.end + timedelta(seconds=LAG)
    assert cursor.types == CONTENT_TYPES and cursor.parts == ["00000"]


def test_the_feeds_throttling_outlasting_the_retries_is_the_windows_throttled() -> None:
    class Busy(FakeFeedApi):
        def list_content(self, *args: Any, **kwargs: Any) -> Any:
            raise TransientApiError("Management Activity API GET gave up: 403 AF429: Too many requests", status=403)

    api = Busy(now=NOW, subscriptions={t: "enabled" for t in CONTENT_TYPES})
    result = call(api, MemorySink(), None, 0)
    assert result.error is not None and result.error.transient and result.error.message.startswith(THROTTLED)
