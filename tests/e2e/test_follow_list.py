"""``GET /api/follows`` lists every follower, whatever its age or state, a page at a time.

It listed the instances created in the last day only (a stopped follower disappeared once a day had passed and another
one ran) and one page of them (the SDK's list calls follow no continuation token): 5 of 100 followers were listed.
Here 40 followers are started and ended (stopped or terminated), two days pass on the moved clock, 60 more are started,
and the list must hold all 100, in one answer and through its continuation at any page size.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import requests

from durable_local.clock import OffsetFileClock
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import TENANT, WEBHOOKS, Host, serve

OLD, NEW = 40, 60


def start(host: Host, number: int) -> str:
    filters = {"operations": [f"Op{number:03d}"]}
    body = {"tenantId": TENANT, "intervalMinutes": 60, "everyMinutes": 60, "filters": filters}
    answer = requests.post(f"{host.base}/api/follows", json=body, timeout=30)
    assert answer.status_code == 202, answer.text
    return str(answer.json()["followId"])


def runtime(host: Host, follow: str) -> str:
    return str(host.status(follow).get("runtimeStatus"))


def wait_all(host: Host, follows: list[str], status: str) -> None:
    deadline = time.monotonic() + 120
    waiting = list(follows)
    while waiting and time.monotonic() < deadline:
        waiting = [f for f in waiting if runtime(host, f) != status]
        time.sleep(0.1)
    assert not waiting, f"{len(waiting)} followers never {status}\n{host.log_tail()}"


def listing(host: Host, **params: Any) -> dict[str, Any]:
    answer = requests.get(f"{host.base}/api/follows", params=params, timeout=120)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def test_every_follower_is_listed_whatever_its_age_or_state_and_pages_follow_on(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    clock = OffsetFileClock(tmp_path / "clock")
    emulator = make_emulator(records_per_hour=2.0, clock=clock.now)
    with serve(emulator, tmp_path, clock_file=clock.path) as host:
        old = [start(host, n) for n in range(OLD)]
        wait_all(host, old, "Running")
        for follow in old[:30]:
            assert requests.post(f"{host.base}/api/follows/{follow}/stop", timeout=30).status_code == 202
        for follow in old[30:]:
            terminate = requests.post(f"{host.base}{WEBHOOKS}/instances/{follow}/terminate", timeout=30)
            assert terminate.status_code == 202, terminate.text
        wait_all(host, old[:30], "Completed")
        wait_all(host, old[30:], "Terminated")
        clock.advance(timedelta(days=2))  # the ended ones were created two days ago now
        new = [start(host, n) for n in range(OLD, OLD + NEW)]
        wait_all(host, new, "Running")

        everything = listing(host)
        listed = [f["followId"] for f in everything["follows"]]
        assert len(listed) == OLD + NEW and set(listed) == set(old + new), f"{len(listed)} of {OLD + NEW} listed"
        assert everything["continuationToken"] is None
        states = {f["followId"]: f["status"] for f in everything["follows"]}
        assert {states[f] for f in old[:30]} == {"stopped"} and {states[f] for f in old[30:]} == {"terminated"}
        assert {states[f] for f in new} <= {"following", "catching up"}

        paged: list[str] = []
        token: str | None = None
        pages = 0
        while True:
            answer = listing(host, top=7, **({"continuationToken": token} if token else {}))
            paged += [f["followId"] for f in answer["follows"]]
            token, pages = answer["continuationToken"], pages + 1
            if token is None:
                break
        assert sorted(paged) == sorted(listed), "each follower once across the pages"
        assert pages > 1

        bad = requests.get(f"{host.base}/api/follows", params={"continuationToken": "a b"}, timeout=30)
        assert (bad.status_code, bad.json()["error"]["field"]) == (400, "continuationToken"), bad.text
        wrong = requests.get(f"{host.base}/api/follows", params={"top": "0"}, timeout=30)
        assert (wrong.status_code, wrong.json()["error"]["field"]) == (400, "top"), wrong.text
