"""The follows API on the local host: bad requests are 400s that start nothing, one follower per (tenant, source,
filters), a clean stop, a restart that goes on from where coverage ended, the list, and follower passes kept out of
the collections list."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from durable_local.clock import OffsetFileClock
from shared.models import iso
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import TENANT, Host, serve
from tests.e2e.harness import body as harness_body

BAD = [
    ({"tenantId": "not a tenant"}, "tenantId", "format"),
    ({"tenantId": TENANT, "intervalMinutes": 7}, "intervalMinutes", "divides_day"),
    ({"tenantId": TENANT, "everyMinutes": 0}, "everyMinutes", "range"),
    ({"tenantId": TENANT, "maxConcurrency": 99}, "maxConcurrency", "range"),
    ({"tenantId": TENANT, "startDate": "2999-01-01T00:00:00Z"}, "startDate", "future"),
    ({"tenantId": TENANT, "startDate": "2001-01-01T00:00:00Z"}, "startDate", "retention"),
    ({"tenantId": TENANT, "source": "exchange"}, "tenantId", "initial_domain"),
    ({"tenantId": TENANT, "filters": {"operations": ["a\u202eb"]}}, "filters.operations", "characters"),
    ({"tenantId": TENANT, "endDate": "2024-01-01T00:00:00Z"}, "endDate", "unknown_field"),
]


def follows(host: Host) -> list[dict[str, Any]]:
    response = requests.get(f"{host.base}/api/follows", timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["follows"]  # type: ignore[no-any-return]


def summary(host: Host, follow: str) -> dict[str, Any]:
    return requests.get(f"{host.base}/api/follows/{follow}", timeout=30).json()  # type: ignore[no-any-return]


def until(host: Host, follow: str, check: Any, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    found: dict[str, Any] = {}
    while time.monotonic() < deadline:
        found = summary(host, follow)
        if check(found):
            return found
        time.sleep(0.1)
    raise AssertionError(f"{what}: {found}\n{host.log_tail()}")


@pytest.fixture
def served(make_emulator: MakeEmulator, tmp_path: Path) -> Any:
    clock = OffsetFileClock(tmp_path / "clock")
    emulator = make_emulator(records_per_hour=20.0, clock=clock.now)
    with serve(emulator, tmp_path, clock_file=clock.path) as host:
        yield host, clock


def test_bad_follow_requests_name_the_field_and_start_nothing(served: Any) -> None:
    host, _ = served
    for body, field, rule in BAD:
        response = requests.post(f"{host.base}/api/follows", json=body, timeout=30)
        assert response.status_code == 400, (body, response.text)
        assert (response.json()["error"]["field"], response.json()["error"]["rule"]) == (field, rule), body
    assert follows(host) == [] and host.instances() == [] and host.written_files() == []


def test_one_follower_per_key_a_clean_stop_and_a_restart_that_goes_on(served: Any) -> None:
    host, clock = served
    start = clock.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=6)
    body = {"tenantId": TENANT, "startDate": iso(start), "intervalMinutes": 60, "everyMinutes": 15, "maxConcurrency": 2}
    started = requests.post(f"{host.base}/api/follows", json=body, timeout=30)
    assert started.status_code == 202, started.text
    follow = started.json()["followId"]
    assert started.json()["summaryUri"].endswith(f"/api/follows/{follow}")
    same = requests.post(f"{host.base}/api/follows", json=body, timeout=30)
    assert (same.status_code, same.json()["followId"], same.json()["existing"]) == (200, follow, True)
    other = requests.post(f"{host.base}/api/follows", json={**body, "everyMinutes": 30}, timeout=30)
    assert (other.status_code, other.json()["error"]["field"]) == (409, "everyMinutes"), other.text
    filtered = requests.post(f"{host.base}/api/follows", json={**body, "filters": {"operations": ["Send"]}}, timeout=30)
    assert filtered.status_code == 202 and filtered.json()["followId"] != follow, "another key, another follower"

    caught_up = until(host, follow, lambda s: s["running"] is None and s["passes"] >= 1, "never caught up")
    assert caught_up["status"] == "following" and caught_up["covered"]["start"] == iso(start)
    covered = caught_up["covered"]["end"]
    assert caught_up["provisional"]["windows"] > 0, "windows read within their band are provisional"
    assert 90 * 60 <= caught_up["lagSeconds"] < 3 * 3600
    assert {f["followId"] for f in follows(host)} == {follow, filtered.json()["followId"]}
    assert requests.get(f"{host.base}/api/collections", timeout=30).json()["collections"] == [], "passes are not listed"

    stop = requests.post(f"{host.base}/api/follows/{follow}/stop", timeout=30)
    assert stop.status_code == 202, stop.text
    stopped = until(host, follow, lambda s: s["runtimeStatus"] == "Completed", "never stopped")
    assert stopped["status"] == "stopped" and stopped["covered"]["end"] == covered
    again = requests.post(f"{host.base}/api/follows/{follow}/stop", timeout=30)
    assert (again.status_code, again.json()["error"]["rule"]) == (409, "not_running")

    clock.advance(timedelta(hours=3))  # three more windows closed while it was stopped
    resumed = requests.post(f"{host.base}/api/follows", json={**body, "startDate": None}, timeout=30)
    assert resumed.status_code == 202, resumed.text
    assert resumed.json()["resumed"] is True and resumed.json()["coveredUntil"] == covered
    going = until(host, follow, lambda s: s["runtimeStatus"] == "Running" and s["covered"]["end"] > covered, "resume")
    assert going["covered"]["start"] == iso(start), "the same coverage, extended: no gap"
    assert requests.get(f"{host.base}/api/follows/follow-graph-000000000000", timeout=30).status_code == 404
    assert requests.get(f"{host.base}/api/follows/not-a-follower", timeout=30).status_code == 400
    taken = host.post(harness_body(start + timedelta(hours=1), start=start, collectionId=f"{follow}-20240101"))
    assert (taken.status_code, taken.json()["error"]["rule"]) == (400, "reserved"), "a follower's day is its own"


def test_a_terminated_follower_resumes_from_the_cycle_it_was_in(served: Any) -> None:
    host, clock = served
    start = clock.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=4)
    body = {"tenantId": TENANT, "startDate": iso(start), "intervalMinutes": 60}
    follow = requests.post(f"{host.base}/api/follows", json=body, timeout=30).json()["followId"]
    caught_up = until(host, follow, lambda s: s["running"] is None and s["passes"] >= 1, "never caught up")
    terminate = requests.post(f"{host.base}/runtime/webhooks/durabletask/instances/{follow}/terminate", timeout=30)
    assert terminate.status_code == 202, terminate.text
    until(host, follow, lambda s: s["runtimeStatus"] == "Terminated", "never terminated")
    assert summary(host, follow)["status"] == "terminated"
    clock.advance(timedelta(hours=2))
    resumed = requests.post(f"{host.base}/api/follows", json=body, timeout=30)
    assert resumed.status_code == 202 and resumed.json()["resumed"] is True, resumed.text
    assert resumed.json()["coveredUntil"] == caught_up["covered"]["end"]
    going = until(host, follow, lambda s: s["covered"]["end"] > caught_up["covered"]["end"], "never went on")
    # the passes its last cycle may have left running keep their ids: the resumed follower numbers its own far on
    assert going["passes"] >= 1000
