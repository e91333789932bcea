"""Issue 6, item 3: 1,000 chunks collect exactly, and history stays bounded by continue-as-new.

Source: Exchange (one call, so one activity, per chunk: a thousand chunks fit in the test budget), 1-minute chunks,
K=5. Once an execution has started ``COLLECTOR_CHUNKS_PER_EXECUTION`` (M = 50) chunks the orchestrator continues as
new (its lanes carried, not drained), so the run has exactly 1000 / M executions and no execution's history holds more
than ``EVENTS_PER_CHUNK * M + SLACK`` events (``showHistory=true`` of the Durable status API, sampled during the run
and read for the final execution).
"""

from __future__ import annotations

import math
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from m365_emulator import EmulatorConfig
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import START, TENANT, Host, body, serve

CHUNKS = 1000
PER_EXECUTION = 50
K = 5
EVENTS_PER_CHUNK = 4 + 3
"""Shown events per chunk: TaskCompleted (scheduling folded in) plus the "nudge" timers (a TimerCreated each,
cancelled so never fired) of the yields around it, with room for a retry; and the tenant budget's three: the
``acquire`` sent (EventSent) and answered (EventRaised), the ``release`` sent."""
SLACK = 20
HISTORY_BOUND = EVENTS_PER_CHUNK * PER_EXECUTION + SLACK


def _sessions(config: EmulatorConfig) -> None:
    config.exchange.max_concurrent_sessions = K


class HistorySampler:
    """Reads the running instance's current-execution history every ``every`` seconds; keeps the longest."""

    def __init__(self, host: Host, instance_id: str, every: float = 1.5) -> None:
        self.host, self.instance_id, self.every = host, instance_id, every
        self.longest = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HistorySampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                events = self.host.status(self.instance_id, history=True).get("historyEvents") or []
            except Exception:
                continue
            self.longest = max(self.longest, len(events))
            self.samples += 1


@pytest.mark.slow
def test_thousand_chunks_exact_with_bounded_history(make_emulator: MakeEmulator, tmp_path: Path) -> None:
    emulator = make_emulator(records_per_hour=120.0, configure=_sessions)
    end = START + timedelta(minutes=CHUNKS)
    env = {
        "COLLECTOR_CHUNKS_PER_EXECUTION": str(PER_EXECUTION),
        "COLLECTOR_MAX_CHUNKS": str(CHUNKS),
        "COLLECTOR_BUDGET_EXCHANGE": str(K),  # the budget on, with room for K lanes
    }
    began = time.monotonic()
    with serve(emulator, tmp_path, env) as host:
        request = body(end, interval=1, k=K, source="exchange", collectionId="thousand")
        assert host.post(request).status_code == 202
        with HistorySampler(host, "thousand") as sampler:
            summary = host.wait("thousand", limit_seconds=600)
        final = host.status("thousand", history=True)
    elapsed = time.monotonic() - began

    assert summary["status"] == "Completed", summary
    assert summary["progress"]["completed"] == CHUNKS and summary["progress"]["failed"] == 0
    ids = host.chunk_ids("thousand")
    truth = emulator.ground_truth_ids(TENANT, START, end)
    assert len(ids) == len(set(ids)) and sorted(ids) == sorted(truth)
    assert host.manifest("thousand")["totals"]["chunks"] == CHUNKS

    executions = final["output"]["execution"]
    final_events = len(final["historyEvents"])
    print(
        f"1000 chunks: {len(truth)} records in {elapsed:.1f} s; {executions} executions; history events per "
        f"execution: final {final_events}, longest sampled {sampler.longest} over {sampler.samples} samples "
        f"(bound {HISTORY_BOUND})"
    )
    assert executions == math.ceil(CHUNKS / PER_EXECUTION)
    assert sampler.samples > 0
    assert PER_EXECUTION <= final_events <= HISTORY_BOUND
    assert sampler.longest <= HISTORY_BOUND
