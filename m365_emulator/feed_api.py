"""The Office 365 Management Activity API (``/manage/api/v1.0/{tenant GUID}/activity/feed/...``).

Subscriptions per content type (start, stop, list), content listed by when it was published (``startTime`` /
``endTime`` on ``contentCreated``, paged with a ``NextPageUri`` header) and content blobs fetched by their
``contentUri``. The blobs are cut from the same synthetic tenant as Graph and Exchange (``feed_content``); the
behaviours and their evidence are in the README ("The Management Activity API"). Errors are the documented
``{"error": {"code": "AF…", "message": …}}`` bodies.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from m365_emulator.config import FEED_PERMISSION, TenantSpec, is_guid
from m365_emulator.feed_content import BlobIndex, BlobModel, content_id, content_type_of, parse_content_id
from m365_emulator.feed_settings import CONTENT_TYPES, DAY_SECONDS, FeedSettings
from m365_emulator.ingestion import IngestionSettings
from m365_emulator.stream import RecordFilter, epoch, iter_matching
from m365_emulator.wire import Reply, Request, parse_time

_VERSIONS = ("v1.0", "v1")  # the reference's NextPageUri example says /api/v1/


def feed_error(status: int, code: str, message: str, *, retry_after: int | None = None) -> Reply:
    headers: tuple[tuple[str, str], ...] = (("Retry-After", str(retry_after)),) if retry_after is not None else ()
    return Reply(status, {"error": {"code": code, "message": message}}, headers)


def _iso_ms(moment_ms: int) -> str:
    return datetime.fromtimestamp(moment_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass
class Subscription:
    content_type: str
    status: str  # "enabled" | "disabled"
    started: datetime
    disabled_by: str = ""


@dataclass
class FeedStats:
    """What the feed saw, keyed by tenant id (``emu.feed.stats``)."""

    requests: Counter[str] = field(default_factory=Counter)
    without_publisher: Counter[str] = field(default_factory=Counter)
    """Requests that carried no ``PublisherIdentifier`` (they share the small pool)."""
    throttled: Counter[str] = field(default_factory=Counter)
    list_pages: Counter[str] = field(default_factory=Counter)
    blobs_fetched: Counter[str] = field(default_factory=Counter)
    fetches_by_blob: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Answered fetches per (tenant id, contentId): how often each blob was downloaded."""
    subscriptions_started: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    """AF codes answered (all tenants)."""


