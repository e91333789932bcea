"""The collector orchestrator with a tenant budget, through the real SDK replay executor in SHIM mode.

The replay driver plays the budget entity (``shared.budget.machine`` in send order, answers among the activities'
completions), so these check what the pure window tests cannot: entity calls inside the window's ``task_any`` keep
K in flight under the extension's sequential shim, nothing carries stale answers across continue-as-new, and the
output stays exact while every slot is given back.
"""

from __future__ import annotations

from typing import Any

import pytest

from durable_local.history import event_type
from durable_local.model import EventType, RuntimeStatus
from shared.requests.run_options import WINDOW_VERSION
from shared.sinks.memory import MemorySink
from tests.collector.fakes import FakeQueryApi, FakeSearchApi, synthetic
from tests.collector.replay_driver import ReplayDriver, orchestrator_handle
from tests.collector.test_orchestrator_replay import (
    START,
    TENANT,
    collected_ids,
    exchange_activities,
    graph_activities,
    head_mean,
    payload,
)


def budget(b: int, **options: Any) -> dict[str, Any]:
    return {"budget_capacity": b, "budget_lease_seconds": 600.0, "budget_poll_seconds": 5.0, **options}


@pytest.mark.parametrize("seed", [1, 2])
def test_entity_calls_in_the_window_keep_k_in_flight_under_the_shim(seed: int) -> None:
    n, k = 24, 4
    records = synthetic(START, n, 6)
    sink = MemorySink()
    driver = ReplayDriver(
        orchestrator_handle(), exchange_activities(FakeSearchApi(records), sink), seed=seed, budget_capacity=k
    )
    driver.start(payload("exchange", n, k, **budget(k)))
    result = driver.run()
    assert result.status is RuntimeStatus.COMPLETED
    assert max(driver.activities_in_flight) <= k
    assert head_mean(driver.activities_in_flight, n, k) >= 0.85 * k, driver.activities_in_flight
    assert sorted(collected_ids(sink)) == sorted(r["id"] for r in records)
    state = driver.budget.state
    assert (state.leases, state.waiters) == ({}, [])
    assert k <= state.granted == state.released < n  # the slots served the next chunks without a round trip each


@pytest.mark.parametrize("source", ["graph", "exchange"])
def test_fewer_slots_than_k_cap_the_work_and_nothing_is_carried_across_executions(source: str) -> None:
    n, k, b = 12, 4, 2
    records = synthetic(START, n, 30 if source == "graph" else 6)
    sink = MemorySink()
    activities = (
        graph_activities(FakeQueryApi(records, limit=1000), sink)
        if source == "graph"
        else exchange_activities(FakeSearchApi(records), sink)
    )
    driver = ReplayDriver(orchestrator_handle(), activities, seed=4, budget_capacity=b)
    driver.start(payload(source, n, k, m=3, **budget(b)))
    result = driver.run()
    assert result.status is RuntimeStatus.COMPLETED
    assert driver.executions > 2
    assert max(driver.activities_in_flight) <= b  # never more server-side work than slots
    assert sorted(collected_ids(sink)) == sorted(r["id"] for r in records)
    state = driver.budget.state
    assert state.peak == b and state.granted == state.released == n and (state.leases, state.waiters) == ({}, [])
    assert driver.entity_operations.count("release_collection") == 1
    # The last execution's history: every entity answer it holds answers one of its own requests.
    raised = [e for e in result.history if event_type(e) == EventType.EVENT_RAISED]
    sent = [e for e in result.history if event_type(e) == EventType.EVENT_SENT]
    assert 0 < len(raised) <= len(sent)


@pytest.mark.parametrize("guid", ["0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0", None])
def test_the_budget_is_the_tenant_guids_and_an_input_without_one_keeps_the_spelling_it_started_with(
    guid: str | None,
) -> None:
    """Issue 18.3: every spelling of a tenant shares the budget of its GUID; an input written before the GUID was
    carried replays against the entity its lanes already hold slots of."""
    n, k = 4, 2
    records = synthetic(START, n, 6)
    start = payload("exchange", n, k, **budget(k))
    if guid is not None:
        start["spec"]["tenantGuid"] = guid
    driver = ReplayDriver(
        orchestrator_handle(), exchange_activities(FakeSearchApi(records), MemorySink()), budget_capacity=k
    )
    driver.start(start)
    assert driver.run().status is RuntimeStatus.COMPLETED
    assert driver.entity_targets == {f"@tenant_budget@{guid or TENANT}:exchange"}


@pytest.mark.parametrize("seed", [1, 2])
def test_kept_slots_and_credits_hold_k_under_the_shim_and_the_unspent_credits_go_back(seed: int) -> None:
    """Window version 1 (issue 28): slots kept across chunks, credits taken a few at once, executions bounded by
    their completions too. Under the extension's sequential shim the lanes stay as busy as version 0's, every record
    is collected once, every slot comes back and the daily quota counts exactly one credit per query (the unspent
    ones were refunded); far fewer grants and episodes."""
    n, k = 16, 3
    runs = {}
    for version in (0, WINDOW_VERSION):
        records = synthetic(START, n, 30)
        sink = MemorySink()
        driver = ReplayDriver(
            orchestrator_handle(),
            graph_activities(FakeQueryApi(records, limit=1000), sink),
            seed=seed,
            budget_capacity=k,
            budget_quota=150,
        )
        bound = 12 if version else 0
        options = budget(k, budget_quota=150, window_version=version, transitions_per_execution=bound)
        driver.start(payload("graph", n, k, **options))
        assert driver.run().status is RuntimeStatus.COMPLETED
        assert max(driver.activities_in_flight) <= k
        assert sorted(collected_ids(sink)) == sorted(r["id"] for r in records)
        state = driver.budget.state
        assert (state.leases, state.waiters) == ({}, [])
        assert state.submissions.used(driver.now) == n  # one credit per query: the unspent ones were given back
        runs[version] = driver
    old, new = runs[0], runs[WINDOW_VERSION]
    assert new.executions > 2 and old.executions == 1
    assert head_mean(new.activities_in_flight, n, k) >= 0.9 * head_mean(old.activities_in_flight, n, k)
    assert old.budget.state.granted == n and new.budget.state.granted <= k + 1
    assert new.entity_operations.count("acquire") < old.entity_operations.count("acquire") / 2
