"""Audit log retention: which windows of a collection may be partial because the service may already have deleted
some of their records.

Microsoft Purview keeps audit records for a time that depends on the record and the user's licence
(learn.microsoft.com/purview/audit-log-retention-policies): Audit (Standard) keeps every record 180 days; Audit
(Premium)'s one-year default covers only Exchange, SharePoint, OneDrive and Microsoft Entra records of users with an
E5 (or equivalent) licence; anything longer needs a retention policy or the 10-year retention add-on. The collector
cannot see licences or policies, so a window older than the retention the tenant *guarantees for every record*
(``COLLECTOR_RETENTION_DAYS``, 180 by default) is collected and flagged *possibly partial*, with this reason, and never
refused: for an E5 tenant 300 days back is a legitimate request. What no tenant can hold (older than
``COLLECTOR_MAX_LOOKBACK_DAYS``, 10 years) is refused when the collection starts and not retried.

A record is deleted when it is older than the retention at the moment the query runs, so the flag is computed at the
latest moment a query of the collection may have run (the manifest: when the collection finished).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from shared.models import Chunk, JsonDict, iso

REASON = (
    "older than the {days}-day retention the tenant guarantees for every audit record (COLLECTOR_RETENTION_DAYS) when "
    "it was collected: Audit (Standard) keeps records 180 days; Audit (Premium) keeps Exchange, SharePoint, OneDrive "
    "and Entra records of E5-licensed users one year; longer only under a retention policy or the 10-year add-on. "
    "Records the service had already deleted are missing; set COLLECTOR_RETENTION_DAYS to what the tenant's policies "
    "keep for all records"
)


def cutoff(moment: datetime, days: int) -> datetime:
    """Records created before this had passed the guaranteed retention at ``moment`` (whole seconds, rounded up:
    never less flagged)."""
    edge = moment - timedelta(days=days)
    return edge if edge.microsecond == 0 else edge.replace(microsecond=0) + timedelta(seconds=1)


def possibly_partial(ranges: list[Chunk], moment: datetime, days: int) -> list[Chunk]:
    """The parts of ``ranges`` older than the guaranteed retention at ``moment`` (none when ``days`` is 0)."""
    if days <= 0:
        return []
    edge = cutoff(moment, days)
    return [Chunk(r.start, min(r.end, edge)) for r in sorted(ranges, key=lambda r: r.start) if r.start < edge]


def retention_report(ranges: list[Chunk], moment: datetime | None, days: int) -> JsonDict | None:
    """The manifest's and the summary's ``retention``: the possibly partial windows and why; None when the
    guaranteed retention is not known (a collection started before it was recorded) or the moment is unknown."""
    if days <= 0 or moment is None:
        return None
    parts = possibly_partial(ranges, moment, days)
    return {
        "guaranteedDays": days,
        "asOf": iso(moment),
        "cutoff": iso(cutoff(moment, days)),
        "possiblyPartial": [p.span_json() for p in parts],
        "reason": REASON.format(days=days) if parts else None,
    }
