"""A follower over a simulated week, on the local host and the emulator sharing a moved clock, as deployed: the host
runs the hosted profile (the tenant budget's key set, the budget on), so every pass takes its slots as on Azure.

The tenant's records reach the audit log late (the emulator's default ingestion delays: 60-90 minutes for most, up to
a day for a tenth), the host is killed with SIGKILL in the middle of a pass and stays down for five hours, and the
service refuses every call for an hour (the app's permission withdrawn). At the end the follower's day collections
hold exactly the emulator's ground truth for the whole week: every record once, the late ones included, no gap, every
day's manifest final, each day exactly its ground truth; and its history stayed bounded (one cycle per execution:
measured at day 1 and day 7).
"""

from __future__ import annotations

import json
import os
import signal
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import requests

from durable_local.clock import OffsetFileClock
from m365_emulator import Emulator
from shared.models import iso, parse_iso
from tests.e2e.conftest import MakeEmulator
from tests.e2e.follower import DELAY, INTERVAL, Follower, frontier
from tests.e2e.harness import TENANT, serve

HOUR = timedelta(hours=1)
JUMP = timedelta(hours=12)


def describe(emulator: Emulator, start: datetime, end: datetime, missing: set[str]) -> str:
    """Each missing record's time and ingestion delay (hours), for a failure message."""
    created = {r["id"]: r["createdDateTime"] for r in emulator.ground_truth_records(TENANT, start, end)}
    delays = emulator.ingestion_delays(TENANT, start, end)
    return ", ".join(f"{r} at {created[r]} (+{delays[r] / 3600:.1f} h)" for r in sorted(missing, key=created.get)[:20])


