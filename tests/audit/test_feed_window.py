"""Reading an event window from the feed against the emulator's ground truth: every record found once, although the
records come late, repeated across blobs, under throttling; expired content reported, not silently missed."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta

import pytest

from shared.audit.feed import ActivityFeedClient
from shared.audit.feed_errors import FeedContentExpiredError
from shared.audit.feed_reading import FeedReadReport, read_published
from shared.audit.ports import FeedContent, FeedSubscription, RecordPage, TimeWindow
from shared.records.rules import Deduplicator, trim_to_window
from tests.audit.conftest import TENANT
from tests.audit.feed_support import AUDIT_TYPES, DAY, HOUR, NOW, FeedEmu, feed_emulator

BACKFILL = {"first_content_delay_seconds": 0.0, "backfill_on_subscribe_seconds": 10 * 86400.0}


def read_events(client: ActivityFeedClient, events: TimeWindow, until: datetime) -> tuple[list[str], FeedReadReport]:
    """The records of ``events``: every blob published from the window's start until ``until``, trimmed to it."""
    report = FeedReadReport()
    ids: list[str] = []
    for batch in read_published(client, AUDIT_TYPES, TimeWindow(events.start, until), report=report):
        kept, _ = trim_to_window(batch.page.records, events)
        ids.extend(r["id"] for r in kept)
    return ids, report


def test_every_record_of_a_window_is_found_once_when_the_feed_has_published_it() -> None:
    with feed_emulator(**BACKFILL) as feed:
        client = feed.client()
        client.ensure_subscriptions(AUDIT_TYPES)
        events = TimeWindow(NOW - 40 * HOUR, NOW - 34 * HOUR)

        ids, report = read_events(client, events, NOW)

        expected = feed.emu.ground_truth_ids(TENANT, events.start, events.end)  # the ids Graph and Exchange serve
        assert len(expected) > 1000
        assert sorted(ids) == sorted(expected)
        assert report.repeats > 0  # the feed repeated records across blobs; each was kept once
        assert report.complete and report.fetched == report.listed


def test_a_window_read_early_misses_what_is_not_published_yet_and_a_later_read_adds_it() -> None:
    with feed_emulator(**BACKFILL) as feed:
        client = feed.client()
        client.ensure_subscriptions(AUDIT_TYPES)
        events = TimeWindow(NOW - 3 * HOUR, NOW - 2 * HOUR)

        early, _ = read_events(client, events, NOW)
        published = set(feed.emu.feed.ground_truth_ids(TENANT, events.start, events.end, published_before=NOW))
        everything = feed.emu.ground_truth_ids(TENANT, events.start, events.end)
        assert set(early) == published
        assert len(published) < len(everything)  # late records: most within 90 minutes, some up to a day

        feed.clock.advance(DAY + HOUR)
        dedupe = Deduplicator()
        for already in early:
            dedupe.first_time(already)
        later = [
            r["id"]
            for batch in read_published(client, AUDIT_TYPES, TimeWindow(NOW, feed.clock.now()), dedupe=dedupe)
            for r in trim_to_window(batch.page.records, events)[0]
        ]
        assert sorted(early + later) == sorted(everything)


@pytest.mark.parametrize(("status", "retry_after"), [(403, None), (429, 1)])
def test_throttling_over_the_per_minute_budget_is_waited_out(status: int, retry_after: int | None) -> None:
    with feed_emulator(
        **BACKFILL,
        requests_per_minute=4,
        throttle_window_seconds=0.5,
        throttle_status=status,
        throttle_retry_after=retry_after,
    ) as feed:
        client = feed.client(retry_wait_scale=0.5, max_attempts=10)
        client.ensure_subscriptions(["Audit.Exchange"])
        events, until = TimeWindow(NOW - 5 * HOUR, NOW - 4 * HOUR), NOW - 2 * HOUR
        report = FeedReadReport()

        ids = [
            r["id"]
            for batch in read_published(client, ["Audit.Exchange"], TimeWindow(events.start, until), report=report)
            for r in trim_to_window(batch.page.records, events)[0]
        ]

        expected = feed.emu.feed.ground_truth_ids(
            TENANT, events.start, events.end, content_types=["Audit.Exchange"], published_before=until
        )
        assert expected and sorted(ids) == sorted(expected)
        assert feed.emu.feed.stats.throttled[TENANT] > 0
        assert feed.emu.feed.stats.errors["AF429"] == feed.emu.feed.stats.throttled[TENANT]


def test_expired_content_is_a_typed_error_and_reported_by_the_window_reader(feed_at_week_end: FeedEmu) -> None:
    feed = feed_at_week_end
    client = feed.client()
    client.ensure_subscriptions(["Audit.Exchange"])
    oldest = TimeWindow(NOW - 7 * DAY + HOUR, NOW - 7 * DAY + 2 * HOUR)
    contents = list(client.list_content("Audit.Exchange", oldest))
    assert contents
    feed.clock.advance(90 * timedelta(minutes=1))  # the first hour of them is now older than seven days

    with pytest.raises(FeedContentExpiredError) as raised:
        client.fetch(contents[0])
    assert raised.value.content_id == contents[0].content_id
    assert raised.value.code == "AF20051"

    report = FeedReadReport()
    listing = _Listed(client, contents)
    batches = list(read_published(listing, ["Audit.Exchange"], oldest, report=report))
    expired = [c for c in contents if c.expiration <= feed.clock.now()]
    assert expired and report.expired == expired
    assert not report.complete
    assert len(batches) == report.fetched == len(contents) - len(expired)


@pytest.fixture
def feed_at_week_end() -> Iterator[FeedEmu]:
    with feed_emulator(**BACKFILL) as running:
        yield running


class _Listed:
    """The adapter, with the listing it gave before the clock moved (a listing now would not reach that far back)."""

    def __init__(self, client: ActivityFeedClient, contents: list[FeedContent]) -> None:
        self._client = client
        self._contents = contents

    def list_content(self, content_type: str, published: TimeWindow) -> Iterator[FeedContent]:
        return iter(self._contents)

    def fetch(self, content: FeedContent) -> RecordPage:
        return self._client.fetch(content)

    def list_subscriptions(self) -> list[FeedSubscription]:
        return self._client.list_subscriptions()

    def ensure_subscriptions(self, content_types: Sequence[str]) -> list[FeedSubscription]:
        return self._client.ensure_subscriptions(content_types)
