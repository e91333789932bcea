"""The Graph source's plans against the tenant's daily query submissions: what a collection or a follower needs, what
is left now, when it will wait, and which follower windows fit.

A Graph chunk is one audit query submitted to the tenant (a split adds two more, a settle pass one per window it reads
again). Microsoft Graph documents a per-tenant baseline of at least 200 query submissions per rolling 24 hours,
shared with every other tool (``COLLECTOR_GRAPH_DAILY_QUERIES``); the collector keeps to it less a reserve for those
tools (``COLLECTOR_GRAPH_DAILY_RESERVE``) through the tenant budget, so a plan needing more than is left waits for the
quota instead of failing. The report says how many submissions the plan needs, how many the tenant has left now (the
budget entity's state, ``quota``), and when it will wait. A follower submits one query per window and one more when
it reads the window again after its late-arrival band: one whose steady state alone needs more than the collector's
share is refused (``follow_refusal``). A follower that reads the feed submits only what search still reads
(``shared.sources.base.FollowLoad``): the reconcile's samples a day, and once the windows the feed cannot cover.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from shared.models import Chunk, JsonDict
from shared.settings import Settings
from shared.sources.base import FollowLoad
from shared.timeline.latency import provisional_parts
from shared.timeline.planning import smallest_interval_minutes

MINUTES_PER_DAY = 24 * 60
FOLLOW_DEFAULT_SHARE = 3
"""A Graph follower's default windows use at most a third of the collector's daily submissions (``follow_default``)."""


def rereads(ranges: Sequence[Chunk], interval_minutes: int | None, now: datetime) -> int:
    """Chunks a settle pass reads again: those ending within the late-arrival band before ``now``."""
    if not interval_minutes:
        return 0
    step = interval_minutes * 60
    return sum(
        math.ceil((part.end - part.start).total_seconds() / step) for part in provisional_parts(list(ranges), now)
    )


def submissions(needed: int, reread: int, settings: Settings, quota: JsonDict | None) -> JsonDict:
    """The plan's ``submissions``: needed, of them read again, the collector's allowance and reserve, what is left now
    and when the next is free (``quota``: the budget entity's view, None when the budget keeps none), and whether the
    plan will wait for the quota."""
    allowed = settings.graph_quota
    left = quota.get("left") if quota else None
    return {
        "needed": needed,
        "rereads": reread,
        "allowedPerDay": allowed,
        "reserve": settings.graph_daily_reserve,
        "leftNow": left,
        "nextFreeAt": quota.get("until") if quota else None,
        "kept": quota is not None,
        "waits": needed > (left if isinstance(left, int) else allowed),
    }


def quota_warning(planned: JsonDict, ranges: Sequence[Chunk], settings: Settings) -> str:
    needed, allowed, left = planned["needed"], planned["allowedPerDay"], planned["leftNow"]
    now_left = f"{left} of them are left now" if isinstance(left, int) else "how many are left now is unknown"
    days = math.ceil((needed - (left if isinstance(left, int) else allowed)) / allowed)
    waits = (
        f"the collection waits for the quota when it needs more (at least {days} more day{'s' if days > 1 else ''})"
        if planned["kept"]
        else "the tenant budget is off (COLLECTOR_BUDGET_GRAPH=0), so nothing keeps to it: expect queries refused"
    )
    hint = ""
    if len(ranges) == 1:
        fitting = smallest_interval_minutes(
            ranges[0].start, ranges[0].end, max(1, left if isinstance(left, int) else allowed)
        )
        if fitting <= settings.max_interval_minutes:
            hint = f"; intervalMinutes >= {fitting} plans what is left"
    return (
        f"this plan submits {needed} Graph audit queries (more if windows split), above what the tenant's daily quota "
        f"leaves the collector: {allowed} per rolling 24 hours (COLLECTOR_GRAPH_DAILY_QUERIES "
        f"{settings.graph_daily_queries} less COLLECTOR_GRAPH_DAILY_RESERVE {settings.graph_daily_reserve} for the "
        f"tenant's other tools), {now_left}: {waits}{hint}"
    )


# --- followers ---------------------------------------------------------------------------------------------------
def follow_per_day(interval_minutes: int) -> int:
    """Graph queries a follower submits per day once caught up: one per window, one more per window read again."""
    return 2 * (MINUTES_PER_DAY // interval_minutes)


def follow_fitting_interval(settings: Settings, share: int = 1) -> int | None:
    """The smallest window dividing the day (at least ``COLLECTOR_MIN_INTERVAL_MINUTES``) whose steady state uses at
    most ``1/share`` of the collector's daily Graph submissions; None when even a day-long window does not fit."""
    for minutes in range(settings.min_interval_minutes, MINUTES_PER_DAY + 1):
        if MINUTES_PER_DAY % minutes == 0 and follow_per_day(minutes) * share <= settings.graph_quota:
            return minutes
    return None


def follow_default(settings: Settings) -> int:
    """A Graph follower's window when its request names none: at least the smallest window whose steady state uses at
    most a third of the collector's daily submissions (60 minutes, 48 queries a day, with the defaults), leaving the
    rest to collections, and at least ``COLLECTOR_FOLLOW_EVERY_MINUTES``."""
    wanted = settings.follow_every_minutes
    fitting = follow_fitting_interval(settings, FOLLOW_DEFAULT_SHARE) or follow_fitting_interval(settings)
    return wanted if fitting is None else max(wanted, fitting)


def follow_load(interval_minutes: int, load: FollowLoad | None) -> FollowLoad:
    """What the follower submits: ``load`` when it reads a feed, else every window twice (``follow_per_day``)."""
    return load if load is not None else FollowLoad(per_day=follow_per_day(interval_minutes))


def follow_refusal(settings: Settings, interval_minutes: int, load: FollowLoad | None = None) -> str | None:
    """Why a Graph follower with these windows cannot run within the tenant's daily quota (None: it fits). Its steady
    state is judged: with the feed (``load``), the reconcile's samples a day; without, every window read twice. A
    backlog is one-off: its passes wait for the quota (``follow_plan`` warns), it is not refused."""
    load = follow_load(interval_minutes, load)
    if load.per_day <= settings.graph_quota:
        return None
    share = (
        f"{settings.graph_quota} per rolling 24 hours the collector may submit in a tenant "
        f"(COLLECTOR_GRAPH_DAILY_QUERIES {settings.graph_daily_queries} less COLLECTOR_GRAPH_DAILY_RESERVE "
        f"{settings.graph_daily_reserve} left to its other tools)"
    )
    if load.feed:
        return (
            f"a Graph follower reading the feed with {interval_minutes}-minute windows submits {load.per_day} audit "
            f"queries a day (the reconcile's sample every {load.reconcile_hours:g} hours, "
            f"COLLECTOR_FOLLOW_RECONCILE_HOURS), more than the {share}: raise COLLECTOR_FOLLOW_RECONCILE_HOURS or set "
            "COLLECTOR_FOLLOW_RECONCILE_SOURCE=exchange"
        )
    fitting = follow_fitting_interval(settings)
    hint = f"intervalMinutes >= {fitting} fits" if fitting else "no window fits: raise COLLECTOR_GRAPH_DAILY_QUERIES"
    return (
        f"a Graph follower with {interval_minutes}-minute windows submits {load.per_day} audit queries a day "
        f"({MINUTES_PER_DAY // interval_minutes} windows, each read again once its 24-hour late-arrival band has "
        f"passed), more than the {share}: {hint}; everyMinutes does not change it (each "
        "window is one query however often the follower wakes)"
    )


def follow_plan(
    settings: Settings, interval_minutes: int, quota: JsonDict | None, load: FollowLoad | None = None
) -> tuple[JsonDict, list[str]]:
    """A Graph follower's plan fields (its queries a day, the daily quota, its submissions) and warnings: its steady
    state's submissions a day (``perDay``: with the feed the reconcile's samples, else every window twice) plus, once,
    its backlog (``backlog``: with the feed the windows it cannot cover), against what is left of the quota now (a
    catch-up after an outage needs more, and waits for the quota)."""
    load = follow_load(interval_minutes, load)
    rereads = load.samples if load.feed else MINUTES_PER_DAY // interval_minutes
    planned = {
        **submissions(load.per_day + load.backlog, rereads, settings, quota),
        "perDay": load.per_day,
        "backlog": load.backlog,
        "feed": load.feed,
    }
    warnings = []
    if planned["waits"]:
        backlog = f" ({load.backlog} of them once, the windows the feed cannot cover)" if load.backlog else ""
        warnings.append(
            f"its first day needs {planned['needed']} Graph submissions{backlog} and the tenant has "
            f"{planned['leftNow']} of the collector's {planned['allowedPerDay']} left now: its passes wait for the "
            f"quota until earlier submissions leave the rolling 24 hours (from {planned['nextFreeAt']})"
        )
    fields = {
        "graphQueriesPerDay": load.per_day,
        "dailyQueryQuota": settings.graph_daily_queries,
        "submissions": planned,
    }
    return fields, warnings
