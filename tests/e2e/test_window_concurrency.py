"""Issue 6, item 2: under SHIM mode the sliding window keeps exactly K chunks in flight, seen at the emulator.

"In flight" is what the server sees. Graph: queries running at the service. Exchange: InvokeCommand calls being
answered (a chunk's calls follow one another in its lane).
The emulator holds every item until the test lets one go (``tests.support.held_work``): after each release the window
must bring the number in flight back to K while chunks are left to start, before anything else may finish. That is a
sequence of events, so a loaded machine makes the test slower, never wrong; the time-weighted share of K kept busy on a
free-running emulator is a benchmark's figure (``bench/window_busy.py``), not asserted here.
Exchange is the source where a window that lets the extension's shim block on a WhenAny of long activities collapses
towards one chunk in flight (it wakes only when its oldest call ends; calls are released in a seeded order, not oldest
first); Graph lanes take short steps, so both are tested.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from m365_emulator import EmulatorConfig
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import START, TENANT, body, serve
from tests.support.held_work import HeldWork


def _latencies(config: EmulatorConfig) -> None:
    # Graph: each query completes 1..9 s (of the held clock) after its creation, a stable draw per window, so held
    # queries finish in an order of their own, not the order they were created in.
    config.graph.completion_delay_seconds = 1.0
    config.graph.completion_jitter_seconds = 8.0
    config.exchange.max_concurrent_sessions = 5
    # Deviation: no query left running for good. The collector gives up on one and submits it again, but it stays in
    # flight at the service, which is what this test counts (queries that fail or vanish stay on: a resubmission is
    # one more start in its lane).
    config.graph.stuck_rate = 0.0


@pytest.mark.parametrize("source", ["graph", "exchange"])
@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_window_holds_k_at_the_emulator(make_emulator: MakeEmulator, tmp_path: Path, k: int, source: str) -> None:
    emulator = make_emulator(records_per_hour=30.0, configure=_latencies)
    held = HeldWork(emulator, TENANT, source, seed=k)
    chunks = 2 * k + 2  # every lane is refilled at least twice
    end = START + timedelta(hours=chunks)
    env = {
        "COLLECTOR_CHUNKS_PER_EXECUTION": "50",  # one execution: the measure is the window, not the switch
        # The tenant budget stays on (each lane takes its slot first) with room for K: the measure is the window.
        f"COLLECTOR_BUDGET_{source.upper()}": str(max(k, 3)),
        # Nor is it the sizing of Exchange windows, whose first lane probes the tenant alone for one call.
        "COLLECTOR_EXCHANGE_TARGET_FRACTION": "0",
        "AUDIT_HTTP_TIMEOUT_SECONDS": "600",  # a held call is slow, not lost
        # ...and a held query slow, not stuck: from window version 2 its checks keep their schedule inside one
        # activity (five a second at the fast polls, where a timer and an activity per check made fewer), so the
        # fast polls' 40 checks would give it up after 8 s of holding on a loaded machine
        "COLLECTOR_MAX_POLLS": "400",
    }
    with serve(emulator, tmp_path, env) as host:
        assert host.post(body(end, interval=60, k=k, source=source, collectionId=f"k{k}")).status_code == 202
        seen = held.hold_at(k, chunks, host.log_tail)
        summary = host.wait(f"k{k}")
    assert summary["status"] == "Completed", summary
    assert sorted(host.chunk_ids(f"k{k}")) == sorted(emulator.ground_truth_ids(TENANT, START, end))

    timeline = emulator.stats.live_timeline(TENANT, source)
    starts = sum(1 for (_, live), (_, before) in zip(timeline[1:], timeline, strict=False) if live > before) + 1
    print(f"{source} K={k}: {chunks} chunks, {held.releases} releases, in flight before each: {seen}")
    resubmitted = emulator.stats.faulted(TENANT) if source == "graph" else 0  # failed or lost: submitted again
    assert starts == chunks + resubmitted
    assert len(seen) >= chunks - k  # a release per chunk that started after the first K, at least
    assert max(live for _, live in timeline) == k
    assert emulator.stats.peak_concurrency[(TENANT, source)] <= k
    if source == "graph":
        assert emulator.stats.queries_created[TENANT] == chunks + resubmitted
