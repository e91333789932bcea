"""What a collection's plan commits to, said before it starts: chunks, the source's own figures, and warnings.

The source says its part (``shared.sources``: Graph, the queries the plan submits against the tenant's daily
submissions); the fields every plan has carried are there, ``None`` where they are not its source's. A range that starts
before the tenant's guaranteed retention is collected but may be partial (``shared.timeline.retention``).
"""

from __future__ import annotations

from datetime import datetime

from shared.models import Chunk, JsonDict, iso
from shared.settings import Settings
from shared.sources.registry import sections
from shared.sources.registry import source as source_named
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
    """``plan`` of the 202 answer and of the summary: chunk count, the source's figures, the interval and its
    origin."""
    own = source_named(source).plan(chunks=chunks, settings=settings, ranges=ranges, now=now)
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
