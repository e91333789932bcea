"""Purging followers' finished passes once their day is final (the timer ``follow_passes_purge`` in
``http_api.follows``).

Each pass is a collect orchestration instance (``<followId>-<yyyymmdd>-p<n>``) whose status and history stay in the
task hub's store after it ended: a follower at 15-minute windows added about 1.5 MB a simulated day, forever. What
proves a day's coverage is its output (chunk objects, summaries, ``manifest.json``), not those instances, and once
the day is final (the follower publishes ``finalBefore``: every day before it is covered to its end, with no window
provisional or failed) no pass reads that day again. So a finished pass of a final day is purged through the Durable
client (``purge_instance_history``), after ``COLLECTOR_FOLLOW_PURGE_AFTER_HOURS``. A pass whose follower is gone
(purged by hand) or published no ``finalBefore`` (older code) is kept: nothing says its day is final.

A pass is also kept until the timers it left behind have fired (``LEFT_TIMERS``, whatever the setting): each episode of
a pass that added a task created a nudge timer, cancelled before it is reported, whose ``TimerFired`` message DTFx
still queues ``NUDGE_HORIZON`` ahead (``orchestrators.collect``; a feed pass over six windows left 98 to 234 of them).
Such a message that finds its completed instance is discarded at its first dequeue; one that finds the instance
purged is for a nonexistent instance, which DTFx gives the benefit of the doubt for five dequeues
(``OrchestrationSession.IsOutOfOrderMessage``): abandoned with back-off five times before it is discarded.
Measured on the month test with feed followers (one-day steps of a moved clock, purge at 0 hours): these zombies
piled up to about 540-670 messages in the control queues over 6-8 simulated days (about 300 KB of the store),
then were dequeued in one burst that held up the follower's cycle (a 36 s step instead of 4 s) and left that
day's passes unpurged a day longer: the 8-day sawtooth ``docs/follow.md`` declared open.

An orchestrator cannot purge (it may do no I/O) and the Durable client binding is offered to HTTP and timer functions
on the local host, so a timer does it, listing the ``follow-`` instances a page at a time (``http_api.instance_pages``).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, Protocol

from http_api.common import json_field, runtime_status
from http_api.instance_pages import PAGE_SIZE, InstancePages
from orchestrators.collect import NUDGE_HORIZON
from shared import names
from shared.follow.state import DAY, FOLLOW_PREFIX, day_start
from shared.models import parse_iso

logger = logging.getLogger(__name__)

_PASS = re.compile(r"(follow-[a-z]+-[0-9a-f]{12})-(\d{4})(\d{2})(\d{2})-p\d+")
_ENDED = frozenset({"Completed", "Failed", "Terminated"})
LEFT_TIMERS = NUDGE_HORIZON + timedelta(minutes=5)
"""A finished pass is kept at least this long after it ended: its left-behind nudge timers (due ``NUDGE_HORIZON`` after
they were created, each before the pass ended) have fired against the completed instance and been discarded."""


class PurgeClient(Protocol):
    async def purge_instance_history(self, instance_id: str) -> Any: ...


@dataclass
class PurgeReport:
    purged: list[str] = field(default_factory=list)
    kept: int = 0
    """Finished passes kept: their day is not final yet, they ended too recently, or their follower is unknown."""
    failed: list[str] = field(default_factory=list)
    """Passes whose purge call failed (tried again at the next run)."""


@dataclass(frozen=True, slots=True)
class _Pass:
    instance_id: str
    follow: str
    day: date
    ended: datetime | None


def final_before(status: Any) -> datetime | None:
    """A follower's ``finalBefore`` from its output (stopped) or its custom status, None if it published none."""
    for value in (getattr(status, "output", None), getattr(status, "custom_status", None)):
        view = json_field(value)
        if isinstance(view, dict) and isinstance(view.get("finalBefore"), str):
            try:
                return parse_iso(view["finalBefore"])
            except ValueError:
                return None
    return None


def finished_pass(status: Any) -> _Pass | None:
    """A follower's pass that has ended, or None."""
    found = _PASS.fullmatch(str(getattr(status, "instance_id", "")))
    if found is None or getattr(status, "name", None) != names.ORCHESTRATOR_COLLECT:
        return None
    if runtime_status(status) not in _ENDED:
        return None
    ended = getattr(status, "last_updated_time", None)
    if isinstance(ended, datetime) and ended.tzinfo is None:
        ended = ended.replace(tzinfo=UTC)  # the management API's times are UTC
    day = date(int(found.group(2)), int(found.group(3)), int(found.group(4)))
    return _Pass(str(status.instance_id), found.group(1), day, ended if isinstance(ended, datetime) else None)


async def purge_passes(client: PurgeClient, pages: InstancePages, now: datetime, *, keep: timedelta) -> PurgeReport:
    """Purge every finished pass whose day its follower says is final and that ended at least ``keep`` ago (and at
    least ``LEFT_TIMERS`` ago)."""
    keep = max(keep, LEFT_TIMERS)
    final: dict[str, datetime] = {}
    passes: list[_Pass] = []
    token: str | None = None
    while True:
        statuses, token = await pages.page(prefix=FOLLOW_PREFIX, top=PAGE_SIZE, token=token)
        for status in statuses:
            if getattr(status, "name", None) == names.ORCHESTRATOR_FOLLOW:
                found = final_before(status)
                if found is not None:
                    final[str(status.instance_id)] = found
            elif (done := finished_pass(status)) is not None:
                passes.append(done)
        if token is None:
            break
    report = PurgeReport()
    for done in passes:
        before = final.get(done.follow)
        recent = done.ended is None or done.ended + keep > now
        if before is None or day_start(done.day) + DAY > before or recent:
            report.kept += 1
            continue
        try:
            await client.purge_instance_history(done.instance_id)
        except Exception as exc:  # one pass failing (purged meanwhile, a storage error) leaves the others to purge
            logger.warning("could not purge follower pass %s: %s", done.instance_id, type(exc).__name__)
            report.failed.append(done.instance_id)
        else:
            report.purged.append(done.instance_id)
    return report
