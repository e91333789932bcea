"""Which source a follower reads its windows from, decided when it starts (``POST /api/follows``).

A request asks for the feed with ``feed`` (default ``COLLECTOR_FOLLOW_FEED``). The feed is read when the registry has a
source that followers read as a feed (``Source.follower_feed``: the Management Activity API), it can apply the
request's filters, and its check at this start passes (``Source.follow_access``: the subscription list, which a token
without ``ActivityFeed.Read`` is refused, and the start of a subscription not enabled). Otherwise every window is
read by the request's search source, and the follower's status says why (``reads``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from shared.follow.state import FeedUse
from shared.requests.validation import InvalidRequest
from shared.settings import Settings
from shared.sources.base import FollowAccess
from shared.sources.registry import SOURCES, follower_feed
from shared.values import AuditFilters

NOT_ASKED = "the feed was not asked (request field feed, default COLLECTOR_FOLLOW_FEED)"

AccessCheck = Callable[[Settings, str], FollowAccess]


async def feed_use(
    *,
    asked: bool,
    search: str,
    filters: AuditFilters,
    max_concurrency: int,
    high_completeness: bool,
    settings: Settings,
    tenant: str,
    check: AccessCheck | None = None,
) -> tuple[FeedUse | None, str]:
    """The feed a follower of ``search`` reads where it can, or None and why it reads by search only."""
    if not asked:
        return None, NOT_ASKED
    feed = follower_feed()
    if feed is None:
        return None, "no source of this app reads a feed"
    if feed.name == search:
        return None, f"the follower's own source is the {feed.name}"
    try:
        feed.check_filters(filters)
        feed.check_cloud(settings)
    except InvalidRequest as exc:
        return None, f"the {feed.name} cannot read this follower: {exc.message}"
    access = await asyncio.to_thread(check or feed.follow_access, settings, tenant)
    if not access.usable:
        return None, access.why
    reconcile = settings.follow_reconcile_source or search
    if reconcile not in SOURCES or SOURCES[reconcile].follower_feed:
        reconcile = search  # a name no search source has: the follower's own
    reach = feed.follow_reach() or timedelta(days=settings.retention_days)
    every = timedelta(hours=settings.follow_reconcile_hours) if settings.follow_reconcile_hours > 0 else None
    return FeedUse(
        source=feed.name,
        options=feed.run_options(settings, max_concurrency, high_completeness=False),
        reach=reach,
        since=access.since,
        why=access.why,
        reconcile_every=every,
        reconcile_source=reconcile,
        reconcile_options=SOURCES[reconcile].run_options(
            settings, max_concurrency, high_completeness=high_completeness and SOURCES[reconcile].high_completeness
        ),
    ), ""
