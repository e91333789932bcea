"""A feed that falls behind is not taken for proof: a feed follower whose feed stops publishing on time (the
emulator's ``feed.behind_from``/``behind_seconds``: from midday of the second day every record is published two days
late, while searches return it on time) does not close those windows as proved by the feed at their last read; they
fall to search, each day stays exact against the ground truth, and the day manifest says why.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import requests

from durable_local.clock import OffsetFileClock
from m365_emulator import Emulator
from m365_emulator.config import EmulatorConfig
from shared.models import iso, parse_iso
from tests.e2e.conftest import MakeEmulator
from tests.e2e.follower import INTERVAL, Follower, frontier
from tests.e2e.harness import TENANT, serve
from tests.e2e.test_follow_feed import DAY, LAG, assert_exact, fewer_blobs

STEP = timedelta(hours=2)


def run_until(follower: Follower, clock: OffsetFileClock, start: datetime, until: datetime) -> None:
    """Move the clock in steps, each time until the follower covers the frontier and runs no pass (a window it sends
    to search is read at its next cycle, so it may still owe one: the next step's wake reads it)."""
    while clock.now() < until:
        clock.advance(STEP)
        covered = iso(frontier(start, clock.now()))
        follower.wait(lambda s, c=covered: s["covered"]["end"] == c and s["running"] is None, f"covered {covered}")
    for _ in range(12):  # what it still owes search, read at its next cycle
        covered = iso(frontier(start, clock.now()))
        settled = follower.wait(
            lambda s, c=covered: s["covered"]["end"] == c and s["running"] is None and s["status"] != "catching up",
            f"covered {covered}",
        )
        if not settled.get("backfill"):
            break
        # A step can close a window too (the feed being behind, it owes search that one next): judge the state only
        # once the follower covers the frontier of the moment, never between a wake and its pass.
        clock.advance(timedelta(minutes=30))
    follower.idle_at(frontier(start, clock.now()))


def test_windows_the_feed_is_behind_on_fall_to_search_and_say_why(make_emulator: MakeEmulator, tmp_path: Path) -> None:
    clock = OffsetFileClock(tmp_path / "clock")
    start = clock.now().replace(hour=0, minute=0, second=0, microsecond=0)
    behind_from = start + DAY + timedelta(hours=12)

    def behind(config: EmulatorConfig) -> None:
        fewer_blobs(config)
        config.feed.behind_from = behind_from.timestamp()
        config.feed.behind_seconds = 2 * 86400.0  # later than the follower's last read (25 hours after a window)

    emulator: Emulator = make_emulator(records_per_hour=30.0, configure=behind, clock=clock.now)
    env = {"COLLECTOR_FOLLOW_RECONCILE_HOURS": "0", **LAG}
    with serve(emulator, tmp_path, clock_file=clock.path, extra_env=env) as host:
        request = {"tenantId": TENANT, "startDate": iso(start), "intervalMinutes": INTERVAL, "feed": True}
        answer = requests.post(f"{host.base}/api/follows", json=request, timeout=60)
        assert answer.status_code == 202, answer.text
        assert answer.json()["reads"]["source"] == "feed"
        follower = Follower(host, answer.json()["followId"])
        follower.idle_at(frontier(start, clock.now()))
        run_until(follower, clock, start, start + timedelta(days=3, hours=3))
        manifests = assert_exact(emulator, host, follower.id, start, 2)  # day 1: the feed falls behind at its midday
    since = parse_iso(answer.json()["reads"]["feedSince"])
    day = manifests[1]
    for chunk in day["chunks"]:
        window_end = parse_iso(chunk["chunk"]["end"])
        if window_end >= behind_from:  # the feed had published nothing after its end by the last read
            assert chunk["source"] == "graph", chunk
            assert "behind" in chunk["backfilled"]["why"], chunk["backfilled"]
        elif parse_iso(chunk["chunk"]["start"]) >= since:
            assert chunk["source"] == "feed", chunk
