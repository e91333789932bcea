"""Knobs of the Office 365 Management Activity API (``config.feed``): each defaults to the least convenient plausible
service; the README ("The Management Activity API") gives the evidence for each default.

Live like the other sections: a field changed on a running emulator takes effect on the next request (the blob
index is rebuilt when a field it depends on changes).
"""

from __future__ import annotations

from dataclasses import dataclass

DAY_SECONDS = 86_400.0
CONTENT_TYPES = ("Audit.AzureActiveDirectory", "Audit.Exchange", "Audit.SharePoint", "Audit.General", "DLP.All")
"""The documented content types (office-365-management-activity-api-reference, "Working with the ... API")."""
NEXT_PAGE_HEADERS = frozenset({"NextPageUri", "NextPageUrl"})
WINDOW_ERROR_CODES = frozenset({"AF20055", "AF20030"})
THROTTLE_STATUSES = frozenset({403, 429})
PERMISSION_STATUSES = frozenset({401, 403})


@dataclass
class FeedSettings:
    first_content_delay_seconds: float = 3600.0
    """Nothing is listed for a content type until this long after its subscription started (the reference: "it can
    take up to 12 hours for the first content blobs to become available"; an hour by default so tests on a moved
    clock reach it; set 43,200 for the documented worst case)."""
    backfill_on_subscribe_seconds: float = 0.0
    """Content published up to this long before a subscription started is listed once the subscription is. 0: only
    content published since the subscription ("you will have access to new content from that point forward")."""
    blob_interval_seconds: float = 300.0
    """Each content type's blobs are cut this often: a blob holds the records published in one such interval and is
    created (``contentCreated``) just after it ends."""
    duplicate_rate: float = 0.05
    """Share of records (a stable draw per record) delivered again in a later blob of their content type."""
    duplicate_max_lag_blobs: int = 12
    """How many intervals later (1 to this) the repeat is published."""
    extra_delay_fraction: float = 0.0
    """Share of records the feed publishes later than their ingestion delay, by up to ``extra_delay_max_seconds``
    more (the FAQ: after an outage "5% to 10% of the records ... may be delayed", "more than 3 to 5 days")."""
    extra_delay_max_seconds: float = 5 * DAY_SECONDS
    drop_fraction: float = 0.0
    """Share of records (a stable draw per record) the feed never publishes, though searches return them (the FAQ:
    after an outage "some audit records are dropped and the service tries to backfill them"; a reconcile of the feed
    with a search is what finds them). Off by default, as the outages it stands for are not the normal state."""
    behind_from: float | None = None
    """The feed falls behind (a publication backlog, as in an outage): records created at or after this moment (epoch
    seconds) are published ``behind_seconds`` later than their ingestion delay; searches still return them on time.
    None: never. A declared knob, off by default (outages are not the normal state); a test of a feed that is behind
    at a window's read turns it on."""
    behind_seconds: float = 0.0
    list_page_size: int = 20
    """Content descriptors per listing page; more follow through the ``NextPageUri`` header."""
    next_page_header: str = "NextPageUri"
    """The header naming the next page: ``NextPageUri`` (the reference) or ``NextPageUrl`` (the troubleshooting
    article's spelling)."""
    max_list_span_seconds: float = DAY_SECONDS
    """Longest ``endTime - startTime`` a listing accepts."""
    list_span_inclusive: bool = False
    """False: a span of exactly ``max_list_span_seconds`` is refused too (one public client saw exactly-24-hour
    windows refused); True: the documented "no more than 24 hours apart"."""
    lookback_seconds: float = 7 * DAY_SECONDS
    """How far back ``startTime`` may lie, to the second (no grace)."""
    window_error_code: str = "AF20055"
    """The code of a refused window: ``AF20055`` (what two public clients saw on the wire) or ``AF20030`` (the
    documented one)."""
    content_retention_seconds: float = 7 * DAY_SECONDS
    """``contentExpiration - contentCreated``; a blob fetched after its expiration answers AF20051."""
    requests_per_minute: int = 2000
    """Requests per tenant in any ``throttle_window_seconds`` that carry a ``PublisherIdentifier``; more are
    refused with AF429 (the reference's baseline: 2,000 requests per minute per tenant)."""
    shared_pool_requests_per_minute: int = 60
    """Requests without a ``PublisherIdentifier`` share this much smaller budget ("All requests received without this
    parameter will share the same quota")."""
    throttle_window_seconds: float = 60.0
    """The sliding window the budgets count over, on the real (monotonic) clock, not the emulator's."""
    throttle_status: int = 403
    """HTTP status of an AF429 answer: 403 (the troubleshooting article's example) or 429."""
    throttle_retry_after: int | None = None
    """``Retry-After`` sent with AF429 (None: no header, as a public client measured on the wire)."""
    start_cooldown_seconds: float = 900.0
    """Starting a content type's subscription again within this long of its last start answers AF429 (the
    reference: "a waiting period of 15 minutes is required before another request can be made"; taken per content
    type, since clients start several content types in a row)."""
    restart_conflict: bool = True
    """Starting an already enabled subscription answers 400 AF20024 (seen on the wire by a public client); False:
    200 as for a new one."""
    permission_status: int = 401
    """HTTP status of AF10001 (a token without ``ActivityFeed.Read``): 401 or 403 (undocumented)."""
    unordered_blobs: bool = True
    """Records inside a blob come in a stable shuffled order ("not guaranteed to be sequential")."""

    def __post_init__(self) -> None:
        if self.next_page_header not in NEXT_PAGE_HEADERS:
            raise ValueError(f"feed.next_page_header must be one of {sorted(NEXT_PAGE_HEADERS)}")
        if self.window_error_code not in WINDOW_ERROR_CODES:
            raise ValueError(f"feed.window_error_code must be one of {sorted(WINDOW_ERROR_CODES)}")
        if self.throttle_status not in THROTTLE_STATUSES:
            raise ValueError(f"feed.throttle_status must be one of {sorted(THROTTLE_STATUSES)}")
        if self.permission_status not in PERMISSION_STATUSES:
            raise ValueError(f"feed.permission_status must be one of {sorted(PERMISSION_STATUSES)}")
        for name in ("duplicate_rate", "extra_delay_fraction", "drop_fraction"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"feed.{name} must be in [0, 1)")
        positive = ("blob_interval_seconds", "max_list_span_seconds", "lookback_seconds", "throttle_window_seconds")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"feed.{name} must be > 0")
        for name in ("list_page_size", "duplicate_max_lag_blobs", "requests_per_minute"):
            if getattr(self, name) < 1:
                raise ValueError(f"feed.{name} must be >= 1")
        nonnegative = (
            "first_content_delay_seconds",
            "backfill_on_subscribe_seconds",
            "extra_delay_max_seconds",
            "behind_seconds",
            "content_retention_seconds",
            "shared_pool_requests_per_minute",
            "start_cooldown_seconds",
        )
        for name in nonnegative:
            if getattr(self, name) < 0:
                raise ValueError(f"feed.{name} must be >= 0")
