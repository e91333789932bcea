"""The Management Activity API adapter against the emulator over real HTTPS with real msal tokens: subscriptions,
listings and their pages, the window rules, blobs, the publisher identifier, the tenant's GUID, missing permission."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from shared.audit.feed import ActivityFeedClient
from shared.audit.feed_errors import FeedSubscriptionError, FeedWindowError
from shared.audit.ports import FeedSubscription, TimeWindow
from shared.errors import MissingPermissionError, RequestValidationError, TransientApiError
from tests.audit.conftest import DOMAIN, TENANT
from tests.audit.feed_support import DAY, HOUR, NOW, FeedEmu, feed_emulator

PUBLISHER = "5b0c1d2e-3f40-4a51-8b62-73c4d5e6f7a8"


@pytest.fixture
def feed() -> Iterator[FeedEmu]:
    with feed_emulator(first_content_delay_seconds=0.0, backfill_on_subscribe_seconds=10 * 86400.0) as running:
        yield running


def test_ensure_subscriptions_starts_what_is_missing_and_only_that(feed: FeedEmu) -> None:
    client = feed.client()

    first = client.ensure_subscriptions(["Audit.Exchange", "Audit.SharePoint", "Audit.Exchange"])
    again = client.ensure_subscriptions(["Audit.SharePoint", "Audit.Exchange"])

    assert first == [FeedSubscription("Audit.Exchange", "enabled"), FeedSubscription("Audit.SharePoint", "enabled")]
    assert [s.content_type for s in again] == ["Audit.SharePoint", "Audit.Exchange"]
    assert feed.emu.feed.stats.subscriptions_started[TENANT] == 2
    assert feed.emu.feed.stats.errors["AF20024"] == 0  # the list said enabled: nothing was started twice
    assert {s.content_type for s in client.list_subscriptions()} == {"Audit.Exchange", "Audit.SharePoint"}


def test_already_enabled_af20024_counts_as_started(feed: FeedEmu, monkeypatch: pytest.MonkeyPatch) -> None:
    client = feed.client()
    client.ensure_subscriptions(["Audit.Exchange"])
    monkeypatch.setattr(client, "list_subscriptions", list)  # another worker started it after this one looked

    assert client.ensure_subscriptions(["Audit.Exchange"]) == [FeedSubscription("Audit.Exchange", "enabled")]
    assert feed.emu.feed.stats.errors["AF20024"] == 1


def test_a_disabled_subscription_is_started_again(feed: FeedEmu) -> None:
    client = feed.client()
    client.ensure_subscriptions(["Audit.Exchange"])
    feed.emu.feed.disable_subscription(TENANT, "Audit.Exchange")
    feed.clock.advance(timedelta(minutes=15))  # the service wants 15 minutes between two starts of a subscription

    assert client.ensure_subscriptions(["Audit.Exchange"])[0].enabled
    assert feed.emu.feed.stats.subscriptions_started[TENANT] == 2


def test_starting_again_within_the_cooldown_gives_up_as_transient(feed: FeedEmu) -> None:
    client = feed.client(max_attempts=3)
    client.ensure_subscriptions(["Audit.Exchange"])
    feed.emu.feed.disable_subscription(TENANT, "Audit.Exchange")

    with pytest.raises(TransientApiError):
        client.ensure_subscriptions(["Audit.Exchange"])
    assert feed.emu.feed.stats.errors["AF429"] == 3


def test_an_unknown_content_type_is_refused_before_any_call(feed: FeedEmu) -> None:
    with pytest.raises(RequestValidationError, match="contentTypes"):
        feed.client().ensure_subscriptions(["Audit.Teams"])
    assert feed.emu.feed.stats.requests[TENANT] == 0


def test_listing_without_a_subscription_is_a_typed_error_that_dooms_the_window(feed: FeedEmu) -> None:
    with pytest.raises(FeedSubscriptionError) as raised:
        list(feed.client().list_content("Audit.Exchange", TimeWindow(NOW - HOUR, NOW)))

    assert raised.value.code == "AF20022"
    assert raised.value.dooms_collection


def test_listing_under_a_disabled_subscription_is_af20023(feed: FeedEmu) -> None:
    client = feed.client()
    client.ensure_subscriptions(["Audit.Exchange"])
    feed.emu.feed.disable_subscription(TENANT, "Audit.Exchange")

    with pytest.raises(FeedSubscriptionError) as raised:
        list(client.list_content("Audit.Exchange", TimeWindow(NOW - HOUR, NOW)))
    assert raised.value.code == "AF20023"


@pytest.mark.parametrize("header", ["NextPageUri", "NextPageUrl"])
def test_small_pages_are_followed_to_the_end_with_the_publisher_identifier_added_back(header: str) -> None:
    with feed_emulator(
        first_content_delay_seconds=0.0,
        backfill_on_subscribe_seconds=10 * 86400.0,
        list_page_size=3,
        next_page_header=header,
    ) as feed:
        client = feed.client()
        client.ensure_subscriptions(["Audit.Exchange"])
        window = TimeWindow(NOW - 30 * HOUR, NOW)  # longer than a listing may be: listed in pieces

        paged = [c.content_id for c in client.list_content("Audit.Exchange", window)]
        feed.emu.config.feed.list_page_size = 100_000
        whole = [c.content_id for c in client.list_content("Audit.Exchange", window)]

        assert paged == whole
        assert len(paged) > 100
        assert len(set(paged)) == len(paged)
        assert feed.emu.feed.stats.list_pages[TENANT] > len(paged) // 3
        assert feed.emu.feed.stats.without_publisher[TENANT] == 0


def test_descriptors_are_typed_and_blobs_are_normalised_records(feed: FeedEmu) -> None:
    client = feed.client()
    client.ensure_subscriptions(["Audit.SharePoint"])
    window = TimeWindow(NOW - 3 * HOUR, NOW - 2 * HOUR)

    contents = list(client.list_content("Audit.SharePoint", window))
    page = client.fetch(contents[0])

    assert all(c.content_type == "Audit.SharePoint" and window.contains(c.created) for c in contents)
    assert all(c.expiration == c.created + 7 * DAY for c in contents)
    assert page.records and not page.malformed
    assert page.times is not None and len(page.times) == len(page.records)
    record = page.records[0]
    assert record["auditLogRecordType"] == "sharePointFileOperation"
    assert record["service"] in ("SharePoint", "OneDrive")
    assert record["createdDateTime"].endswith("Z")
    graph = {r["id"]: r for r in feed.emu.ground_truth_records(TENANT, NOW - 2 * DAY, NOW)}
    for found in page.records:  # the same record, by id and fields, as Graph serves it
        expected = graph[found["id"]]
        for field in ("createdDateTime", "auditLogRecordType", "operation", "service", "objectId", "clientIp"):
            assert found[field] == expected[field], field


def test_a_window_more_than_seven_days_back_is_refused_before_any_call(feed: FeedEmu) -> None:
    client = feed.client()
    client.ensure_subscriptions(["Audit.Exchange"])
    before = feed.emu.feed.stats.requests[TENANT]

    with pytest.raises(FeedWindowError):
        list(client.list_content("Audit.Exchange", TimeWindow(NOW - 7 * DAY - HOUR, NOW - 6 * DAY)))
    assert feed.emu.feed.stats.requests[TENANT] == before


def test_the_service_refusing_a_window_is_the_same_typed_error(feed: FeedEmu) -> None:
    client = feed.client()
    client.ensure_subscriptions(["Audit.Exchange"])
    feed.emu.config.feed.lookback_seconds = 5 * 86400.0  # the service keeps less than it says (or its clock is ahead)

    with pytest.raises(FeedWindowError) as raised:
        list(client.list_content("Audit.Exchange", TimeWindow(NOW - 6 * DAY, NOW - 6 * DAY + HOUR)))
    assert raised.value.code == "AF20055"


def test_a_tenant_named_by_its_domain_is_listed_by_its_guid(feed: FeedEmu) -> None:
    client = feed.client(tenant_id=DOMAIN, feed_publisher_id=PUBLISHER)

    client.ensure_subscriptions(["Audit.General"])

    assert client.tenant_guid == TENANT
    assert client.publisher == PUBLISHER
    assert feed.emu.feed.subscription(TENANT, "Audit.General") is not None


@pytest.mark.parametrize("status", [401, 403])
def test_a_token_without_activityfeed_read_is_a_missing_permission(status: int) -> None:
    with feed_emulator(app={"feed_permissions": ()}, permission_status=status) as feed:
        client: ActivityFeedClient = feed.client()

        with pytest.raises(MissingPermissionError) as raised:
            client.ensure_subscriptions(["Audit.Exchange"])

        assert "ActivityFeed.Read" in raised.value.permission
        assert raised.value.dooms_collection
        assert raised.value.status == status
        assert feed.emu.feed.subscription(TENANT, "Audit.Exchange") is None


def test_the_first_content_can_take_an_hour_after_subscribing() -> None:
    with feed_emulator() as feed:
        client = feed.client()
        client.ensure_subscriptions(["Audit.Exchange"])
        feed.clock.advance(timedelta(minutes=30))
        assert list(client.list_content("Audit.Exchange", TimeWindow(NOW - 6 * HOUR, feed.clock.now()))) == []

        feed.clock.advance(HOUR)
        listed = list(client.list_content("Audit.Exchange", TimeWindow(NOW - 6 * HOUR, feed.clock.now())))
        assert listed and min(c.created for c in listed) >= NOW  # nothing published before the subscription
