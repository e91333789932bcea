"""An in-memory :class:`ActivityFeedApi` for unit tests of what drives the feed (a source, a window reader).

Blobs are given as (content type, created, records in the feed's shape); the fake lists them by ``created`` under
enabled subscriptions, expires them after ``retention`` on its ``now``, and raises the adapter's typed errors. The
adapter itself is tested against the emulator over HTTPS (``tests/audit/test_feed_*.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.audit.feed import check_content_type
from shared.audit.feed_errors import FeedContentExpiredError, FeedSubscriptionError, FeedWindowError
from shared.audit.feed_paging import LOOKBACK
from shared.audit.feed_records import feed_item
from shared.audit.normalise import page_of
from shared.audit.ports import FeedContent, FeedSubscription, RecordPage, TimeWindow

T0 = datetime(2024, 11, 17, 10, 0, tzinfo=UTC)


def feed_record(
    record_id: str, created: datetime, *, workload: str = "Exchange", record_type: int = 2
) -> dict[str, Any]:
    """A record in the Management Activity API's common schema (``CreationTime`` without a zone)."""
    return {
        "Id": record_id,
        "CreationTime": created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
        "Operation": "Send",
        "RecordType": record_type,
        "UserType": 0,
        "Workload": workload,
        "UserId": "adele.vance@contoso.onmicrosoft.com",
        "ClientIP": "203.0.113.7",
        "ObjectId": f"<{record_id}@contoso.onmicrosoft.com>",
    }


@dataclass
class FakeFeedApi:
    now: datetime = T0
    retention: timedelta = timedelta(days=7)
    subscriptions: dict[str, str] = field(default_factory=dict)
    """Content type -> status."""
    blobs: list[tuple[FeedContent, list[Any]]] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    fetched: list[str] = field(default_factory=list)

    def publish(self, content_type: str, created: datetime, records: list[Any]) -> FeedContent:
        content_id = f"{content_type}${len(self.blobs)}"
        content = FeedContent(
            content_type, content_id, f"https://feed.invalid/{content_id}", created, created + self.retention
        )
        self.blobs.append((content, records))
        return content

    def list_subscriptions(self) -> list[FeedSubscription]:
        return [FeedSubscription(kind, status) for kind, status in self.subscriptions.items()]

    def ensure_subscriptions(self, content_types: Sequence[str]) -> list[FeedSubscription]:
        for kind in content_types:
            check_content_type(kind)
            if self.subscriptions.get(kind) != "enabled":
                self.subscriptions[kind] = "enabled"
                self.started.append(kind)
        return [FeedSubscription(kind, "enabled") for kind in dict.fromkeys(content_types)]

    def _check_subscription(self, content_type: str) -> None:
        status = self.subscriptions.get(content_type)
        if status is None:
            raise FeedSubscriptionError("no subscription", code="AF20022", status=400)
        if status != "enabled":
            raise FeedSubscriptionError("disabled", code="AF20023", status=400)

    def list_content(self, content_type: str, published: TimeWindow) -> Iterator[FeedContent]:
        check_content_type(content_type)
        if published.start < self.now - LOOKBACK:
            raise FeedWindowError("more than 7 days back")
        self._check_subscription(content_type)
        found = [c for c, _ in self.blobs if c.content_type == content_type and published.contains(c.created)]
        found = [c for c in found if c.created <= self.now]
        yield from sorted(found, key=lambda c: (c.created, c.content_id))

    def fetch(self, content: FeedContent) -> RecordPage:
        self._check_subscription(content.content_type)
        if self.now >= content.expiration:
            raise FeedContentExpiredError("expired", content_id=content.content_id, status=400)
        self.fetched.append(content.content_id)
        records = next(r for c, r in self.blobs if c.content_id == content.content_id)
        return page_of(records, feed_item)
