"""How the tenant's ``Search-UnifiedAuditLog`` behaves since 2026: read-only probes that rely on no count it reports.

* A window for the other probes: widened from 15 minutes (x4) until one call of ``ResultSize`` 5,000 comes back with
  more than 1,000 rows yet *short* (fewer than asked: so it holds exactly that many), narrowed when the call comes back
  full. Nothing here trusts ``ResultCount``.
* ``exchange.resultcount``: on that window (``n`` records), a call asking ``SMALL`` rows (fewer than ``n``) and the
  call asking 5,000 (more than ``n``) show what ``ResultCount`` means: the window's total (``total``; the old
  service), the smaller of ``ResultSize`` and the total (``capped``), or the ``ResultSize`` asked (``size``); also
  whether ``moreRecordsAvailable`` is sent and whether ``@adminapi.warnings`` came back.
* ``exchange.sessions``: two calls of one session asking ``SMALL`` rows each: does the second continue at index
  ``SMALL + 1`` (``continue``), start over at 1 (``restart``), or return nothing (``empty``)?

Each result is ``ok`` with the finding: the collector proves windows complete by short calls whatever these say.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from shared.audit.exchange import ExchangeAuditClient, ProbeCall
from shared.audit.exchange_paging import RESULT_SIZE
from shared.audit.http import AmbiguousResponseError
from shared.audit.ports import TimeWindow
from shared.doctor.model import ProbeResult, ok

WINDOW = timedelta(minutes=15)
MUST_EXCEED = 1000
"""A window must hold more rows than one 1,000-row page for paging to show."""
WIDEN_FACTOR = 4
MAX_WIDENINGS = 6
"""15 minutes x 4^6 = 42 days at most."""
MAX_NARROWINGS = 6
SMALL = 10
"""Rows the ResultCount and session probes ask for (the window holds more than 1,000)."""
SESSION_TRIES = 4
"""Fresh sessions the session probe tries when a call's answer is lost (two calls of ten rows each: cheap)."""
MEANINGS = {
    "total": "the window's total (the service before 2026)",
    "capped": "the smaller of the ResultSize asked and the window's total",
    "size": "the ResultSize asked, whatever the window holds",
}


@dataclass
class Found:
    """A window one call proves (short, more than 1,000 rows), and that call."""

    window: TimeWindow
    call: ProbeCall


def span_text(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes < 120:
        return f"{minutes} minutes" if minutes else f"{int(delta.total_seconds())} seconds"
    hours = minutes / 60
    return f"{hours:g} hours" if hours < 48 else f"{hours / 24:.1f} days"


def find_window(
    client: ExchangeAuditClient, end: datetime, time_left: Callable[[], bool]
) -> tuple[Found | None, list[tuple[timedelta, ProbeCall]]]:
    """Widen (x4) from 15 minutes until a window's one call is short with more than 1,000 rows; narrow when full."""
    tried: list[tuple[timedelta, ProbeCall]] = []

    def call(span: timedelta) -> ProbeCall:
        seen = client.probe(TimeWindow(end - span, end), result_size=RESULT_SIZE)
        tried.append((span, seen))
        return seen

    def good(seen: ProbeCall) -> bool:
        return seen.short and seen.rows > MUST_EXCEED

    low, span = timedelta(0), WINDOW
    for _ in range(MAX_WIDENINGS + 1):
        seen = call(span)
        if good(seen):
            return Found(TimeWindow(end - span, end), seen), tried
        if not seen.short:
            break
        if not time_left():
            return None, tried
        low, span = span, span * WIDEN_FACTOR
    else:
        return None, tried
    high = span
    for _ in range(MAX_NARROWINGS):
        if not time_left():
            break
        middle = timedelta(seconds=max(1, round((low + high).total_seconds() / 2)))
        seen = call(middle)
        if good(seen):
            return Found(TimeWindow(end - middle, end), seen), tried
        low, high = (middle, high) if seen.short else (low, middle)
    return None, tried


def result_count(client: ExchangeAuditClient, found: Found) -> ProbeResult:
    """What ResultCount means on this tenant's service, from a call asking fewer rows than the window holds and one
    asking more."""
    n = found.call.rows
    few = client.probe(found.window, result_size=SMALL)
    many = found.call
    a, b = few.result_count, many.result_count
    if a is None or b is None:
        meaning, how = "absent", "the rows carry no ResultCount"
    elif a > SMALL and b >= n * 0.8:
        meaning, how = "total", f"{a:,} on a call asking {SMALL}, {b:,} on one asking {RESULT_SIZE:,}"
    elif a == SMALL and b == RESULT_SIZE:
        meaning, how = "size", f"{a} on a call asking {SMALL}, {b:,} on one asking {RESULT_SIZE:,}"
    elif a == SMALL and b <= n:
        meaning, how = "capped", f"{a} on a call asking {SMALL}, {b:,} on one asking {RESULT_SIZE:,}"
    else:
        meaning, how = "unknown", f"{a:,} on a call asking {SMALL}, {b:,} on one asking {RESULT_SIZE:,}"
    detail = f"ResultCount is {MEANINGS.get(meaning, 'of no known meaning')} ('{meaning}'): {how}, on a window "
    detail += f"holding {n:,} records (proven by that call coming back short)"
    if b is not None and b < n and meaning != "size":
        detail += f"; it announced {n - b:,} fewer than it delivered"
    detail += "; the collector relies on no count (a window is complete when a call returns fewer rows than asked)"
    more = [c for c in (few, many) if c.more_present]
    detail += (
        f"; moreRecordsAvailable is sent ({', '.join(str(c.more).lower() for c in more)})"
        if more
        else "; moreRecordsAvailable is not sent"
    )
    warnings = client.warnings_seen
    detail += (
        f"; @adminapi.warnings came back {len(warnings)} time(s), e.g. {warnings[-1][:80]!r} (retried when they say "
        "the task was cancelled)"
        if warnings
        else "; no @adminapi.warnings came back"
    )
    return ok("exchange.resultcount", detail)


def sessions(client: ExchangeAuditClient, found: Found) -> ProbeResult:
    """Whether a ReturnLargeSet session's second call continues, starts over or comes back empty."""
    for attempt in range(SESSION_TRIES):
        session = str(uuid.uuid4())
        try:
            first = client.probe(found.window, result_size=SMALL, session_id=session)
            second = client.probe(found.window, result_size=SMALL, session_id=session)
        except AmbiguousResponseError:  # a call's answer was lost: the session's position is unknown, try anew
            if attempt == SESSION_TRIES - 1:
                raise
            continue
        break
    indexes = sorted(second.indexes)
    if not second.rows:
        mode, shown = "empty", "returned nothing"
    elif indexes and indexes[0] == 1:
        mode, shown = "restart", f"started over at index 1 (indexes {indexes[0]}..{indexes[-1]})"
    elif indexes and indexes[0] == first.rows + 1:
        mode, shown = "continue", f"continued at index {indexes[0]} (indexes {indexes[0]}..{indexes[-1]})"
    else:
        mode, shown = "other", f"returned indexes {indexes[:3]}..."
    consequence = (
        "windows over one call are read call after call in one session"
        if mode == "continue"
        else "windows over one call's 5,000 rows are split until a call proves each (the collector learns it and "
        "sizes its windows to match)"
    )
    return ok(
        "exchange.sessions",
        f"sessions '{mode}': the second call of a session asking {SMALL} rows {shown}; {consequence}",
    )
