"""Issue 18, items 1 and 2, on the local host (SHIM mode) and the emulator, whose per-tenant limit is B.

* The squat: while collections run, someone holding the system key floods the budget entity's HTTP route with
  made-up holders, day-long leases and waits, renewals, and releases of the running collections' holders. With
  ``COLLECTOR_BUDGET_SECRET`` set (as on Azure) every one is refused: the collections finish exact with no
  concurrency 429, the state stays tiny. Without a secret (local runs) made-up collections can queue, but the
  state stays bounded and the budget is never exceeded.
* The pause: the host is stopped (SIGSTOP) past the lease while a collection holds the only slot and another waits.
  After SIGCONT no lane calls without its slot: the emulator never sees two calls at once, and the loss is counted.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import requests

from m365_emulator import EmulatorConfig
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import TENANT, WEBHOOKS, Host, body, serve
from tests.e2e.test_tenant_budget import assert_exact, budget_env, hours, server_limit
from tests.support.held_work import HeldWork

B = 2
HOSTILE_OPERATIONS = 10_000


def start(
    host: Host, collection_id: str, window: tuple[datetime, datetime], *, source: str = "graph", k: int = B
) -> None:
    request = body(window[1], start=window[0], interval=60, k=k, source=source, collectionId=collection_id)
    response = host.post(request)
    assert response.status_code == 202, response.text


def entity_url(host: Host, source: str) -> str:
    """The budget entity of the tenant and source (its key spells the tenant as the collections did)."""
    deadline = time.monotonic() + 60
    while True:
        listed = requests.get(f"{host.base}{WEBHOOKS}/entities/tenant_budget", timeout=30).json()
        keys = [e["entityId"]["key"] for e in listed if str(e["entityId"]["key"]).endswith(f":{source}")]
        if keys:
            return f"{host.base}{WEBHOOKS}/entities/tenant_budget/{keys[0]}"
        assert time.monotonic() < deadline, listed
        time.sleep(0.05)


def hostile(index: int, victims: list[str]) -> tuple[str, dict[str, Any]]:
    """One operation of the squat (as the review sent them), cycling through its kinds."""
    day = 86_400
    kind = index % 5
    if kind == 0:  # a made-up holder at the head of the queue for a day
        return "acquire", {"holder": f"squat{index % 500}/0", "leaseSeconds": day, "waitSeconds": day}
    if kind == 1:  # a made-up holder with a guessed token
        return "acquire", {"holder": f"squat{index}/1", "leaseSeconds": day, "waitSeconds": day, "token": "0" * 32}
    victim = victims[index % len(victims)]
    if kind == 2:
        return "release_collection", {"collection": victim}
    if kind == 3:
        return "release", {"holder": f"{victim}/{index % 4}", "token": "f" * 32}
    holders = [f"{victim}/{lane}" for lane in range(4)]
    return "renew_collection", {"collection": victim, "holders": holders, "leaseSeconds": day, "waitSeconds": day}


class Flood:
    """``count`` hostile operations over the entity route from 8 threads, in the background."""

    def __init__(self, host: Host, source: str, victims: list[str], count: int) -> None:
        self.url, self.victims, self.count = entity_url(host, source), victims, count
        self.sent = 0
        self.accepted = 0
        self.largest = 0
        """The largest entity state (JSON bytes) seen while the flood ran and just after."""
        self.pool = ThreadPoolExecutor(2)
        self.done = self.pool.submit(self._run)
        self.sampled = self.pool.submit(self._sample)

    def _run(self) -> None:
        with ThreadPoolExecutor(8) as senders:
            for status in senders.map(self._send, range(self.count)):
                self.accepted += status == 202

    def _sample(self) -> None:
        ended: float | None = None
        while ended is None or time.monotonic() < ended + 3:  # and a few seconds for the entity to catch up
            found = requests.get(self.url, timeout=30)
            if found.ok:
                self.largest = max(self.largest, len(found.content))
            if ended is None and self.done.done():
                ended = time.monotonic()
            time.sleep(0.1)

    def _send(self, index: int) -> int:
        operation, data = hostile(index, self.victims)
        # As the SDK's signal_entity posts it (a JSON string of the JSON input): what the entity decodes.
        with requests.Session() as session:
            status = session.post(self.url, params={"op": operation}, json=json.dumps(data), timeout=30).status_code
        self.sent += 1
        return status

    def wait(self) -> int:
        self.done.result()
        self.sampled.result()
        self.pool.shutdown()
        return self.accepted


def entity_state(host: Host, source: str) -> dict[str, Any]:
    found = requests.get(entity_url(host, source), timeout=30)
    return found.json() if found.ok else {}


def settled(host: Host, source: str, check: Callable[[dict[str, Any]], bool], timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    state = entity_state(host, source)
    while not check(state) and time.monotonic() < deadline:
        time.sleep(0.2)
        state = entity_state(host, source)
    return state


@pytest.mark.parametrize("secret", [True, False], ids=["with-secret", "without-secret"])
def test_the_squat_leaves_running_collections_exact_with_no_429_and_the_state_bounded(
    make_emulator: MakeEmulator, tmp_path: Path, secret: bool
) -> None:
    emulator = make_emulator(records_per_hour=30.0, configure=server_limit(B, 0.5, 0.5))
    windows = {"victim-a": hours(0, 12), "victim-b": hours(20, 12)}
    unkeyed = None if secret else {"COLLECTOR_BUDGET_SECRET": ""}  # without: a local run, not as deployed
    with serve(emulator, tmp_path, budget_env(B), deviations=unkeyed) as host:
        held = HeldWork(emulator, TENANT, "graph")  # the first queries run until the squat is well under way
        for collection_id, window in windows.items():
            start(host, collection_id, window)
        flood = Flood(host, "graph", list(windows), HOSTILE_OPERATIONS)
        try:
            held.wait_for(lambda: flood.sent >= 500 or flood.done.done(), lambda: f"{flood.sent} sent")
        finally:
            held.release_all()
        first = host.wait("victim-a", limit_seconds=600)
        during = flood.sent  # hostile operations sent while the collections ran
        summaries = {"victim-a": first, "victim-b": host.wait("victim-b", limit_seconds=600)}
        accepted = flood.wait()
        final = settled(host, "graph", lambda s: not s.get("leases"))
    size = len(json.dumps(final))
    print(f"\n{'with' if secret else 'without'} a secret: {accepted} hostile operations accepted by the route "
          f"({during} while the collections ran); entity state at most {flood.largest} bytes during and just after "
          f"the flood, {size} bytes once the collections ended ({len(final['leases'])} leases, "
          f"{len(final['waiters'])} waiters, lost {final['lost']})")  # fmt: skip
    key = (TENANT, "graph")
    assert accepted == HOSTILE_OPERATIONS  # the route takes anything: the entity decides
    assert during >= 500, during  # the squat ran while the collections did
    assert emulator.stats.concurrency_429[key] == 0 and emulator.stats.peak_concurrency[key] <= B
    assert all(s["status"] == "Completed" for s in summaries.values()), summaries
    for collection_id, window in windows.items():
        assert_exact(host, emulator, [collection_id], window)
    assert flood.largest < 20_000, flood.largest  # bounded: at most 100 queue entries, whatever was sent
    if secret:  # nothing hostile got in: no made-up holder ever held a slot or a queue place
        assert final["granted"] == final["released"] and final["lost"] == 0, final
        assert flood.largest < 2_000, flood.largest
        assert all(s["budget"]["lost"] == 0 for s in summaries.values())


def exchange_limit(limit: int, latency: float) -> Callable[[EmulatorConfig], None]:
    def configure(config: EmulatorConfig) -> None:
        config.exchange.max_concurrent_sessions = limit
        config.exchange.latency_seconds = latency
        config.exchange.latency_jitter_seconds = latency
        config.exchange.page_size = 5000

    return configure


def test_a_host_paused_past_the_lease_resumes_without_two_lanes_calling_on_one_slot(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    # Long enough that only the pause below lets a lease run out: with 3 s, renewals that ran late on a loaded
    # machine (6 test workers) let the other collection's lease lapse too, a second loss (entity 2, windows 1).
    lease = 6.0
    # 12,000 records an hour: each one-hour chunk takes three Search-UnifiedAuditLog calls (5,000 rows a block), so
    # the holder has calls left in its chunk when it resumes: the review's "the holder kept calling".
    emulator = make_emulator(records_per_hour=12_000.0, configure=exchange_limit(1, 0.5))
    env = {**budget_env(1, lease), "COLLECTOR_BUDGET_EXCHANGE": "1"}
    windows = {"paused-a": hours(0, 3), "paused-b": hours(10, 2)}
    with serve(emulator, tmp_path, env) as host:
        start(host, "paused-a", windows["paused-a"], source="exchange", k=1)
        state = wait_entity(host, lambda s: [x["holder"] for x in s.get("leases", [])][:1] == ["paused-a/0"])
        start(host, "paused-b", windows["paused-b"], source="exchange", k=1)
        wait_entity(host, lambda s: any(w["holder"].startswith("paused-b/") for w in s.get("waiters", [])))
        key = (TENANT, "exchange")
        while emulator.stats.current_concurrency[key] == 0:  # a call of the holder is at the service
            time.sleep(0.005)
        # Stopped mid-call: the call in flight ends at the service meanwhile (nothing recalls a request already
        # sent); what must not happen is the holder calling again after SIGCONT without its slot.
        os.kill(host.pid, signal.SIGSTOP)
        try:
            time.sleep(2.5 * lease)
        finally:
            os.kill(host.pid, signal.SIGCONT)
        summaries = {collection_id: host.wait(collection_id, limit_seconds=300) for collection_id in windows}
        final = settled(host, "exchange", lambda s: not s.get("leases") and not s.get("waiters"))
    assert state["granted"] >= 1
    assert emulator.stats.concurrency_429[key] == 0 and emulator.stats.peak_concurrency[key] == 1
    assert all(s["status"] == "Completed" for s in summaries.values()), summaries
    for collection_id, window in windows.items():
        assert_exact(host, emulator, [collection_id], window)
    # The paused lane's lease ran out: whoever asked first after SIGCONT got the slot, and the paused lane had to ask
    # again before its next call (not take it back silently): a loss, counted once by the window and the entity.
    lost = sum(s["budget"]["lost"] for s in summaries.values())
    assert lost >= 1, {c: s["budget"] for c, s in summaries.items()}
    assert final.get("lost") == lost, final
    assert final["peak"] == 1 and final["reclaimed"] >= 1


def wait_entity(host: Host, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    return wait_state_of(host, "exchange", check)


def wait_state_of(
    host: Host, source: str, check: Callable[[dict[str, Any]], bool], timeout: float = 60
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    state = entity_state(host, source)
    while not check(state):
        assert time.monotonic() < deadline, state
        time.sleep(0.02)
        state = entity_state(host, source)
    return state
