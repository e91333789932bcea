"""What a collection's plan commits to, said before it starts: chunks, Graph queries, and warnings.

A Graph chunk is one audit query submitted to the tenant (a split adds two more). Microsoft documents no daily limit
for the audit query API, but community guides quote "at least 200 query submissions a day" per tenant
(``COLLECTOR_GRAPH_DAILY_QUERIES``); a plan above it is answered with a warning and the interval that fits. A range
that starts before the tenant's guaranteed retention is collected but may be partial (``shared.timeline.retention``).
"""

from __future__ import annotations

from datetime import datetime

from shared.models import Chunk, JsonDict, iso
from shared.settings import Settings
from shared.timeline.planning import smallest_interval_minutes
from shared.timeline.retention import cutoff, possibly_partial


def plan_report(
    *,
    source: str,
    chunks: int,
    settings: Settings,
    now: datetime,
    ranges: list[Chunk],
    interval_minutes: int | None = None,
    interval_defaulted: bool = False,
) -> JsonDict:
    """``plan`` of the 202 answer and of the summary: chunk count, Graph queries, the interval and its origin."""
    queries = chunks if source == "graph" else None
    warnings: list[str] = []
    if queries is not None and queries > settings.graph_daily_queries:
        hint = ""
        if len(ranges) == 1:
            fitting = smallest_interval_minutes(ranges[0].start, ranges[0].end, settings.graph_daily_queries)
            if fitting <= settings.max_interval_minutes:
                hint = f"; intervalMinutes >= {fitting} plans at most {settings.graph_daily_queries}"
        warnings.append(
            f"this plan submits {queries} Graph audit queries (more if windows split), above the "
            f"{settings.graph_daily_queries} a day a tenant is assumed to accept (COLLECTOR_GRAPH_DAILY_QUERIES; "
            f"community-quoted, not documented): expect throttling or queries refused until the next day{hint}"
        )
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
        "warnings": warnings,
    }
