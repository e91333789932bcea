"""The feed source (the Office 365 Management Activity API): its request rules, options, plan report, manifest fields
and lanes (``shared.sources.base.Source``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta

from shared.audit.feed_paging import LOOKBACK
from shared.audit.filter_check import FilterCheck, describe
from shared.models import Chunk, JsonDict, filters_from_json
from shared.requests.collection_spec import CollectionSpec
from shared.requests.run_options import RunOptions
from shared.requests.validation import InvalidRequest
from shared.settings import Settings
from shared.sources.base import FollowAccess, SourceDefaults, SourcePlan
from shared.sources.feed import follow
from shared.sources.feed.calls import CONTENT_TYPES, LISTING_MARGIN
from shared.sources.feed.lanes import CONTENT_TYPES_KEY, LAG_SECONDS, SECTION, FeedLanes
from shared.values import AuditFilters
from shared.window.state import Carried

DEFAULT_INTERVAL_MINUTES = 1440
"""A day per chunk: each chunk lists the publications of its day and of the lag after it, so longer chunks read fewer
blobs twice."""

PROVES = (
    "each chunk holds every record of its window that was in a blob the feed listed as published between the window's "
    "start and its publishedUntil (evidence), each record once: every blob listed was read (fetched, or from the "
    "content cache an earlier read filled), or it is named as expired and the chunk is incomplete"
)
CANNOT_PROVE = (
    "that no record of a window was published after the chunk's publishedUntil: the feed publishes records late "
    "(typically 60 to 90 minutes, most within 24 hours, after an outage 3 to 5 days or more; Microsoft commits to "
    "no delivery time), lists content only from a subscription's start, and keeps it 7 days; a later read of the "
    "window (a settle pass, a follower) or a search of it is what finds those"
)


class FeedSource(SourceDefaults):
    """A feed of content blobs, read by publication time: the last 7 days, any tenant form, every cloud, filters
    applied by the collector (there is no search)."""

    name = "feed"
    status_key = SECTION
    follower_feed = True

    def default_interval_minutes(self, settings: Settings) -> int:
        return DEFAULT_INTERVAL_MINUTES

    def check_range(self, start: datetime, now: datetime, settings: Settings) -> None:
        """The feed lists content at most 7 days back: an older window is search's to read."""
        if start < now - LOOKBACK:
            raise InvalidRequest(
                "startDate",
                "feed_lookback",
                "with source feed, startDate must be within the last 7 days: the Management Activity API lists "
                "content at most 7 days back (use source graph or exchange for older windows)",
            )

    def check_filters(self, filters: AuditFilters) -> None:
        """The feed has no search: the collector filters its records itself (``shared.audit.filter_check``), and a
        keyword is a filter it cannot judge from a record."""
        if filters.keyword:
            raise InvalidRequest(
                "filters.keyword",
                "not_feed",
                "filters.keyword is not a filter of the feed source: the Management Activity API has no search, and "
                "which fields a keyword matches is not documented (use source graph or exchange)",
            )

    def run_options(self, settings: Settings, max_concurrency: int, *, high_completeness: bool) -> RunOptions:
        options = super().run_options(settings, max_concurrency, high_completeness=high_completeness)
        lag = settings.feed_lag_hours * 3600.0
        return dataclasses.replace(options, source_options={LAG_SECONDS: lag, CONTENT_TYPES_KEY: list(CONTENT_TYPES)})

    def lanes(self, spec: CollectionSpec, state: Carried) -> FeedLanes:
        return FeedLanes(spec, state)

    def plan(
        self,
        *,
        chunks: int,
        settings: Settings,
        ranges: Sequence[Chunk],
        now: datetime,
        interval_minutes: int | None = None,
        quota: JsonDict | None = None,
        settle: bool = False,
    ) -> SourcePlan:
        """Which content types each chunk lists, and how long after its window's end it reads publications; a range
        whose late publications are not all in yet says so."""
        lag = timedelta(hours=settings.feed_lag_hours)
        warnings = []
        latest = max((c.end for c in ranges), default=now)
        if latest + lag > now - LISTING_MARGIN:
            warnings.append(
                f"the feed publishes records late: publications up to {settings.feed_lag_hours:g} hours after each "
                "window (COLLECTOR_FEED_LAG_HOURS) are read where they are in by then; the windows of the last "
                f"{settings.feed_lag_hours:g} hours may gain records a later read finds (the manifest names them)"
            )
        fields = {"feedContentTypes": list(CONTENT_TYPES), "feedLagHours": settings.feed_lag_hours}
        return SourcePlan(fields, tuple(warnings))

    def follow_reach(self) -> timedelta | None:
        return follow.REACH

    def follow_access(self, settings: Settings, tenant_id: str) -> FollowAccess:
        return follow.follow_access(settings, tenant_id)

    def manifest(self, payload: JsonDict) -> JsonDict:
        """Which filters each record was checked against (all of them: the feed applies none); what the reads did,
        and what they prove and cannot."""
        filters = filters_from_json(payload.get("filters"))
        section = payload.get(SECTION)
        feed = {**section, "proves": PROVES, "cannotProve": CANNOT_PROVE} if isinstance(section, dict) else None
        return {"filterCheck": describe(FilterCheck.of(filters), filters), SECTION: feed}
