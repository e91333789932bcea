"""The app's "now" at its edge: the HTTP starters' validation, the summaries' lag, the budget entity's leases.

Orchestrators never read it (they use ``context.current_utc_datetime``). In production it is the UTC wall clock. A
test that runs the app on the local host with a moved clock (``python -m durable_local serve --clock-file F``) sets
``COLLECTOR_CLOCK_FILE=F`` too, and then "now" is the wall clock plus the offset in seconds that file holds, the same
time the host's engine and the audit API emulator read, so a request validated "now" agrees with the orchestration
it starts. The file holds the offset as decimal text and is replaced whole (renamed over), never written in place.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from shared.settings import Settings


def utc_now(settings: Settings) -> datetime:
    """The UTC wall clock, moved by ``settings.clock_file``'s offset when a test set one."""
    now = datetime.now(UTC)
    if not settings.clock_file:
        return now
    try:
        text = Path(settings.clock_file).read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return now
    return now + timedelta(seconds=float(text)) if text else now
