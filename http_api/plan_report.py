"""What a collection's or a follower's plan commits to, said before it starts: chunks, Graph query submissions
against the tenant's daily quota, and warnings.

A Graph chunk is one audit query submitted to the tenant (a split adds two more, a settle pass one per window it reads
again). Microsoft Graph documents a per-tenant baseline of at least 200 query submissions per rolling 24 hours,
shared with every other tool (``COLLECTOR_GRAPH_DAILY_QUERIES``); the collector keeps to it less a reserve for those
tools (``COLLECTOR_GRAPH_DAILY_RESERVE``) through the tenant budget, so a plan needing more than is left waits for the
quota instead of failing. The report says how many submissions the plan needs, how many the tenant has left now (the
budget entity's state), and when it will wait. A follower submits one query per window and one more when it reads the
window again after its late-arrival band: one whose steady state alone needs more than the collector's share is
refused (``follow_fits``). A range that starts before the tenant's guaranteed retention is collected but may be
partial (``shared.timeline.retention``).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from http_api.budget_slots import read_state
from orchestrators.budget_entity import entity_id
from shared.budget.quota import quota_view
from shared.models import Chunk, JsonDict, iso
from shared.settings import Settings
from shared.timeline.latency import provisional_parts
from shared.timeline.planning import smallest_interval_minutes
from shared.timeline.retention import cutoff, possibly_partial

MINUTES_PER_DAY = 24 * 60
FOLLOW_DEFAULT_SHARE = 3
"""A Graph follower's default windows use at most a third of the collector's daily submissions (``follow_default``)."""


async def tenant_quota(client: Any, tenant: str, source: str, settings: Settings, now: datetime) -> JsonDict | None:
    """The collector's daily Graph submissions in the tenant as its budget entity's state says them at ``now``
    (``allowed``, ``used``, ``left``, ``until``), or None when the budget keeps no quota for ``source``. A state that
    cannot be read gives ``left`` None."""
    options = settings.budget(source)
    if not options.keeps_quota:
        return None
    try:
        state = await read_state(client, entity_id(tenant, source))
    except Exception:  # the plan is advice: a store that does not answer leaves "left" unknown, the start goes on
        return {"allowed": options.quota, "used": None, "left": None, "until": None}
    return quota_view(state, now, options.quota)


def plan_report(
    *,
    source: str,
    chunks: int,
    settings: Settings,
    now: datetime,
    ranges: list[Chunk],
    interval_minutes: int | None = None,
    interval_defaulted: bool = False,
    quota: JsonDict | None = None,
    settle: bool = False,
) -> JsonDict:
    """``plan`` of the 202 answer and of the summary: chunk count, Graph submissions against the daily quota
    (``quota``: what ``tenant_quota`` read), the interval and its origin."""
    queries = chunks if source == "graph" else None
    warnings: list[str] = []
    submissions: JsonDict | None = None
    if queries is not None:
        rereads = _rereads(ranges, interval_minutes, now) if settle else 0
        submissions = _submissions(queries + rereads, rereads, settings, quota)
        if submissions["waits"]:
            warnings.append(_quota_warning(submissions, ranges, settings))
    old = possibly_partial(ranges, now, settings.retention_days)
    if old:
        edge = iso(cutoff(now, settings.retention_days))
        warnings.append(
            f"the range before {edge} is older than the {settings.retention_days}-day retention the tenant guarantees "
            "(COLLECTOR_RETENTION_DAYS): it is collected, and flagged possibly partial in the manifest (only some "
            "records of some licences are kept longer)"
        )
    return {
        "source": source,
        "chunks": chunks,
        "graphQueries": queries,
        "intervalMinutes": interval_minutes,
        "intervalDefault": interval_defaulted,
        "dailyQueryQuota": settings.graph_daily_queries if source == "graph" else None,
        "submissions": submissions,
        "warnings": warnings,
    }


def _rereads(ranges: list[Chunk], interval_minutes: int | None, now: datetime) -> int:
    """Chunks a settle pass reads again: those ending within the late-arrival band before ``now``."""
    if not interval_minutes:
        return 0
    step = interval_minutes * 60
    return sum(math.ceil((part.end - part.start).total_seconds() / step) for part in provisional_parts(ranges, now))


def _submissions(needed: int, rereads: int, settings: Settings, quota: JsonDict | None) -> JsonDict:
    allowed = settings.graph_quota
    left = quota.get("left") if quota else None
    return {
        "needed": needed,
        "rereads": rereads,
        "allowedPerDay": allowed,
        "reserve": settings.graph_daily_reserve,
        "leftNow": left,
        "nextFreeAt": quota.get("until") if quota else None,
        "kept": quota is not None,
        "waits": needed > (left if isinstance(left, int) else allowed),
    }


def _quota_warning(submissions: JsonDict, ranges: list[Chunk], settings: Settings) -> str:
    needed, allowed, left = submissions["needed"], submissions["allowedPerDay"], submissions["leftNow"]
    now_left = f"{left} of them are left now" if isinstance(left, int) else "how many are left now is unknown"
    days = math.ceil((needed - (left if isinstance(left, int) else allowed)) / allowed)
    waits = (
        f"the collection waits for the quota when it needs more (at least {days} more day{'s' if days > 1 else ''})"
        if submissions["kept"]
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


def follow_default(settings: Settings, source: str) -> int:
    """A follower's window when its request names none: ``COLLECTOR_FOLLOW_EVERY_MINUTES``, or for Graph at least the
    smallest window whose steady state uses at most a third of the collector's daily submissions (60 minutes, 48
    queries a day, with the defaults), leaving the rest to collections."""
    wanted = settings.follow_every_minutes
    if source != "graph":
        return wanted
    fitting = follow_fitting_interval(settings, FOLLOW_DEFAULT_SHARE) or follow_fitting_interval(settings)
    return wanted if fitting is None else max(wanted, fitting)


def follow_refusal(settings: Settings, source: str, interval_minutes: int) -> str | None:
    """Why a follower with these windows cannot run within the tenant's daily Graph quota (None: it fits)."""
    if source != "graph":
        return None
    per_day = follow_per_day(interval_minutes)
    if per_day <= settings.graph_quota:
        return None
    fitting = follow_fitting_interval(settings)
    hint = f"intervalMinutes >= {fitting} fits" if fitting else "no window fits: raise COLLECTOR_GRAPH_DAILY_QUERIES"
    return (
        f"a Graph follower with {interval_minutes}-minute windows submits {per_day} audit queries a day "
        f"({MINUTES_PER_DAY // interval_minutes} windows, each read again once its 24-hour late-arrival band has "
        f"passed), more than the {settings.graph_quota} per rolling 24 hours the collector may submit in a tenant "
        f"(COLLECTOR_GRAPH_DAILY_QUERIES {settings.graph_daily_queries} less COLLECTOR_GRAPH_DAILY_RESERVE "
        f"{settings.graph_daily_reserve} left to its other tools): {hint}; everyMinutes does not change it (each "
        "window is one query however often the follower wakes)"
    )


