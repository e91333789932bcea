"""Shutdown and crash: drain on SIGTERM, kill -9 mid-run, restart on the same SQLite store."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import requests

from tests.host.conftest import ServedApp, start, wait_for_status

STEPS = 4
# Messages a killed host had dequeued reappear after the visibility timeout (5 min in Azure).
FAST_RECOVERY = ["--visibility-timeout", "2"]


def _expected(steps: int) -> int:
    return sum(range(1, steps + 1))  # each step returns i + 1


def _start_batch(served: ServedApp, count: int, prefix: str) -> list[str]:
    spec = {"steps": STEPS, "seconds": 0.3}
    return [start(served.base_url, "slow_steps", spec, instance_id=f"{prefix}-{i}")["id"] for i in range(count)]


def _status_url(served: ServedApp, instance_id: str) -> str:
    return f"{served.base_url}/runtime/webhooks/durabletask/instances/{instance_id}"


def _wait_some_progress(served: ServedApp) -> None:
    """Block until at least one activity ran, so the crash lands mid-orchestration."""
    deadline_checks = 600
    for _ in range(deadline_checks):
        if "Executed 'sleepy'" in served.log():
            return
        requests.get(f"{served.base_url}/api/text", timeout=10)  # cheap wait on the host itself
    raise AssertionError(f"no activity ran:\n{served.log()}")


def test_kill_9_then_restart_resumes_every_orchestration(tmp_path: Path, serve_app: Callable[..., ServedApp]) -> None:
    store = str(tmp_path / "hub.sqlite")
    first = serve_app("basic", store=store, extra=FAST_RECOVERY)
    ids = _start_batch(first, 6, "crash")
    _wait_some_progress(first)
    first.stop(signal.SIGKILL)
    second = serve_app("basic", store=store, extra=FAST_RECOVERY)
    for instance_id in ids:
        final = wait_for_status(_status_url(second, instance_id), timeout=120)
        assert (final["runtimeStatus"], final["output"]) == ("Completed", _expected(STEPS)), instance_id


def test_sigterm_drains_and_restart_finishes_the_rest(tmp_path: Path, serve_app: Callable[..., ServedApp]) -> None:
    store = str(tmp_path / "hub.sqlite")
    # A message the draining host had dequeued and not finished (its drain is bounded) reappears after the visibility
    # timeout, 5 min by default: under load (6 test workers) one orchestration waited out the 120 s below.
    first = serve_app("basic", store=store, extra=FAST_RECOVERY)
    ids = _start_batch(first, 3, "drain")
    _wait_some_progress(first)
    assert first.stop(signal.SIGTERM) == 0
    assert "draining" in first.log()
    second = serve_app("basic", store=store, extra=FAST_RECOVERY)
    for instance_id in ids:
        final = wait_for_status(_status_url(second, instance_id), timeout=120)
        assert (final["runtimeStatus"], final["output"]) == ("Completed", _expected(STEPS)), instance_id
