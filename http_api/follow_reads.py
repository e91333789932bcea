"""Which source a follower reads its windows from, decided when it starts (``POST /api/follows``).

A request asks for the feed with ``feed`` (default ``COLLECTOR_FOLLOW_FEED``). The feed is read when the registry has a
source that followers read as a feed (``Source.follower_feed``: the Management Activity API), it can apply the
request's filters, and its check at this start passes (``Source.follow_access``: the subscription list, which a token
without ``ActivityFeed.Read`` is refused, and the start of a subscription not enabled). Otherwise every window is
read by the request's search source, and the follower's status says why (``reads``).

What the search source then still reads (``search_load``) is what a follower is judged on against a search source's
daily quota (Graph's submissions: ``Source.follow_refusal``, ``Source.follow_plan``): so the start decides the feed
before it decides to refuse.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from datetime import datetime, timedelta

from shared.follow.state import FeedUse
from shared.requests.validation import InvalidRequest
from shared.settings import Settings
from shared.sources.base import FollowAccess, FollowLoad
from shared.sources.registry import SOURCES, follower_feed
from shared.timeline.latency import AUDIT_LATENCY
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


DAY = timedelta(days=1)


def search_load(
    *, search: str, feed: FeedUse | None, covered_until: datetime, interval: timedelta, now: datetime
) -> FollowLoad | None:
    """What the follower's search source ``search`` reads when it reads ``feed`` (None without the feed: every window,
    twice, the source's own rule). Steady state: the reconcile's samples, one per ``reconcile_every`` (at most one per
    window), when ``search`` is the reconcile's source. Once (the backlog): each window from ``covered_until`` that
    begins before the feed reaches (now less its look-back) or before a subscription the start began, read again
    when it ends inside the late-arrival band. A feed read that comes back unproved is read by search too: that is not
    foreseeable, and not counted."""
    if feed is None:
        return None
    per_window = DAY // interval
    samples = 0
    hours = feed.reconcile_every.total_seconds() / 3600 if feed.reconcile_every else 0.0
    if feed.reconcile_every and feed.reconcile_source == search:
        samples = min(per_window, math.ceil(DAY / feed.reconcile_every))
    edge = max(now - feed.reach, feed.since or now - feed.reach)
    backlog, cursor = 0, covered_until
    while cursor < edge:
        backlog += 2 if cursor + interval > now - AUDIT_LATENCY else 1
        cursor += interval
    return FollowLoad(per_day=samples, backlog=backlog, feed=True, samples=samples, reconcile_hours=hours)
