"""A follower over a simulated month leaves the task hub's store flat: its finished passes are purged once their day
is final (``COLLECTOR_FOLLOW_PURGE_PASSES``, the timer ``follow_passes_purge``) and the timers they left behind have
fired. It reads the feed, the default (a search follower's store is flat too: it has fewer passes a day).

The local host runs on a SQLite store and a moved clock (a day a step); the purge timer runs every second of
real time. Before, every pass stayed in the store with its whole history (about 1.5 MB a simulated day at 15-minute
windows); here the instances and the store's used bytes at the end of the month are what they were after its first
week, and the follower's day collections are all final.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import requests

from durable_local.clock import OffsetFileClock
from m365_emulator.config import EmulatorConfig
from shared.models import iso
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import TENANT, Host, serve

DELAY = timedelta(minutes=90)
INTERVAL = timedelta(minutes=240)
DAYS = 30
PURGE_EVERY_SECOND = {"COLLECTOR_FOLLOW_PURGE_SCHEDULE": "* * * * * *"}


def real_time_budget(config: EmulatorConfig) -> None:
    """The feed's 2,000 requests a minute count real time while this clock moves a day in about 4 seconds: a feed
    follower's ~250 requests a simulated day crossed 2,000 within a real minute every eighth day, and that day's
    reads waited out AF429 for up to a minute (the 8-day sawtooth once declared open in docs/follow.md). Scaled as
    the week test scales it (tests/e2e/test_follow_feed.py)."""
    config.feed.requests_per_minute = 20_000


def frontier(start: datetime, now: datetime) -> datetime:
    return start + INTERVAL * ((now - DELAY - start) // INTERVAL)


def used_bytes(store: Path) -> int:
    """Bytes of the SQLite store's pages in use (deleted rows' pages go to its free list and are reused)."""
    db = sqlite3.connect(store, timeout=30)
    try:
        pages, free, size = (
            db.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "freelist_count", "page_size")
        )
    finally:
        db.close()
    return int((pages - free) * size)


def wait(check: Callable[[], Any], what: str, host: Host, limit: float = 90.0) -> Any:
    deadline = time.monotonic() + limit
    found = None
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"never {what}: {json.dumps(found)[:1500]}\n{host.log_tail()}")


def test_a_simulated_month_leaves_the_store_flat(make_emulator: MakeEmulator, tmp_path: Path) -> None:
    clock = OffsetFileClock(tmp_path / "clock")
    emulator = make_emulator(records_per_hour=4.0, configure=real_time_budget, clock=clock.now)
    start = clock.now().replace(hour=0, minute=0, second=0, microsecond=0)
    store = tmp_path / "hub.sqlite"
    sizes: dict[int, tuple[int, int]] = {}
    with serve(emulator, tmp_path, PURGE_EVERY_SECOND, clock_file=clock.path, store=str(store)) as host:
        body = {"tenantId": TENANT, "startDate": iso(start), "intervalMinutes": 240, "everyMinutes": 60}
        answer = requests.post(f"{host.base}/api/follows", json=body, timeout=30)
        assert answer.status_code == 202, answer.text
        follow = answer.json()["followId"]

        def summary() -> dict[str, Any]:
            return requests.get(f"{host.base}/api/follows/{follow}", timeout=30).json()  # type: ignore[no-any-return]

        def passes() -> list[str]:
            return [i["instanceId"] for i in host.instances() if i["instanceId"].startswith(f"{follow}-")]

        def purgeable(final: str, seen: frozenset[str]) -> list[str]:
            """Passes listed at an earlier step (so ended a simulated day ago) whose day is now final."""
            return [p for p in passes() if p in seen and p.rsplit("-", 2)[1] < final]

        seen: frozenset[str] = frozenset()
        for day in range(1, DAYS + 1):
            clock.advance(timedelta(days=1))
            edge = iso(frontier(start, clock.now()))
            wait(lambda e=edge: (s := summary())["covered"]["end"] == e and s["running"] is None and s, "idle", host)
            # the passes of the days that are final are purged by the next runs of the timer once the timers they left
            # behind have fired (an hour after they ended, http_api.follow_purge.LEFT_TIMERS): a pass that ended at an
            # earlier step, of a day now final, is purged at this one
            final = summary()["finalBefore"][:10].replace("-", "")
            wait(lambda f=final, s=seen: not purgeable(f, s), "purged", host)
            seen = frozenset(passes())
            sizes[day] = (len(host.instances()), used_bytes(store))
        last = summary()

    print("day: instances, store bytes in use:", {day: sizes[day] for day in (1, 7, 14, 21, DAYS)})
    assert last["failureCount"] == 0 and last["status"] == "following"
    assert last["finalBefore"] >= iso(start + timedelta(days=DAYS - 2)), "the month's days turned final"
    week = max(sizes[day][0] for day in range(5, 8))
    assert all(sizes[day][0] <= week for day in range(8, DAYS + 1)), f"instances grew: {sizes}"
    week_bytes = max(sizes[day][1] for day in range(5, 8))
    assert sizes[DAYS][1] <= week_bytes * 1.1, (
        f"the store grew: {sizes[7][1]} bytes on day 7, {sizes[DAYS][1]} on {DAYS}"
    )
