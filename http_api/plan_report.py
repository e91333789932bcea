"""What a collection's or a follower's plan commits to, said before it starts: chunks, the source's own figures, and
warnings.

The source says its part (``shared.sources``: Graph, the queries the plan submits against the tenant's daily
submissions, what the tenant has left now and when the plan will wait; a follower's windows it accepts); the fields
every plan has carried are there, ``None`` where they are not its source's. What is left of a daily quota is read from
the tenant budget entity's state (``tenant_quota``) for a source whose budget keeps one. A range that starts before the
tenant's guaranteed retention is collected but may be partial (``shared.timeline.retention``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from http_api.budget_slots import read_state
from orchestrators.budget_entity import entity_id
from shared.budget.quota import quota_view
from shared.models import Chunk, JsonDict, iso
from shared.settings import Settings
from shared.sources.base import FollowLoad
from shared.sources.registry import sections
from shared.sources.registry import source as source_named
from shared.timeline.retention import cutoff, possibly_partial

MINUTES_PER_DAY = 24 * 60


async def tenant_quota(client: Any, tenant: str, source: str, settings: Settings, now: datetime) -> JsonDict | None:
    """The collector's daily submissions in the tenant as its budget entity's state says them at ``now``
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
    """``plan`` of the 202 answer and of the summary: chunk count, the source's figures (``quota``: what
    ``tenant_quota`` read), the interval and its origin."""
    own = source_named(source).plan(
        chunks=chunks,
        settings=settings,
        ranges=ranges,
        now=now,
        interval_minutes=interval_minutes,
        quota=quota,
        settle=settle,
    )
    warnings = list(own.warnings)
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
        **sections("plan", source, own.fields),
        "intervalMinutes": interval_minutes,
        "intervalDefault": interval_defaulted,
        "warnings": warnings,
    }


# --- followers ---------------------------------------------------------------------------------------------------
def follow_default(settings: Settings, source: str) -> int:
    """A follower's window when its request names none: its source's (``COLLECTOR_FOLLOW_EVERY_MINUTES`` unless the
    source needs longer windows: Graph's daily submissions)."""
    return source_named(source).follow_default(settings)


def follow_refusal(
    settings: Settings, source: str, interval_minutes: int, load: FollowLoad | None = None
) -> str | None:
    """Why a follower with these windows cannot run (its source's reason: Graph's daily quota; None: it can);
    ``load``: what its search source reads when it reads the feed (``http_api.follow_reads.search_load``)."""
    return source_named(source).follow_refusal(settings, interval_minutes, load)


def follow_plan(
    *,
    source: str,
    interval_minutes: int,
    every_minutes: int,
    settings: Settings,
    quota: JsonDict | None,
    load: FollowLoad | None = None,
) -> JsonDict:
    """``plan`` of a follower's 202 answer: its windows a day, and its source's figures (Graph: the submissions its
    steady state needs a day, with the feed its one-off backlog, and what is left of the quota now)."""
    own = source_named(source).follow_plan(settings, interval_minutes, quota, load)
    return {
        "source": source,
        "intervalMinutes": interval_minutes,
        "everyMinutes": every_minutes,
        "windowsPerDay": MINUTES_PER_DAY // interval_minutes,
        **sections("follow", source, own.fields),
        "warnings": list(own.warnings),
    }
