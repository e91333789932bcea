"""A stop sent while a follower's pass runs ends the follower after that pass, on the local host (SHIM mode).

The pass is held running by the emulator (its Graph queries run for an hour until the test shortens that), the stop is
sent then, and the follower must say "stopping", finish that pass, apply it and end, with no pass after it; before the
fix the stop was answered 202 and lost when the execution continued as new, and the follower went on for good.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import requests

from durable_local.clock import OffsetFileClock
from shared.models import iso
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import TENANT, Host, serve


def summary(host: Host, follow: str) -> dict[str, Any]:
    response = requests.get(f"{host.base}/api/follows/{follow}", timeout=30)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def until(host: Host, follow: str, check: Any, what: str, limit: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + limit
    found: dict[str, Any] = {}
    while time.monotonic() < deadline:
        found = summary(host, follow)
        if check(found):
            return found
        time.sleep(0.05)
    raise AssertionError(f"{what}: {found}\n{host.log_tail()}")


def passes(host: Host, follow: str) -> list[str]:
    return sorted(i["instanceId"] for i in host.instances() if i["instanceId"].startswith(f"{follow}-"))


def test_a_stop_sent_during_a_pass_ends_the_follower_after_that_pass(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    clock = OffsetFileClock(tmp_path / "clock")
    emulator = make_emulator(records_per_hour=20.0, clock=clock.now)
    start = clock.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=6)
    with serve(emulator, tmp_path, clock_file=clock.path) as host:
        graph = emulator.graph.settings
        graph.completion_delay_seconds = 3600.0  # its first pass stays running until the test lets it go
        body = {"tenantId": TENANT, "startDate": iso(start), "intervalMinutes": 60, "everyMinutes": 15}
        started = requests.post(f"{host.base}/api/follows", json=body, timeout=30)
        assert started.status_code == 202, started.text
        follow = started.json()["followId"]
        running = until(host, follow, lambda s: s["running"] is not None, "never started a pass")["running"]

        stop = requests.post(f"{host.base}/api/follows/{follow}/stop", timeout=30)
        assert stop.status_code == 202, stop.text
        assert stop.json()["after"] == running["instanceId"], "the answer names the pass it finishes first"
        stopping = until(host, follow, lambda s: s["status"] == "stopping", "never said it was stopping")
        assert stopping["runtimeStatus"] == "Running" and stopping["running"]["instanceId"] == running["instanceId"]

        graph.completion_delay_seconds = 0.05
        stopped = until(host, follow, lambda s: s["runtimeStatus"] == "Completed", "never stopped")
        assert stopped["status"] == "stopped" and stopped["running"] is None
        assert stopped["passes"] == 1 and stopped["covered"]["end"] == running_end(running, start)
        clock.advance(timedelta(hours=2))  # two more windows close: a follower still going would read them
        time.sleep(1.0)
        assert passes(host, follow) == [running["instanceId"]], "no pass after the stop"
        assert summary(host, follow)["status"] == "stopped"


def running_end(running: dict[str, Any], start: Any) -> str:
    """The coverage end after the pass: its new windows, from ``start``, one hour each."""
    return iso(start + timedelta(hours=int(running["new"])))
