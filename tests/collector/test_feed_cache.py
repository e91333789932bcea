"""The feed's content cache (``activities.feed_cache``): windows whose publication ranges overlap fetch each blob
from the feed once and read it from the cache after, holding exactly what a read without the cache holds; an entry
round-trips a page as the adapter gave it; entries past the feed's 7 days are pruned, once a day; names are safe
whatever the service's contentId holds."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from activities.feed_cache import KEEP, ROOT, FeedCache
from shared.audit.ports import FeedContent, RecordPage
from shared.models import Chunk
from shared.sinks.memory import MemorySink
from shared.values import MalformedRecord
from tests.collector.test_feed_reads import CHUNK, TENANT, a_day_of_blobs, ids_of, subscribed, whole

LATER = Chunk(CHUNK.start + timedelta(hours=4), CHUNK.end + timedelta(hours=4))


def test_overlapping_windows_fetch_each_blob_once_and_hold_what_an_uncached_read_holds() -> None:
    api, sink = subscribed(), MemorySink()
    a_day_of_blobs(api)
    _, first_tallies = whole(api, sink)
    fetched_first = len(api.fetched)
    second, tallies = whole(api, sink, LATER)
    assert len(api.fetched) == len(set(api.fetched)), "a blob fetched twice"
    listed = sum(t["listed"] for t in tallies)
    cached = sum(t["cached"] for t in tallies)
    assert cached > 0 and sum(t["fetched"] for t in tallies) == len(api.fetched) - fetched_first
    assert cached + sum(t["fetched"] for t in tallies) == listed
    assert sum(t["cached"] for t in first_tallies) == 0
    assert sum(e["cached"] for e in second.evidence) == cached
    fresh_api, fresh_sink = subscribed(), MemorySink()
    a_day_of_blobs(fresh_api)
    uncached, _ = whole(fresh_api, fresh_sink, LATER)
    assert sorted(ids_of(sink, second)) == sorted(ids_of(fresh_sink, uncached)) and second.records > 0
    assert not second.incomplete


def test_an_entry_round_trips_the_page_as_the_adapter_gave_it() -> None:
    sink = MemorySink()
    cache = FeedCache(sink, TENANT)
    created = datetime(2024, 11, 16, 10, 5, 17, 250000, tzinfo=UTC)
    content = FeedContent("Audit.Exchange", "2024$../x$audit_exchange", "https://f/1", created, created)
    page = RecordPage(
        [{"id": "a", "createdDateTime": "2024-11-16T10:00:00.123Z"}],
        [MalformedRecord("{broken", "not JSON", "b", created)],
        [datetime(2024, 11, 16, 10, 0, 0, 123000, tzinfo=UTC)],
    )
    assert cache.get(content) is None
    cache.put(content, page)
    assert cache.get(content) == page
    name = cache.name(content)
    assert name.startswith(f"{ROOT}/{TENANT}/20241116/Audit.Exchange/") and ".." not in name and "$" not in name
    other = FeedContent("Audit.Exchange", "another", "https://f/2", created, created)
    assert cache.get(other) is None
    sink.write_stream(cache.name(other), [b"{not json"])
    assert cache.get(other) is None  # unreadable: fetched again, never fatal


def test_unsafe_tenant_names_are_refused() -> None:
    with pytest.raises(ValueError):
        FeedCache(MemorySink(), "../other")


def test_entries_past_the_feeds_seven_days_are_pruned_once_a_day() -> None:
    sink = MemorySink()
    cache = FeedCache(sink, TENANT)
    now = datetime(2024, 11, 20, 9, 0, tzinfo=UTC)
    page = RecordPage([{"id": "a"}])
    for days in range(12):
        created = now - timedelta(days=days)
        cache.put(FeedContent("Audit.General", f"c{days}", "u", created, created), page)
    other = FeedCache(sink, "contoso.onmicrosoft.com")
    old = now - timedelta(days=11)
    other.put(FeedContent("Audit.General", "o", "u", old, old), page)
    assert cache.prune(now) == 12 - 9  # days 9, 10, 11: created before the 7 days plus a day of slack
    kept = [n for n in sink.list_names(f"{ROOT}/{TENANT}/") if n.endswith(".json")]
    assert len(kept) == 9 and all(n.split("/")[2] >= f"{now - KEEP:%Y%m%d}" for n in kept)
    assert len(sink.list_names(f"{ROOT}/contoso.onmicrosoft.com/")) == 1  # another tenant's cache is its own
    cache.put(FeedContent("Audit.General", "late", "u", old, old), page)
    assert cache.prune(now + timedelta(hours=3)) == 0  # once a day
    assert cache.prune(now + timedelta(days=1)) == 2


def test_two_lanes_reading_one_blob_at_once_fetch_it_once() -> None:
    sink = MemorySink()
    created = datetime(2024, 11, 16, 10, 5, tzinfo=UTC)
    content = FeedContent("Audit.Exchange", "shared-blob", "https://f/1", created, created)
    fetched: list[str] = []
    inside = threading.Event()

    def slow_fetch(blob: FeedContent) -> RecordPage:
        fetched.append(blob.content_id)
        inside.set()
        time.sleep(0.2)  # the other lane asks for the blob meanwhile
        return RecordPage([{"id": "a"}])

    results: list[tuple[RecordPage, bool]] = []
    first = threading.Thread(target=lambda: results.append(FeedCache(sink, TENANT).read(content, slow_fetch)))
    first.start()
    assert inside.wait(5)
    results.append(FeedCache(sink, TENANT).read(content, slow_fetch))
    first.join(5)
    assert fetched == ["shared-blob"]
    assert sorted(hit for _, hit in results) == [False, True] and all(p.records == [{"id": "a"}] for p, _ in results)
