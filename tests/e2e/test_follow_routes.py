"""The collections routes given a follower's ids answer 4xx naming what to use instead, on the local host.

``POST /api/collections/<followId>/cancel`` answered 500 (KeyError ``collectionId``: a follower's input is no
collection's), and ``retry-failed`` on a pass re-collected the windows its follower retries itself, into another
prefix (record ids written twice). A pass's own summary stays a collection's, with its follower named.
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


def test_collection_routes_on_a_followers_ids_say_what_to_use(make_emulator: MakeEmulator, tmp_path: Path) -> None:
    clock = OffsetFileClock(tmp_path / "clock")
    emulator = make_emulator(records_per_hour=20.0, clock=clock.now)
    if clock.now().hour < 6:  # the five hours before now in one UTC day, so one pass (one day collection) reads them
        clock.advance(timedelta(hours=6))
    start = clock.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=5)
    bad_window = (start + timedelta(hours=1), start + timedelta(hours=2))
    emulator.faults.fail_query_windows = (bad_window,)  # its first pass lists one failed window
    with serve(emulator, tmp_path, clock_file=clock.path) as host:
        # a search follower: the failed window it needs is a Graph query's (a feed follower reads these hours by feed)
        body = {"tenantId": TENANT, "startDate": iso(start), "intervalMinutes": 60, "feed": False}
        follow = requests.post(f"{host.base}/api/follows", json=body, timeout=30).json()["followId"]
        found = until(host, follow, lambda s: s["passes"] >= 1 and s["running"] is None, "never ran a pass")
        assert found["failureCount"] == 1, found
        (first,) = sorted(i["instanceId"] for i in host.instances() if i["instanceId"].startswith(f"{follow}-"))
        day = first.rsplit("-", 1)[0]

        def post(instance: str, route: str) -> requests.Response:
            return requests.post(f"{host.base}/api/collections/{instance}/{route}", timeout=60)

        answers = {
            "cancel follower": post(follow, "cancel"),
            "retry follower": post(follow, "retry-failed"),
            "retry pass": post(first, "retry-failed"),
            "cancel pass": post(first, "cancel"),
            "cancel day": post(day, "cancel"),
        }
        codes = {name: answer.status_code for name, answer in answers.items()}
        assert codes == {"cancel follower": 409, "retry follower": 409, "retry pass": 409, "cancel pass": 409,
                         "cancel day": 404}, codes  # fmt: skip
        rules = {name: answer.json()["error"]["rule"] for name, answer in answers.items()}
        assert rules == {"cancel follower": "follower", "retry follower": "follower", "retry pass": "follower_pass",
                         "cancel pass": "follower_pass", "cancel day": "follower_day"}, rules  # fmt: skip
        assert f"POST /api/follows/{follow}/stop" in answers["cancel follower"].json()["error"]["message"]
        assert f"GET /api/follows/{follow}" in answers["retry pass"].json()["error"]["message"]

        as_collection = requests.get(f"{host.base}/api/collections/{follow}", timeout=30)
        assert (as_collection.status_code, as_collection.json()["error"]["rule"]) == (404, "follower")
        assert f"GET /api/follows/{follow}" in as_collection.json()["error"]["message"]
        pass_summary = requests.get(f"{host.base}/api/collections/{first}", timeout=30)
        assert pass_summary.status_code == 200 and pass_summary.json()["collection"]["follow"] == follow
        assert not [i for i in host.instances() if i["instanceId"].endswith("-r1")], "no retry collection started"
        assert summary(host, follow)["runtimeStatus"] == "Running", "the follower itself is untouched"
