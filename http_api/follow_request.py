"""Validation of ``POST /api/follows`` bodies: one follower per (tenant, source, filters).

The same rules as a collection request wherever a field is the same (tenant, source, filters, K, characters,
``highCompleteness``: ``shared.requests.validation``), plus the follower's own: ``startDate`` (optional: by default
coverage starts at the newest window that has closed the usual delay ago), ``intervalMinutes`` (the window size; it must
divide a day, so no window crosses midnight and each day's windows form one collection; a Graph follower's windows
must fit the tenant's daily Graph quota: ``http_api.plan_report.follow_refusal``; a follower asking for the feed is
judged on what search still reads once its start checked the feed, ``http_api.follow_service``) and ``everyMinutes``
(how often it wakes). Every rejection is an ``InvalidRequest`` naming the field and the rule; nothing is started
before this passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from http_api.plan_report import follow_default, follow_refusal
from shared.audit.ports import AuditFilters
from shared.follow.state import FollowSpec, follow_id
from shared.models import JsonDict, filters_from_json, filters_to_json, iso, parse_iso
from shared.requests.validation import (
    InvalidRequest,
    _date,
    _tenant,
    _whole_number,
    checked_body,
    high_completeness_of,
    source_filters,
    source_of,
)
from shared.settings import Settings
from shared.sources.registry import SOURCES
from shared.sources.registry import source as source_named

MINUTES_PER_DAY = 24 * 60
_ALLOWED = frozenset(
    {
        "tenantId",
        "source",
        "filters",
        "startDate",
        "intervalMinutes",
        "everyMinutes",
        "maxConcurrency",
        "highCompleteness",
        "feed",
    }
)


@dataclass(frozen=True, slots=True)
class FollowRequest:
    """A validated follow request."""

    tenant_id: str
    source: str
    filters: AuditFilters
    start: datetime | None
    """As asked (None: from the newest closed window); the follower aligns it to its window grid."""
    interval_minutes: int
    every_minutes: int
    max_concurrency: int
    high_completeness: bool = False
    tenant_guid: str | None = None
    """The tenant's GUID, resolved by the follows API before anything starts (``http_api.tenants``)."""
    feed: bool = False
    """Read the windows from the feed where the app may and the feed covers them (``http_api.follow_reads``)."""

    @property
    def follow_id(self) -> str:
        """One follower per tenant (by its GUID once resolved: every spelling of one tenant names one follower),
        source and filters."""
        return follow_id(self.tenant_guid or self.tenant_id, self.source, filters_to_json(self.filters))

    @property
    def spelled_follow_id(self) -> str:
        """The id a follower of this request had before followers were keyed by the tenant's GUID."""
        return follow_id(self.tenant_id, self.source, filters_to_json(self.filters))

    def to_json(self) -> JsonDict:
        return {
            "tenantId": self.tenant_id,
            "source": self.source,
            "filters": filters_to_json(self.filters),
            "startDate": iso(self.start) if self.start else None,
            "intervalMinutes": self.interval_minutes,
            "everyMinutes": self.every_minutes,
            "maxConcurrency": self.max_concurrency,
            "highCompleteness": self.high_completeness,
            "feed": self.feed,
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> FollowRequest:
        start = data.get("startDate")
        return cls(
            tenant_id=str(data["tenantId"]),
            source=str(data["source"]),
            filters=filters_from_json(data.get("filters")),
            start=parse_iso(start) if isinstance(start, str) else None,
            interval_minutes=int(data["intervalMinutes"]),
            every_minutes=int(data["everyMinutes"]),
            max_concurrency=int(data["maxConcurrency"]),
            high_completeness=bool(data.get("highCompleteness", False)),
            feed=bool(data.get("feed", False)),
        )

    def spec(self, settings: Settings, now: datetime, start: datetime | None = None) -> FollowSpec:
        """The follower this request starts at ``now`` (``start``: where a resumed follower's coverage begins)."""
        interval = timedelta(minutes=self.interval_minutes)
        delay = timedelta(minutes=settings.follow_delay_minutes)
        begin = start or self.start or (now - delay)
        midnight = begin.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        aligned = midnight + interval * ((begin - midnight) // interval)  # on the day's grid of windows
        return FollowSpec(
            follow_id=self.follow_id,
            tenant_id=self.tenant_id,
            source=self.source,
            filters=filters_to_json(self.filters),
            options=source_named(self.source).run_options(
                settings, self.max_concurrency, high_completeness=self.high_completeness
            ),
            start=start or aligned,
            interval=interval,
            every=timedelta(minutes=self.every_minutes),
            delay=delay,
            tenant_guid=self.tenant_guid,
        )


def validate_follow_request(body: Any, settings: Settings, now: datetime) -> FollowRequest:
    """Validate a parsed JSON body; raises ``InvalidRequest`` on the first broken rule."""
    body = checked_body(body, _ALLOWED)
    tenant_id = _tenant(body.get("tenantId"))
    rules = source_of(body.get("source", settings.default_source), SOURCES)
    source = rules.name
    rules.check_tenant(tenant_id)
    start = _date(body, "startDate") if body.get("startDate") is not None else None
    if start is not None and start > now:
        raise InvalidRequest("startDate", "future", "startDate must not be in the future")
    if start is not None and start < now - timedelta(days=settings.retention_days):
        raise InvalidRequest(
            "startDate", "retention", f"startDate is older than the {settings.retention_days}-day retention"
        )
    interval = _whole_number(body, "intervalMinutes", follow_default(settings, source))
    if not settings.min_interval_minutes <= interval <= MINUTES_PER_DAY or MINUTES_PER_DAY % interval:
        raise InvalidRequest(
            "intervalMinutes",
            "divides_day",
            f"intervalMinutes must divide a day (1440 minutes) and be at least {settings.min_interval_minutes}, "
            "e.g. 15, 30, 60 or 240: each day's windows make one collection",
        )
    every = _whole_number(body, "everyMinutes", settings.follow_every_minutes)
    if not 1 <= every <= MINUTES_PER_DAY:
        raise InvalidRequest("everyMinutes", "range", "everyMinutes must be between 1 and 1440")
    concurrency = _whole_number(body, "maxConcurrency", settings.default_concurrency)
    if not 1 <= concurrency <= settings.max_concurrency:
        raise InvalidRequest(
            "maxConcurrency", "range", f"maxConcurrency must be between 1 and {settings.max_concurrency}"
        )
    high_completeness = high_completeness_of(body.get("highCompleteness", False), rules, SOURCES)
    filters = source_filters(body.get("filters"), rules, settings)
    feed = body.get("feed", settings.follow_feed)
    if not isinstance(feed, bool):
        raise InvalidRequest("feed", "boolean", "feed must be true or false")
    if not feed:  # it reads every window by search; one that asks for the feed is judged once the start checked it
        refused = follow_refusal(settings, source, interval)
        if refused is not None:
            raise InvalidRequest("intervalMinutes", "daily_quota", refused)
    return FollowRequest(tenant_id, source, filters, start, interval, every, concurrency, high_completeness, feed=feed)