def follow_plan(
    *, source: str, interval_minutes: int, every_minutes: int, settings: Settings, quota: JsonDict | None
) -> JsonDict:
    """``plan`` of a follower's 202 answer: its windows a day, the Graph submissions its steady state needs a day,
    and what is left of the quota now (a catch-up after an outage needs more, and waits for the quota)."""
    windows = MINUTES_PER_DAY // interval_minutes
    plan: JsonDict = {
        "source": source,
        "intervalMinutes": interval_minutes,
        "everyMinutes": every_minutes,
        "windowsPerDay": windows,
        "graphQueriesPerDay": follow_per_day(interval_minutes) if source == "graph" else None,
        "dailyQueryQuota": settings.graph_daily_queries if source == "graph" else None,
        "submissions": None,
        "warnings": [],
    }
    if source == "graph":
        per_day = follow_per_day(interval_minutes)
        submissions = _submissions(per_day, windows, settings, quota)
        plan["submissions"] = submissions
        if submissions["waits"]:
            plan["warnings"].append(
                f"its first day needs {per_day} Graph submissions and the tenant has {submissions['leftNow']} of the "
                f"collector's {submissions['allowedPerDay']} left now: its passes wait for the quota until earlier "
                f"submissions leave the rolling 24 hours (from {submissions['nextFreeAt']})"
            )
    return plan
