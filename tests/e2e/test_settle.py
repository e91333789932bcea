"""A collection asked to settle, on the local host and the emulator sharing a moved clock: started over "the last
day" (records still arriving, as on a real tenant), it writes a provisional manifest, says "settling until <time>",
and once the clock passes that time it reads the provisional windows again by itself and turns final, every late
record collected once and counted."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest

from durable_local.clock import OffsetFileClock
from m365_emulator import Emulator
from shared.models import iso
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import TENANT, Host, body, serve


def wait_for(host: Host, collection_id: str, predicate: str, limit: float = 120.0) -> dict:  # type: ignore[type-arg]
    deadline = time.monotonic() + limit
    summary: dict = {}  # type: ignore[type-arg]
    while time.monotonic() < deadline:
        summary = host.summary(collection_id)
        if predicate == "settling" and summary.get("settling"):
            return summary
        if predicate == "ended" and summary.get("runtimeStatus") in ("Completed", "Failed", "Terminated"):
            return summary
        time.sleep(0.2)
    raise AssertionError(f"{collection_id} never reached {predicate}: {summary}\n{host.log_tail()}")


@pytest.mark.parametrize("source", ["graph", "exchange"])
def test_a_settle_collection_over_the_last_day_turns_final_by_itself(
    make_emulator: MakeEmulator, tmp_path: Path, source: str
) -> None:
    clock = OffsetFileClock(tmp_path / "clock")
    emulator: Emulator = make_emulator(records_per_hour=60.0, clock=clock.now)
    now = clock.now().replace(minute=0, second=0, microsecond=0)
    start, end = now - timedelta(days=1), now
    with serve(emulator, tmp_path, clock_file=clock.path) as host:
        request = body(end, start=start, interval=240, k=3, collectionId="settle-day", settle=True, source=source)
        response = host.post(request)
        assert response.status_code == 202, response.text
        settling = wait_for(host, "settle-day", "settling")
        assert settling["runtimeStatus"] == "Running"
        assert settling["settling"] == {
            "until": iso(end + timedelta(days=1)),
            "windows": 6,
        }
        first = host.manifest("settle-day")
        assert first["latency"]["final"] is False and first["totals"]["provisionalChunks"] == 6
        ingested = set(emulator.ground_truth_ids(TENANT, start, end, visible_at=clock.now()))
        everything = emulator.ground_truth_ids(TENANT, start, end)
        assert first["totals"]["records"] <= len(ingested) < len(everything), "records are still on their way"

        clock.advance(timedelta(days=1, minutes=1))  # the band has passed: the collection wakes up by itself
        final = wait_for(host, "settle-day", "ended")
        assert final["status"] == "Completed", final
        manifest = host.manifest("settle-day")
        ids = host.chunk_ids("settle-day")
    assert sorted(ids) == sorted(everything), "every record once, the late ones included"
    assert manifest["latency"]["final"] is True and manifest["totals"]["provisionalChunks"] == 0
    assert manifest["totals"]["records"] == len(everything) == final["records"]
    late = manifest["totals"]["late"]
    assert late == len(everything) - first["totals"]["records"] > 0
    assert sum(chunk["late"] for chunk in manifest["chunks"]) == late
    assert manifest["ranges"] == first["ranges"] and manifest["gaps"] == []
    assert final["settled"]["late"] == late and final["settled"]["windows"] == 6
