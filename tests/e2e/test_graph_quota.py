"""Issue 25 item 6, "Done when": a follower and collections of one tenant never exceed the tenant's daily Graph quota;
a collection that needs more submissions than are left waits for the quota and then completes exact.

On the local host (the hosted profile: the tenant budget on and keyed, as deployed) and the emulator, sharing a moved
clock (``OffsetFileClock``): the emulator counts the tenant's query submissions over a rolling 24 hours of that clock
and answers 429 past its quota (``m365_emulator.graph_quota``), the tenant budget keeps the collector's share of it
(the quota less the reserve left to other tools), and a lane past it waits on a durable timer of the host, which the
moved clock fires. The emulator's own count is the evidence: the most submissions in any 24 hours, and its 429s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import requests

from durable_local.clock import OffsetFileClock
from m365_emulator import EmulatorConfig
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import START, TENANT, WEBHOOKS, Host, body, serve

QUOTA_WAIT = "waiting for the tenant's daily Graph quota until "


def quota(daily: int) -> Callable[[EmulatorConfig], None]:
    def configure(config: EmulatorConfig) -> None:
        config.graph.daily_submission_quota = daily

    return configure


def settings(daily: int, reserve: int) -> dict[str, str]:
    return {"COLLECTOR_GRAPH_DAILY_QUERIES": str(daily), "COLLECTOR_GRAPH_DAILY_RESERVE": str(reserve)}


def until(check: Callable[[], Any], what: str, host: Host, limit: float = 120.0) -> Any:
    """Poll ``check`` until it returns something truthy (a bound on a hung run, not a speed assertion)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"never {what}\n{host.log_tail()}")


def budget_state(host: Host) -> dict[str, Any]:
    found = requests.get(f"{host.base}{WEBHOOKS}/entities/tenant_budget/{TENANT}:graph", timeout=10)
    return found.json() if found.ok else {}  # type: ignore[no-any-return]


def test_a_collection_that_needs_more_than_is_left_waits_for_the_quota_then_completes_exact(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    clock = OffsetFileClock(tmp_path / "clock")
    emulator = make_emulator(records_per_hour=60.0, configure=quota(8), clock=clock.now)
    end = START + timedelta(hours=10)  # ten one-hour queries; the collector may submit 6 a day (8 less 2)
    with serve(emulator, tmp_path, settings(8, 2), clock_file=clock.path) as host:
        answer = host.post(body(end, interval=60, k=3, collectionId="needs-ten"))
        assert answer.status_code == 202, answer.text
        plan = answer.json()["plan"]["submissions"]
        assert (plan["needed"], plan["allowedPerDay"], plan["leftNow"], plan["waits"]) == (10, 6, 6, True)

        def waiting() -> dict[str, Any] | None:
            summary = host.summary("needs-ten")
            state = (summary.get("budget") or {}).get("state") or ""
            return summary if state.startswith(QUOTA_WAIT) else None

        waits = until(waiting, "waited for the quota", host)
        assert waits["runtimeStatus"] == "Running" and waits["progress"]["completed"] <= 6
        assert waits["budget"]["quota"]["left"] == 0 and waits["budget"]["quota"]["waitingUntil"]
        assert emulator.graph.quota.used(TENANT) == 6  # the collector's share, none of the reserve
        submitted = emulator.stats.queries_created[TENANT]
        time.sleep(2.0)  # it waits on a durable timer: nothing is submitted, nothing asks in a loop
        assert emulator.stats.queries_created[TENANT] == submitted
        refused_before = budget_state(host).get("quotaRefused", 0)
        time.sleep(1.0)
        assert budget_state(host).get("quotaRefused", 0) == refused_before  # no entity call while it waits

        clock.advance(timedelta(hours=24))  # the first submissions leave the rolling 24 hours
        summary = host.wait("needs-ten", limit_seconds=240)
    assert summary["status"] == "Completed", summary
    assert summary["progress"]["completed"] == 10 and summary["progress"]["failed"] == 0
    ids = host.chunk_ids("needs-ten")
    assert len(ids) == len(set(ids)) and sorted(ids) == sorted(emulator.ground_truth_ids(TENANT, START, end))
    assert emulator.graph.quota.most_in_any_day(TENANT) <= 6 and emulator.graph.quota.refused[TENANT] == 0
    assert summary["budget"]["quota"]["waits"] >= 1


def test_two_collections_and_a_follower_of_one_tenant_never_exceed_the_quota_at_the_service(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    clock = OffsetFileClock(tmp_path / "clock")
    emulator = make_emulator(records_per_hour=20.0, configure=quota(12), clock=clock.now)
    now = clock.now()
    begin = now.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
    follow = {"tenantId": TENANT, "startDate": begin.isoformat(), "intervalMinutes": 360, "everyMinutes": 60}
    follow["feed"] = False  # a search follower: its Graph submissions are what this test counts
    ranges = {"first": START, "second": START + timedelta(days=2)}
    with serve(emulator, tmp_path, settings(12, 2), clock_file=clock.path) as host:
        too_often = requests.post(f"{host.base}/api/follows", json={**follow, "intervalMinutes": 240}, timeout=30)
        assert too_often.status_code == 400, too_often.text  # 12 a day: more than the 10 the collector may submit
        assert (too_often.json()["error"]["field"], too_often.json()["error"]["rule"]) == ("intervalMinutes",
                                                                                       "daily_quota")  # fmt: skip
        started = requests.post(f"{host.base}/api/follows", json=follow, timeout=30)
        assert started.status_code == 202, started.text
        assert started.json()["plan"]["graphQueriesPerDay"] == 8  # four windows a day, each read again
        for name, start in ranges.items():
            answer = host.post(body(start + timedelta(hours=6), start=start, interval=60, k=3, collectionId=name))
            assert answer.status_code == 202, answer.text

        def done() -> bool:
            return all(host.summary(name).get("runtimeStatus") == "Completed" for name in ranges)

        simulated = timedelta()
        while not done():
            assert simulated <= timedelta(days=4), {name: host.summary(name).get("budget") for name in ranges}
            quiet_since, seen = time.monotonic(), emulator.stats.queries_created[TENANT]
            while time.monotonic() - quiet_since < 2.0 and not done():  # until nothing is submitted for 2 s
                time.sleep(0.2)
                if emulator.stats.queries_created[TENANT] != seen:
                    quiet_since, seen = time.monotonic(), emulator.stats.queries_created[TENANT]
            clock.advance(timedelta(hours=4))
            simulated += timedelta(hours=4)
        summaries = {name: host.summary(name) for name in ranges}
        follower = requests.get(f"{host.base}/api/follows/{started.json()['followId']}", timeout=30).json()
        state = budget_state(host)

    most = emulator.graph.quota.most_in_any_day(TENANT)
    print(f"simulated {simulated}; submissions {emulator.stats.queries_created[TENANT]}; most in 24 h {most}; "
          f"refused by the budget {state.get('quotaRefused')}; follower covered {follower['covered']}")  # fmt: skip
    assert most <= 10 and emulator.graph.quota.refused[TENANT] == 0  # never past the collector's share at the service
    assert state.get("quotaRefused", 0) > 0  # and they did have to wait for it
    for name, start in ranges.items():
        ids = host.chunk_ids(name)
        truth = emulator.ground_truth_ids(TENANT, start, start + timedelta(hours=6))
        assert summaries[name]["status"] == "Completed" and sorted(ids) == sorted(truth), name
    assert follower["failureCount"] == 0 and follower["covered"]["end"] > begin.isoformat()
