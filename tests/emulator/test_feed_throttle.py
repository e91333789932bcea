"""The Management Activity API's request budgets: per tenant per minute with a ``PublisherIdentifier``, one small
shared pool without it; over budget → AF429, by default as the 403 without ``Retry-After`` public reports show."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.emulator.feed_helpers import Feed, error_code, feed_emulator
from tests.emulator.helpers import TENANT


class Ticks:
    """The real clock the budgets count on, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def feed() -> Iterator[tuple[Feed, Ticks]]:
    with feed_emulator(feed__requests_per_minute=3, feed__shared_pool_requests_per_minute=2) as running:
        ticks = Ticks()
        running.emu.feed.monotonic = ticks
        yield running, ticks


def test_over_the_budget_is_af429_as_a_403_without_retry_after(feed: tuple[Feed, Ticks]) -> None:
    running, ticks = feed
    assert [running.call("GET", "subscriptions/list").status_code for _ in range(3)] == [200, 200, 200]

    refused = running.call("GET", "subscriptions/list")
    assert (refused.status_code, error_code(refused)) == (403, "AF429")
    assert "Retry-After" not in refused.headers
    assert refused.json()["error"]["message"].startswith("Too many requests. Method=GetBlob, PublisherId=")

    ticks.now += 59.0
    assert running.call("GET", "subscriptions/list").status_code == 403  # refusals did not extend the minute
    ticks.now += 1.5
    assert running.call("GET", "subscriptions/list").status_code == 200
    assert running.emu.feed.stats.throttled[TENANT] == 2


def test_the_status_and_retry_after_are_knobs(feed: tuple[Feed, Ticks]) -> None:
    running, _ = feed
    running.emu.config.feed.throttle_status = 429
    running.emu.config.feed.throttle_retry_after = 7
    for _ in range(3):
        running.call("GET", "subscriptions/list")

    refused = running.call("GET", "subscriptions/list")

    assert (refused.status_code, error_code(refused), refused.headers["Retry-After"]) == (429, "AF429", "7")


def test_requests_without_a_publisher_identifier_share_a_smaller_pool(feed: tuple[Feed, Ticks]) -> None:
    running, _ = feed
    anonymous = [running.call("GET", "subscriptions/list", publisher=None).status_code for _ in range(3)]

    assert anonymous == [200, 200, 403]
    assert running.call("GET", "subscriptions/list").status_code == 200  # the tenant's own budget is untouched
    assert running.emu.feed.stats.without_publisher[TENANT] == 3