class FeedApi:
    def __init__(
        self,
        tenants: Mapping[str, TenantSpec],
        settings: FeedSettings,
        ingestion: Callable[[], IngestionSettings],
        now: Callable[[], datetime],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tenants = tenants
        self.settings = settings
        self._ingestion = ingestion
        self._now = now
        self.monotonic = monotonic
        """The real clock the per-minute budgets count on (a test may replace it)."""
        self.stats = FeedStats()
        self.index = BlobIndex()
        self._lock = threading.Lock()
        self._subscriptions: dict[tuple[str, str], Subscription] = {}
        self._calls: dict[tuple[str, str], deque[float]] = {}

    # -- test hooks ---------------------------------------------------------------------------------------------

    def model(self) -> BlobModel:
        return BlobModel.of(self.settings, self._ingestion())

    def disable_subscription(self, tenant_id: str, content_type: str, by: str = "a service admin") -> None:
        """An admin disabled the subscription: listing and fetching answer AF20023 until it is started again."""
        with self._lock:
            found = self._subscriptions.get((tenant_id, content_type))
            if found is None:
                raise ValueError(f"no subscription to {content_type} in {tenant_id}")
            found.status, found.disabled_by = "disabled", by

    def subscription(self, tenant_id: str, content_type: str) -> Subscription | None:
        with self._lock:
            return self._subscriptions.get((tenant_id, content_type))

    def ground_truth_ids(
        self,
        tenant_id: str,
        start: datetime,
        end: datetime,
        *,
        content_types: Iterable[str] | None = None,
        published_before: datetime | None = None,
    ) -> list[str]:
        """Ids of the records created in ``[start, end)`` (time order) of these content types (None: all), whose
        first blob was created before ``published_before`` (None: every record the feed publishes, now or later; a
        record it dropped, ``drop_fraction``, never)."""
        kinds = frozenset(content_types) if content_types is not None else frozenset(CONTENT_TYPES)
        spec, model = self.tenants[tenant_id], self.model()
        limit_ms = round(epoch(published_before) * 1000) if published_before is not None else None
        ids = []
        for record, _ in iter_matching(spec, epoch(start), epoch(end), RecordFilter()):
            if content_type_of(record) not in kinds:
                continue
            published = self.index.first_published_ms(spec, model, record)
            if published is not None and (limit_ms is None or published < limit_ms):
                ids.append(record.id)
        return ids

    def publication_times(self, tenant_id: str, start: datetime, end: datetime) -> dict[str, datetime]:
        """Record id -> ``contentCreated`` of the first blob holding it, for the records created in [start, end) the
        feed publishes."""
        spec, model = self.tenants[tenant_id], self.model()
        found: dict[str, datetime] = {}
        for record, _ in iter_matching(spec, epoch(start), epoch(end), RecordFilter()):
            published = self.index.first_published_ms(spec, model, record)
            if published is not None:
                found[record.id] = datetime.fromtimestamp(published / 1000, UTC)
        return found

    # -- requests -----------------------------------------------------------------------------------------------

    def authorize(self, request: Request, tenant_id: str, roles: tuple[str, ...], parts: list[str]) -> Reply | None:
        """The path's tenant and the token's permission, checked before anything else."""
        if len(parts) < 5 or parts[0] != "api" or parts[1] not in _VERSIONS or parts[3:5] != ["activity", "feed"]:
            return self._error(404, "AF20050", f"The specified content ({request.path}) does not exist.")
        if not is_guid(parts[2]):
            return self._error(400, "AF20013", f"The tenant ID passed in the URL ({parts[2]}) is not a valid GUID.")
        if parts[2].casefold() != tenant_id.casefold():
            text = f"The tenant ID passed in the URL ({parts[2]}) does not match the tenant ID passed in the access token ({tenant_id})."  # noqa: E501
            return self._error(401, "AF20010", text)
        if FEED_PERMISSION not in roles:
            text = (
                f"The permission set ({' '.join(roles)}) sent in the request did not include the expected permission "
                f"{FEED_PERMISSION}."
            )
            return self._error(self.settings.permission_status, "AF10001", text)
        return None

    def handle(self, request: Request, tenant_id: str, parts: list[str]) -> Reply:
        with self._lock:
            self.stats.requests[tenant_id] += 1
        publisher = request.query.get("PublisherIdentifier", "")
        if publisher and not is_guid(publisher):
            return self._error(400, "AF20002", "Invalid parameter type: PublisherIdentifier. Expected type: guid")
        throttled = self._throttle(tenant_id, publisher, request.method)
        if throttled is not None:
            return throttled
        operation, method = parts[5:], request.method
        if operation == ["subscriptions", "start"] and method == "POST":
            return self._start(tenant_id, request.query.get("contentType", ""))
        if operation == ["subscriptions", "stop"] and method == "POST":
            return self._stop(tenant_id, request.query.get("contentType", ""))
        if operation == ["subscriptions", "list"] and method == "GET":
            return self._list_subscriptions(tenant_id)
        if operation == ["subscriptions", "content"] and method == "GET":
            return self._list_content(request, tenant_id, parts)
        if len(operation) == 2 and operation[0] == "audit" and method == "GET":
            return self._fetch(tenant_id, operation[1])
        return self._error(404, "AF20050", f"The specified content ({request.path}) does not exist.")

    def _error(self, status: int, code: str, message: str, *, retry_after: int | None = None) -> Reply:
        with self._lock:
            self.stats.errors[code] += 1
        return feed_error(status, code, message, retry_after=retry_after)

    def _throttle(self, tenant_id: str, publisher: str, method: str) -> Reply | None:
        settings = self.settings
        key, budget = (tenant_id, "publisher"), settings.requests_per_minute
        if not publisher:
            key, budget = ("*", "shared"), settings.shared_pool_requests_per_minute
        moment = self.monotonic()
        with self._lock:
            if not publisher:
                self.stats.without_publisher[tenant_id] += 1
            calls = self._calls.setdefault(key, deque())
            while calls and calls[0] <= moment - settings.throttle_window_seconds:
                calls.popleft()
            if len(calls) < budget:
                calls.append(moment)  # refused requests are not counted: a client waiting out its minute gets in
                return None
            self.stats.throttled[tenant_id] += 1
        name = "GetBlob" if method == "GET" else method
        text = f"Too many requests. Method={name}, PublisherId={publisher or '00000000-0000-0000-0000-000000000000'}"
        return self._error(settings.throttle_status, "AF429", text, retry_after=settings.throttle_retry_after)

    # -- subscriptions ------------------------------------------------------------------------------------------

    def _start(self, tenant_id: str, content_type: str) -> Reply:
        if content_type not in CONTENT_TYPES:
            return self._error(400, "AF20020", "The specified content type is not valid.")
        now = self._now()
        cooldown = timedelta(seconds=self.settings.start_cooldown_seconds)
        with self._lock:
            found = self._subscriptions.get((tenant_id, content_type))
            enabled = found is not None and found.status == "enabled"
            conflict = enabled and self.settings.restart_conflict
            too_soon = not conflict and found is not None and now < found.started + cooldown
            if not (enabled or too_soon):  # a new subscription, or a disabled one started again: content from now on
                self._subscriptions[(tenant_id, content_type)] = Subscription(content_type, "enabled", now)
                self.stats.subscriptions_started[tenant_id] += 1
        if conflict:
            return self._error(400, "AF20024", "The subscription is already enabled. No property change.")
        if too_soon:
            text = f"Too many requests. Method=StartSubscription, PublisherId={tenant_id}"
            return self._error(
                self.settings.throttle_status, "AF429", text, retry_after=self.settings.throttle_retry_after
            )
        return Reply(200, {"contentType": content_type, "status": "enabled", "webhook": None})

    def _stop(self, tenant_id: str, content_type: str) -> Reply:
        if content_type not in CONTENT_TYPES:
            return self._error(400, "AF20020", "The specified content type is not valid.")
        with self._lock:
            found = self._subscriptions.get((tenant_id, content_type))
            if found is not None:
                found.status, found.disabled_by = "disabled", "a tenant admin"
        if found is None:
            return self._error(400, "AF20022", "No subscription found for the specified content type.")
        return Reply(200, None)

    def _list_subscriptions(self, tenant_id: str) -> Reply:
        with self._lock:
            found = [s for (tenant, _), s in self._subscriptions.items() if tenant == tenant_id]
        body = [{"contentType": s.content_type, "status": s.status, "webhook": None} for s in found]
        return Reply(200, body)

    def _usable(self, tenant_id: str, content_type: str) -> Subscription | Reply:
        """The enabled subscription content is listed and fetched under, or the error that says why not."""
        found = self.subscription(tenant_id, content_type)
        if found is None:
            return self._error(400, "AF20022", "No subscription found for the specified content type.")
        if found.status != "enabled":
            return self._error(400, "AF20023", f"The subscription was disabled by {found.disabled_by}.")
        return found

    def _visible_from_ms(self, subscription: Subscription, now: datetime) -> int | None:
        """Content created from this moment on is listed; None while the first content is not available yet."""
        settings = self.settings
        if now < subscription.started + timedelta(seconds=settings.first_content_delay_seconds):
            return None
        return round((epoch(subscription.started) - settings.backfill_on_subscribe_seconds) * 1000)

    # -- content ------------------------------------------------------------------------------------------------

    def _window(self, request: Request, now: datetime) -> tuple[datetime, datetime] | Reply:
        settings = self.settings
        raw_start, raw_end = request.query.get("startTime"), request.query.get("endTime")
        rule = (
            "Start time and end time must both be specified (or both omitted) and must be less than or equal to 24 "
            "hours apart, with the start time no more than 7 days in the past."
        )
        if raw_start is None and raw_end is None:
            return now - timedelta(days=1), now
        if raw_start is None or raw_end is None:
            return self._error(400, settings.window_error_code, rule)
        try:
            start, end = parse_time(raw_start), parse_time(raw_end)
        except ValueError:
            name = "startTime" if not _parses(raw_start) else "endTime"
            return self._error(400, "AF20002", f"Invalid parameter type: {name}. Expected type: datetime")
        span = (end - start).total_seconds()
        too_long = span > settings.max_list_span_seconds or (
            span == settings.max_list_span_seconds and not settings.list_span_inclusive
        )
        too_old = start < now - timedelta(seconds=settings.lookback_seconds)
        if span <= 0 or too_long or too_old:
            return self._error(400, settings.window_error_code, rule)
        return start, end

    def _list_content(self, request: Request, tenant_id: str, parts: list[str]) -> Reply:
        content_type = request.query.get("contentType", "")
        if content_type not in CONTENT_TYPES:
            return self._error(400, "AF20020", "The specified content type is not valid.")
        subscription = self._usable(tenant_id, content_type)
        if isinstance(subscription, Reply):
            return subscription
        now = self._now()
        window = self._window(request, now)
        if isinstance(window, Reply):
            return window
        try:
            after = _parse_page(request.query.get("nextPage"))
        except ValueError:
            return self._error(400, "AF20031", f"Invalid nextPage Input: {request.query.get('nextPage')}.")
        start_ms, end_ms = round(epoch(window[0]) * 1000), round(epoch(window[1]) * 1000)
        visible_from = self._visible_from_ms(subscription, now)
        blobs = []
        if visible_from is not None:
            now_ms = round(epoch(now) * 1000)
            spec, model = self.tenants[tenant_id], self.model()
            for blob in self.index.created_between(spec, model, content_type, max(start_ms, visible_from), end_ms):
                if blob.created_ms <= now_ms and (after is None or (blob.created_ms, blob.bucket) > after):
                    blobs.append(blob)
        page, rest = blobs[: self.settings.list_page_size], blobs[self.settings.list_page_size :]
        root = f"{request.base_url}/manage/{'/'.join(parts[:5])}"
        body = [self._descriptor(root, b) for b in page]
        headers: tuple[tuple[str, str], ...] = ()
        if rest:
            query = {
                "contentType": content_type,
                "startTime": request.query.get("startTime") or _iso_ms(start_ms),
                "endTime": request.query.get("endTime") or _iso_ms(end_ms),
                "nextPage": f"{page[-1].created_ms}R{page[-1].bucket}",
            }  # no PublisherIdentifier: the reference's example shows none, so the client must add it again
            headers = ((self.settings.next_page_header, f"{root}/subscriptions/content?{urlencode(query)}"),)
        with self._lock:
            self.stats.list_pages[tenant_id] += 1
        return Reply(200, body, headers)

    def _descriptor(self, root: str, blob: Any) -> dict[str, str]:
        identifier = content_id(blob)
        expiration = blob.created_ms + round(self.settings.content_retention_seconds * 1000)
        return {
            "contentType": blob.content_type,
            "contentId": identifier,
            "contentUri": f"{root}/audit/{identifier}",
            "contentCreated": _iso_ms(blob.created_ms),
            "contentExpiration": _iso_ms(expiration),
        }

    def _fetch(self, tenant_id: str, identifier: str) -> Reply:
        parsed = parse_content_id(identifier)
        if parsed is None:
            return self._error(400, "AF20052", f"Content ID {identifier} in the URL is invalid.")
        content_type, bucket = parsed
        subscription = self._usable(tenant_id, content_type)
        if isinstance(subscription, Reply):
            return subscription
        now = self._now()
        spec = self.tenants[tenant_id]
        blob = self.index.blob(spec, self.model(), content_type, bucket)
        now_ms = round(epoch(now) * 1000)
        visible_from = self._visible_from_ms(subscription, now)
        if (
            blob is None
            or content_id(blob) != identifier
            or blob.created_ms > now_ms
            or visible_from is None
            or blob.created_ms < visible_from
        ):
            return self._error(400, "AF20050", f"The specified content ({identifier}) does not exist.")
        if now_ms >= blob.created_ms + self.settings.content_retention_seconds * 1000:
            text = f"Content requested with the key {identifier} has already expired. Content older than 7 days cannot be retrieved."  # noqa: E501
            return self._error(400, "AF20051", text)
        records = [r.audit_data for r in blob.records]
        if self.settings.unordered_blobs:
            random.Random(f"{tenant_id}:{identifier}").shuffle(records)
        with self._lock:
            self.stats.blobs_fetched[tenant_id] += 1
            self.stats.fetches_by_blob[(tenant_id, identifier)] += 1
        return Reply(200, records)


def _parses(text: str) -> bool:
    try:
        parse_time(text)
    except ValueError:
        return False
    return True


def _parse_page(token: str | None) -> tuple[int, int] | None:
    """The (created ms, interval) a ``nextPage`` token resumes after; None without one.

    Raises:
        ValueError: the token is not one this server wrote.
    """
    if token is None:
        return None
    created, separator, bucket = token.partition("R")
    if not separator:
        raise ValueError(token)
    return int(created), int(bucket)


__all__ = ["DAY_SECONDS", "FeedApi", "FeedStats", "Subscription", "feed_error"]
