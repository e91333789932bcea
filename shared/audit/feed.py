"""The Office 365 Management Activity API as an :class:`ActivityFeedApi`: subscriptions, content listings and blobs.

``{feed_base_url}/api/v1.0/{tenant GUID}/activity/feed/...`` with an app-only token for the Office 365 Management
APIs (``ActivityFeed.Read``; the audience follows the configured cloud, ``shared.audit.feed_cloud``). Every call
carries the ``PublisherIdentifier`` (the publisher's tenant GUID, by default the collected tenant's): calls without
it share one quota with every other caller. Calls go through ``shared.audit.http`` (retries on 429/5xx, AF429 and
the feed's internal errors, ``Retry-After``, the budget slot's deadline); the feed's ``AF…`` codes become typed
errors (``shared.audit.feed_errors``); listings follow their next-page header on the configured host only
(``shared.audit.feed_paging``); blobs are normalised like every source's records (``shared.audit.feed_records``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from shared.audit.auth import TokenProvider, token_provider_for
from shared.audit.config import AuditApiConfig
from shared.audit.feed_cloud import feed_scope
from shared.audit.feed_errors import (
    SUBSCRIPTION_ENABLED,
    FeedContentExpiredError,
    FeedSubscriptionError,
    FeedWindowError,
    read_feed_error,
)
from shared.audit.feed_paging import (
    LOOKBACK,
    PUBLISHER_PARAMETER,
    bound,
    listing_pieces,
    next_page_link,
    parse_descriptor,
    pinned,
    publisher_params,
)
from shared.audit.feed_records import feed_item
from shared.audit.http import ApiIdentity, JsonAnswer, http_client_for
from shared.audit.normalise import page_of
from shared.audit.ports import FEED_CONTENT_TYPES, FeedContent, FeedSubscription, RecordPage, TimeWindow
from shared.audit.tenant_lookup import directory_for
from shared.errors import PermanentApiError, RequestValidationError
from shared.values import is_tenant_guid

logger = logging.getLogger(__name__)

FEED_PERMISSION = "ActivityFeed.Read (Office 365 Management APIs, application permission)"
API_NAME = "Office 365 Management Activity API"
MAX_PAGES = 10_000
"""Listing pages one window piece may take (a service handing out the same page forever is an error, not a loop)."""


def feed_identity(config: AuditApiConfig) -> ApiIdentity:
    return ApiIdentity(name=API_NAME, scope=feed_scope(config.feed_base_url), permission=FEED_PERMISSION)


def check_content_type(content_type: str) -> str:
    if content_type not in FEED_CONTENT_TYPES:
        raise RequestValidationError("contentTypes", f"{content_type!r} is not one of {', '.join(FEED_CONTENT_TYPES)}")
    return content_type


class ActivityFeedClient:
    """:class:`ActivityFeedApi` of one tenant over HTTPS. One ``requests.Session`` per instance.

    Args:
        config: the tenant and the app's settings (``feed_base_url``, ``feed_publisher_id``).
        tokens: bearer-token source (msal, shared per app, by default).
        sleep, clock, retry_wait_scale: as :func:`shared.audit.http.http_client_for`; ``clock`` is also the "now"
            the 7-day look-back is checked against.
    """

    def __init__(
        self,
        config: AuditApiConfig,
        *,
        tokens: TokenProvider | None = None,
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], datetime] | None = None,
        retry_wait_scale: float = 1.0,
    ) -> None:
        self._config = config
        self._clock = clock or (lambda: datetime.now(UTC))
        self._http = http_client_for(
            config,
            tokens or token_provider_for(config),
            feed_identity(config),
            sleep=sleep,
            clock=clock,
            retry_wait_scale=retry_wait_scale,
        )
        self._tenant_guid: str | None = None

    def close(self) -> None:
        self._http.close()

    @property
    def tenant_guid(self) -> str:
        """The tenant's GUID (the feed's URLs take nothing else), looked up once when the tenant is named by a
        domain."""
        if self._tenant_guid is None:
            tenant = self._config.tenant_id.strip()
            if is_tenant_guid(tenant):
                self._tenant_guid = tenant.lower()
            else:
                self._tenant_guid = directory_for(self._config.authority_host, self._config.ca_bundle).guid(tenant)
        return self._tenant_guid

    @property
    def publisher(self) -> str:
        return self._config.feed_publisher_id or self.tenant_guid

    @property
    def _root(self) -> str:
        return f"{self._config.feed_root}/api/v1.0/{quote(self.tenant_guid, safe='')}/activity/feed"

    def _call(self, method: str, url: str, params: dict[str, str] | None) -> JsonAnswer:
        return self._http.request_value(method, url, params=params, read_error=read_feed_error)

    def _operation(self, method: str, operation: str, **params: str) -> JsonAnswer:
        query = {**params, PUBLISHER_PARAMETER: self.publisher}
        return self._call(method, f"{self._root}/{operation}", query)

    # -- subscriptions ------------------------------------------------------------------------------------------

    def list_subscriptions(self) -> list[FeedSubscription]:
        body = self._operation("GET", "subscriptions/list").body
        if not isinstance(body, list):
            raise PermanentApiError(f"{API_NAME} listed subscriptions that are not a JSON array")
        found = []
        for item in body:
            if isinstance(item, dict) and isinstance(item.get("contentType"), str):
                found.append(FeedSubscription(item["contentType"], str(item.get("status") or "")))
        return found

    def ensure_subscriptions(self, content_types: Sequence[str]) -> list[FeedSubscription]:
        wanted = [check_content_type(c) for c in dict.fromkeys(content_types)]
        current = {s.content_type: s for s in self.list_subscriptions()}
        result = []
        for content_type in wanted:
            found = current.get(content_type)
            if found is None or not found.enabled:
                found = self._start(content_type)
            result.append(found)
        return result

    def _start(self, content_type: str) -> FeedSubscription:
        try:
            body = self._operation("POST", "subscriptions/start", contentType=content_type).body
        except FeedSubscriptionError as exc:
            if exc.code != SUBSCRIPTION_ENABLED:  # "already enabled" (a race, or a lost answer sent again): done
                raise
            return FeedSubscription(content_type, "enabled")
        status = body.get("status") if isinstance(body, dict) else None
        subscription = FeedSubscription(content_type, status if isinstance(status, str) and status else "enabled")
        if not subscription.enabled:
            raise FeedSubscriptionError(
                f"{API_NAME} started the {content_type} subscription as {subscription.status!r}", status=200
            )
        logger.info("started the %s subscription of tenant %s", content_type, self.tenant_guid)
        return subscription

    # -- content ------------------------------------------------------------------------------------------------

    def list_content(self, content_type: str, published: TimeWindow) -> Iterator[FeedContent]:
        check_content_type(content_type)
        oldest = self._clock() - LOOKBACK
        if published.start < oldest:
            raise FeedWindowError(
                f"{API_NAME} lists content at most 7 days back; {published.start.isoformat()} is before "
                f"{oldest.isoformat()}"
            )
        seen: set[str] = set()
        for piece in listing_pieces(published):
            for item in self._listing(content_type, piece):
                content = parse_descriptor(item, content_type)
                if content.content_id not in seen:  # a blob is listed once, whatever the pages repeat
                    seen.add(content.content_id)
                    yield content

    def _listing(self, content_type: str, piece: TimeWindow) -> Iterator[Any]:
        url = f"{self._root}/subscriptions/content"
        params: dict[str, str] | None = {
            "contentType": content_type,
            "startTime": bound(piece.start),
            "endTime": bound(piece.end),
            PUBLISHER_PARAMETER: self.publisher,
        }
        followed: set[str] = set()
        for _ in range(MAX_PAGES):
            answer = self._call("GET", url, params)
            if not isinstance(answer.body, list):
                raise PermanentApiError(f"{API_NAME} listed content that is not a JSON array")
            yield from answer.body
            link = next_page_link(answer.headers)
            if link is None:
                return
            if link in followed:
                raise PermanentApiError(f"{API_NAME} named the same next page twice")
            followed.add(link)
            url = pinned(link, self._config.feed_base_url, "next page")
            params = publisher_params(url, self.publisher)
        raise PermanentApiError(f"{API_NAME} listing of {content_type} took more than {MAX_PAGES} pages")

    def fetch(self, content: FeedContent) -> RecordPage:
        url = pinned(content.content_uri, self._config.feed_base_url, "contentUri")
        try:
            body = self._call("GET", url, publisher_params(url, self.publisher)).body
        except FeedContentExpiredError as exc:
            raise FeedContentExpiredError(
                f"{exc} (content {content.content_id}, created {content.created.isoformat()}, expiring "
                f"{content.expiration.isoformat()})",
                content_id=content.content_id,
                status=exc.status,
            ) from None
        if not isinstance(body, list):
            raise PermanentApiError(f"{API_NAME} content {content.content_id} is not a JSON array")
        page = page_of(body, feed_item)
        if page.malformed:
            logger.warning("content %s: %d malformed record(s) quarantined", content.content_id, len(page.malformed))
        return page
