"""Audit records arrive late: which parts of a collection may still gain records when they are collected again.

Microsoft does not commit to a delivery time for the unified audit log. Its audit search documentation said "it can
take up to 30 minutes or up to 24 hours after an event occurs for the corresponding audit log record to be returned
in the results of an audit log search" (quoted by CoreView's "Audit events: event availability timing reference",
https://coreview.freshdesk.com/en/support/solutions/articles/43000561869; Microsoft has since removed the table,
https://www.michev.info/blog/post/5749); the Office 365 Management Activity API documentation says availability is
"typically 60 to 90 minutes" for core services and that "Microsoft doesn't commit to a specific delivery time"
(https://learn.microsoft.com/office/office-365-management-api/office-365-management-activity-api-reference and its
FAQ, https://learn.microsoft.com/office/office-365-management-api/troubleshooting-the-office-365-management-activity-api).

So a window that ends less than ``AUDIT_LATENCY`` before its query ran is *provisional*: what was collected is exact
for what the service returned then, but a later collection of the same window may return more. Every query of a
collection runs after the collection started, so a window is settled when it ends at least ``AUDIT_LATENCY`` before
``startedAt`` (conservative: a chunk queried later is flagged as if it had been queried at the start).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from shared.models import Chunk, JsonDict, iso, parse_iso

AUDIT_LATENCY = timedelta(hours=24)


def started_at_of(payload: Any) -> datetime | None:
    """``startedAt`` of an orchestration input or finalize payload (every query of the collection ran later), or
    None when it is missing or unreadable."""
    started = payload.get("startedAt") if isinstance(payload, dict) else None
    try:
        return parse_iso(started) if isinstance(started, str) else None
    except ValueError:
        return None


def provisional_parts(ranges: list[Chunk], started_at: datetime) -> list[Chunk]:
    """The parts of ``ranges`` that may still gain records: everything after ``started_at - AUDIT_LATENCY``."""
    cutoff = (started_at - AUDIT_LATENCY).replace(microsecond=0)  # whole seconds, rounded down: never less flagged
    return [Chunk(max(r.start, cutoff), r.end) for r in sorted(ranges, key=lambda r: r.start) if r.end > cutoff]


def latency_report(ranges: list[Chunk], started_at: datetime | None) -> JsonDict:
    """The manifest's and the summary's ``latency``: the provisional windows, when collecting them again is final
    (``settledAfter``; None when nothing is provisional, or the start time is unknown), and whether nothing is
    provisional (``final``)."""
    if started_at is None:
        hours = AUDIT_LATENCY.total_seconds() / 3600
        return {"assumedHours": hours, "provisional": None, "settledAfter": None, "final": None}
    parts = provisional_parts(ranges, started_at)
    return {
        "assumedHours": AUDIT_LATENCY.total_seconds() / 3600,
        "provisional": [p.span_json() for p in parts],
        "settledAfter": iso(max(p.end for p in parts) + AUDIT_LATENCY) if parts else None,
        "final": not parts,
    }