def test_a_follower_covers_a_week_of_late_records_through_a_kill_and_an_hour_of_refusals(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    clock = OffsetFileClock(tmp_path / "clock")
    emulator: Emulator = make_emulator(records_per_hour=40.0, clock=clock.now)
    start = clock.now().replace(hour=0, minute=0, second=0, microsecond=0)  # today, midnight: a week of whole days
    week_end = start + timedelta(days=7)
    store = str(tmp_path / "hub.sqlite")
    sizes: dict[str, tuple[int, int]] = {}
    request = {"tenantId": TENANT, "startDate": iso(start), "intervalMinutes": INTERVAL, "everyMinutes": 15}
    request["feed"] = False  # a Graph follower: the hour of refusals is Graph's (test_follow_feed.py: the feed's week)

    def advance_to_idle(follower: Follower, step: timedelta) -> dict[str, Any]:
        clock.advance(step)
        return follower.idle_at(frontier(start, clock.now()))

    with serve(emulator, tmp_path, clock_file=clock.path, store=store) as host:
        answer = requests.post(f"{host.base}/api/follows", json={**request, "maxConcurrency": 3}, timeout=30)
        assert answer.status_code == 202, answer.text
        follower = Follower(host, answer.json()["followId"])
        again = requests.post(f"{host.base}/api/follows", json={**request, "maxConcurrency": 3}, timeout=30)
        assert (again.status_code, again.json()["existing"]) == (200, True), "one follower per key"
        first = follower.idle_at(frontier(start, clock.now()))
        assert first["failureCount"] == 0, f"the first day's windows failed: {json.dumps(first['lastError'])}"
        while clock.now() < start + timedelta(days=1, hours=12):
            advance_to_idle(follower, JUMP)
        sizes["day 1"] = follower.state_size()
        while clock.now() < start + timedelta(days=3, hours=12):
            advance_to_idle(follower, JUMP)
        # kill -9 in the middle of a pass, then an outage of five hours
        clock.advance(JUMP)
        follower.wait(lambda s: s["running"] is not None, "started a pass")
        os.kill(host.pid, signal.SIGKILL)
    clock.advance(timedelta(hours=5))
    with serve(emulator, tmp_path, clock_file=clock.path, store=store) as host:
        follower = Follower(host, follower.id)
        resumed = follower.idle_at(frontier(start, clock.now()))
        assert resumed["failureCount"] == 0 and resumed["lastError"] is None, json.dumps(resumed)[:3000]
        while clock.now() < start + timedelta(days=5):
            advance_to_idle(follower, JUMP)
        # an hour in which the service refuses every call (a window closes in it): the follower pauses, then goes on
        closes = frontier(start, clock.now()) + timedelta(minutes=INTERVAL + DELAY)  # the next window is due then
        if closes - timedelta(minutes=30) <= clock.now():  # due within 30 minutes (by the time of day the test began)
            closes += timedelta(minutes=INTERVAL)  # the next one, so the refusals begin before a window closes
        advance_to_idle(follower, closes - timedelta(minutes=30) - clock.now())
        emulator.faults.deny_graph_methods = frozenset({"GET", "POST"})
        clock.advance(HOUR)
        paused = follower.wait(lambda s: s["status"] == "paused", "paused")
        assert paused["paused"]["kind"] == "permission" and paused["covered"]["end"] < iso(frontier(start, clock.now()))
        emulator.faults.deny_graph_methods = frozenset()
        advance_to_idle(follower, HOUR)
        while clock.now() < week_end + timedelta(days=1, hours=3):  # every window of the week past its band
            advance_to_idle(follower, JUMP)
        sizes["day 7"] = follower.state_size()
        final = follower.summary()
        stopped = requests.post(f"{host.base}/api/follows/{follower.id}/stop", timeout=30)
        assert stopped.status_code == 202, stopped.text
        follower.wait(lambda s: s["runtimeStatus"] == "Completed" and s["status"] == "stopped", "stopped")
        days = [f"{follower.id}-{start + timedelta(days=d):%Y%m%d}" for d in range(7)]
        manifests = [host.manifest(day) for day in days]
        per_day = {day: host.chunk_ids(day) for day in days}
        ids = [record for day in days for record in per_day[day]]

    truth = emulator.ground_truth_ids(TENANT, start, week_end)
    for number, day in enumerate(days):  # exact per day: each day collection holds that day's records, once
        day_truth = emulator.ground_truth_ids(
            TENANT, start + timedelta(days=number), start + timedelta(days=number + 1)
        )
        assert sorted(per_day[day]) == sorted(day_truth), f"{day}: {len(per_day[day])} ids, truth {len(day_truth)}"
    assert len(ids) == len(set(ids)), "no record twice"
    missing = set(truth) - set(ids)
    assert not missing, f"records not collected: {describe(emulator, start, week_end, missing)}"
    assert sorted(ids) == sorted(truth), "coverage equals the emulator's ground truth for the whole week"
    delays = emulator.ingestion_delays(TENANT, start, week_end)
    very_late = {record for record, delay in delays.items() if delay > 20 * 3600}
    assert very_late and very_late <= set(ids), "records that arrived long after their window was first read"
    for day, manifest in zip(days, manifests, strict=True):
        day_start = parse_iso(manifest["ranges"][0]["start"])
        assert manifest["ranges"] == [{"start": iso(day_start), "end": iso(day_start + timedelta(days=1))}], day
        assert manifest["gaps"] == [] and manifest["failures"] == [], day
        assert manifest["latency"]["final"] is True and manifest["totals"]["provisionalChunks"] == 0, day
    late = sum(m["totals"]["late"] for m in manifests)
    assert late >= len(very_late), "each late record counted in its day's manifest"
    assert final["failureCount"] == 0 and final["paused"] is None
    assert final["passes"] > 20 and final["cycles"] > 15
    # one cycle per execution: what a replay reads on day 7 is what it read on day 1
    (events_1, input_1), (events_7, input_7) = sizes["day 1"], sizes["day 7"]
    print(f"follower state: day 1 {events_1} history events, {input_1} input bytes; day 7 {events_7}, {input_7}")
    assert events_7 <= 2 * events_1 + 10 and input_7 <= 2 * input_1 + 2000
    assert events_7 < 100
