"""The Management Activity API's content: listing by publication time, paging, the window rules, the blobs (late,
repeated, unordered, expiring) and the ground truth they add up to (the emulator's contract)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from m365_emulator.wire import parse_time
from tests.emulator.feed_helpers import HOUR, NOW, Feed, error_code, feed_emulator, stamp
from tests.emulator.helpers import TENANT

DAY = timedelta(days=1)
TYPES = ("Audit.Exchange", "Audit.SharePoint", "Audit.AzureActiveDirectory", "Audit.General")


def everything(**settings: Any) -> Any:
    """Subscriptions that list everything already published (no first-content wait, ten days of backfill)."""
    return feed_emulator(
        feed__first_content_delay_seconds=0.0, feed__backfill_on_subscribe_seconds=10 * 86400.0, **settings
    )


def records_of(feed: Feed, content_types: tuple[str, ...], start: datetime, end: datetime) -> list[dict[str, Any]]:
    """Every record of every blob published in [start, end), in 12-hour listings, repeats included."""
    records = []
    for content_type in content_types:
        moment = start
        while moment < end:
            piece_end = min(moment + 12 * HOUR, end)
            for descriptor in feed.list_all(content_type, moment, piece_end):
                blob = feed.fetch(descriptor)
                assert blob.status_code == 200, blob.text
                records.extend(blob.json())
            moment = piece_end
    return records


def test_the_blobs_of_a_window_hold_exactly_the_records_graph_and_exchange_serve() -> None:
    with everything() as feed:
        for content_type in TYPES:
            assert feed.start(content_type).status_code == 200
        window_start, window_end = NOW - 30 * HOUR, NOW - 26 * HOUR

        found = records_of(feed, TYPES, window_start, NOW)
        ids = {r["Id"] for r in found if window_start <= parse_time(r["CreationTime"]) < window_end}

        expected = feed.emu.ground_truth_ids(TENANT, window_start, window_end)  # what Graph and Exchange serve
        assert expected
        assert ids == set(expected)
        assert feed.emu.feed.ground_truth_ids(TENANT, window_start, window_end, published_before=NOW) == expected
        per_type = [feed.emu.feed.ground_truth_ids(TENANT, window_start, window_end, content_types=[t]) for t in TYPES]
        assert sorted(i for ids_of in per_type for i in ids_of) == sorted(expected)


def test_records_are_published_late_in_blobs_created_after_them() -> None:
    with everything(feed__duplicate_rate=0.0) as feed:
        feed.start("Audit.Exchange")
        for descriptor in feed.list_all("Audit.Exchange", NOW - 20 * HOUR, NOW - 8 * HOUR):
            created = parse_time(descriptor["contentCreated"])
            for record in feed.fetch(descriptor).json():
                assert parse_time(record["CreationTime"]) + HOUR <= created  # 60-90 minutes for most records
        published = feed.emu.feed.publication_times(TENANT, NOW - 20 * HOUR, NOW - 16 * HOUR)
        delays = [published[i] - moment for i, moment in _creation_times(feed, NOW - 20 * HOUR, NOW - 16 * HOUR)]
        assert min(delays) >= HOUR
        assert max(delays) > 2 * HOUR  # the late share: up to a day


def _creation_times(feed: Feed, start: datetime, end: datetime) -> list[tuple[str, datetime]]:
    return [(r["id"], parse_time(r["createdDateTime"])) for r in feed.emu.ground_truth_records(TENANT, start, end)]


def test_some_records_come_again_in_a_later_blob_and_the_knob_turns_it_off() -> None:
    with everything() as feed:
        feed.start("Audit.Exchange")
        repeats = Counter(r["Id"] for r in records_of(feed, ("Audit.Exchange",), NOW - 12 * HOUR, NOW))
        assert any(count == 2 for count in repeats.values())

        feed.emu.config.feed.duplicate_rate = 0.0
        again = Counter(r["Id"] for r in records_of(feed, ("Audit.Exchange",), NOW - 12 * HOUR, NOW))
        assert set(again.values()) == {1}
        assert set(again) <= set(repeats)  # less only the repeats of records first published before the range


def test_records_inside_a_blob_are_unordered_unless_the_knob_orders_them() -> None:
    with everything() as feed:
        feed.start("Audit.Exchange")
        blobs = [feed.fetch(d).json() for d in feed.list_all("Audit.Exchange", NOW - 6 * HOUR, NOW)]
        assert any(_times(b) != sorted(_times(b)) for b in blobs)

        feed.emu.config.feed.unordered_blobs = False
        blobs = [feed.fetch(d).json() for d in feed.list_all("Audit.Exchange", NOW - 6 * HOUR, NOW)]
        assert all(_times(b) == sorted(_times(b)) for b in blobs)


def _times(blob: list[dict[str, Any]]) -> list[str]:
    return [record["CreationTime"] for record in blob]


def test_listing_is_paged_through_a_next_page_header_that_drops_the_publisher_identifier() -> None:
    with everything(feed__list_page_size=5) as feed:
        feed.start("Audit.Exchange")
        first = feed.listing("Audit.Exchange", NOW - 6 * HOUR, NOW)
        link = first.headers["NextPageUri"]
        query = parse_qs(urlsplit(link).query)
        assert len(first.json()) == 5
        assert query["startTime"] == [stamp(NOW - 6 * HOUR)] and query["endTime"] == [stamp(NOW)]
        assert "PublisherIdentifier" not in query

        paged = feed.list_all("Audit.Exchange", NOW - 6 * HOUR, NOW)
        feed.emu.config.feed.list_page_size = 10_000
        whole = feed.listing("Audit.Exchange", NOW - 6 * HOUR, NOW)
        assert "NextPageUri" not in whole.headers
        assert [d["contentId"] for d in paged] == [d["contentId"] for d in whole.json()]
        assert len(paged) > 10
        created = [d["contentCreated"] for d in paged]
        assert created == sorted(created)
        assert all(stamp(NOW - 6 * HOUR) <= c[:19] < stamp(NOW) for c in created)


def test_the_next_page_header_can_be_spelled_nextpageurl_and_a_bad_page_token_is_af20031() -> None:
    with everything(feed__list_page_size=2, feed__next_page_header="NextPageUrl") as feed:
        feed.start("Audit.Exchange")
        first = feed.listing("Audit.Exchange", NOW - HOUR, NOW)
        assert "NextPageUri" not in first.headers
        assert "nextPage=" in first.headers["NextPageUrl"]

        bad = feed.call("GET", "subscriptions/content", contentType="Audit.Exchange", startTime=stamp(NOW - HOUR),
                        endTime=stamp(NOW), nextPage="not-a-page")  # fmt: skip
        assert (bad.status_code, error_code(bad)) == (400, "AF20031")


@pytest.mark.parametrize(
    ("bounds", "code"),
    [
        ({"startTime": stamp(NOW - HOUR)}, "AF20055"),
        ({"startTime": stamp(NOW - 25 * HOUR), "endTime": stamp(NOW)}, "AF20055"),
        ({"startTime": stamp(NOW - DAY), "endTime": stamp(NOW)}, "AF20055"),  # exactly 24 hours
        ({"startTime": stamp(NOW - 7 * DAY - timedelta(seconds=1)), "endTime": stamp(NOW - 6 * DAY)}, "AF20055"),
        ({"startTime": stamp(NOW), "endTime": stamp(NOW - HOUR)}, "AF20055"),
        ({"startTime": "yesterday", "endTime": stamp(NOW)}, "AF20002"),
    ],
)
def test_the_window_rules(bounds: dict[str, str], code: str) -> None:
    with everything() as feed:
        feed.start("Audit.Exchange")
        answer = feed.call("GET", "subscriptions/content", contentType="Audit.Exchange", **bounds)
        assert (answer.status_code, error_code(answer)) == (400, code)


def test_the_friendlier_window_knobs_and_the_documented_forms() -> None:
    with everything(feed__list_span_inclusive=True, feed__window_error_code="AF20030") as feed:
        feed.start("Audit.Exchange")
        assert feed.listing("Audit.Exchange", NOW - DAY, NOW).status_code == 200
        assert feed.listing("Audit.Exchange", NOW - 7 * DAY, NOW - 6 * DAY).status_code == 200
        too_long = feed.listing("Audit.Exchange", NOW - DAY - HOUR, NOW)
        assert (too_long.status_code, error_code(too_long)) == (400, "AF20030")
        day = feed.call("GET", "subscriptions/content", contentType="Audit.Exchange", startTime="2024-05-07",
                        endTime="2024-05-07T23:59")  # fmt: skip
        assert day.status_code == 200 and day.json()
        last_day = feed.call("GET", "subscriptions/content", contentType="Audit.Exchange")
        assert [d["contentId"] for d in last_day.json()] == [
            d["contentId"] for d in feed.listing("Audit.Exchange", NOW - DAY, NOW).json()
        ]


def test_first_content_waits_after_subscribing_and_nothing_from_before_is_listed() -> None:
    with feed_emulator() as feed:
        feed.start("Audit.Exchange")
        feed.clock.advance(timedelta(minutes=50))
        assert feed.listing("Audit.Exchange", NOW - 6 * HOUR, NOW + HOUR).json() == []

        feed.clock.advance(timedelta(minutes=20))  # past the first-content delay (an hour by default)
        listed = feed.list_all("Audit.Exchange", NOW - 6 * HOUR, NOW + 2 * HOUR)
        assert listed
        assert min(parse_time(d["contentCreated"]) for d in listed) >= NOW
        assert max(parse_time(d["contentCreated"]) for d in listed) <= feed.clock.now()

        feed.emu.config.feed.backfill_on_subscribe_seconds = 2 * 3600.0
        backfilled = feed.list_all("Audit.Exchange", NOW - 6 * HOUR, NOW + 2 * HOUR)
        assert min(parse_time(d["contentCreated"]) for d in backfilled) < NOW - HOUR


def test_content_expires_seven_days_after_it_was_published() -> None:
    with everything() as feed:
        feed.start("Audit.Exchange")
        old = feed.list_all("Audit.Exchange", NOW - 7 * DAY + HOUR, NOW - 7 * DAY + 2 * HOUR)[0]
        created = parse_time(old["contentCreated"])
        assert parse_time(old["contentExpiration"]) == created + 7 * DAY
        assert feed.fetch(old).status_code == 200

        feed.clock.advance(2 * HOUR)
        expired = feed.fetch(old)
        assert (expired.status_code, error_code(expired)) == (400, "AF20051")


def test_content_that_does_not_exist_yet_or_ever() -> None:
    with everything() as feed:
        feed.start("Audit.Exchange")
        newest = feed.list_all("Audit.Exchange", NOW - HOUR, NOW)[-1]
        feed.clock.set(feed.clock.now() - 2 * HOUR)

        not_yet = feed.fetch(newest)
        assert (not_yet.status_code, error_code(not_yet)) == (400, "AF20050")
        garbled = feed.session.get(newest["contentUri"].rsplit("/", 1)[0] + "/not-a-content-id")
        assert (garbled.status_code, error_code(garbled)) == (400, "AF20052")


def test_the_feed_drops_a_share_of_records_that_searches_return_when_the_knob_says_so() -> None:
    """``drop_fraction``: records no blob ever holds (an outage's "dropped" records), still in the search ground
    truth; the feed's own ground truth leaves them out."""
    with everything(feed__drop_fraction=0.3) as feed:
        for content_type in TYPES:
            assert feed.start(content_type).status_code == 200
        window_start, window_end = NOW - 30 * HOUR, NOW - 26 * HOUR
        found = records_of(feed, TYPES, window_start, NOW)
        ids = {r["Id"] for r in found if window_start <= parse_time(r["CreationTime"]) < window_end}
        searched = set(feed.emu.ground_truth_ids(TENANT, window_start, window_end))
        published = feed.emu.feed.ground_truth_ids(TENANT, window_start, window_end)
        assert ids == set(published) and ids < searched
        assert 0.15 < 1 - len(ids) / len(searched) < 0.45, (len(ids), len(searched))
        assert set(feed.emu.feed.publication_times(TENANT, window_start, window_end)) == ids
