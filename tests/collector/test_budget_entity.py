"""The tenant budget entity function driven by the real SDK entity handle in the local engine's entity episodes.

The clock is injected (``run_operation`` takes it; the trigger passes wall time), so expiry is tested exactly.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import azure.durable_functions as df

from durable_local.model import FunctionRegistry
from orchestrators.budget_entity import entity_id, run_operation
from shared import names
from shared.budget.wire import BudgetOptions
from shared.settings import Settings
from tests.engine.entities.helpers import T0, Caller, episode, state_of

KEY = "contoso.onmicrosoft.com:exchange"
ENTITY = f"@{names.ENTITY_BUDGET}@{KEY}"
OPTIONS = BudgetOptions(capacity=1, lease_seconds=30, poll_seconds=1)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def functions(clock: Clock, settings: Settings | None = None) -> FunctionRegistry:
    chosen = settings or Settings(budget_exchange=1)

    def budget(context: df.DurableEntityContext) -> None:
        run_operation(context, chosen, clock())

    return FunctionRegistry(orchestrators={}, activities={}, entities={names.ENTITY_BUDGET: df.Entity.create(budget)})


def answers(result: Any) -> list[tuple[str, Any]]:
    """(caller instance, decoded answer or error) for each response the episode sent."""
    out = []
    for message in result.orchestrator_messages:
        body = json.loads(message.event["Input"])
        value = json.loads(body["result"])
        out.append((message.instance_id, ("error", value) if "exceptionType" in body else value))
    return out


def entity_state(result: Any) -> dict[str, Any]:
    return json.loads(state_of(result)["state"])  # type: ignore[no-any-return]


def test_the_entity_id_is_the_validated_tenant_and_source() -> None:
    assert entity_id("Contoso.OnMicrosoft.com", "exchange") == df.EntityId(names.ENTITY_BUDGET, KEY)


def test_acquire_release_and_the_queue_across_two_orchestrations_in_one_batch_and_the_next() -> None:
    clock = Clock()
    a, b = Caller("collection-a"), Caller("collection-b")
    first = episode(
        ENTITY,
        [
            a.request(ENTITY, "acquire", OPTIONS.acquire("collection-a/0").to_json()),
            b.request(ENTITY, "acquire", OPTIONS.acquire("collection-b/0").to_json()),
        ],
        functions=functions(clock),
    )
    got = answers(first)
    assert [(who, x["granted"], x["position"]) for who, x in got] == [
        ("collection-a", True, None),
        ("collection-b", False, 1),
    ]
    assert [x["holder"] for x in entity_state(first)["leases"]] == ["collection-a/0"]

    clock.now = T0 + timedelta(seconds=2)
    second = episode(
        ENTITY,
        [
            a.request(ENTITY, "release", {"holder": "collection-a/0"}),
            b.request(ENTITY, "acquire", OPTIONS.acquire("collection-b/0").to_json()),
        ],
        past=first.history,
        functions=functions(clock),
    )
    released, granted = answers(second)
    assert released[1]["released"] is True and granted[1]["granted"] is True and granted[1]["grant"] == 2
    state = entity_state(second)
    assert (state["granted"], state["released"], state["waiters"]) == (2, 1, [])


def test_a_lease_not_renewed_expires_by_the_entity_clock() -> None:
    clock = Clock()
    a, b = Caller("collection-a"), Caller("collection-b")
    first = episode(
        ENTITY,
        [
            a.request(ENTITY, "acquire", OPTIONS.acquire("collection-a/0").to_json()),
            b.request(ENTITY, "acquire", OPTIONS.acquire("collection-b/0").to_json()),
        ],
        functions=functions(clock),
    )
    clock.now = T0 + timedelta(seconds=OPTIONS.lease_seconds)
    second = episode(
        ENTITY,
        [b.request(ENTITY, "acquire", OPTIONS.acquire("collection-b/0").to_json())],
        past=first.history,
        functions=functions(clock),
    )
    [(_, answer)] = answers(second)
    assert answer["granted"] is True and entity_state(second)["reclaimed"] == 1


def test_a_bad_request_fails_only_its_own_operation() -> None:
    clock = Clock()
    caller = Caller("collection-a")
    result = episode(
        ENTITY,
        [
            caller.request(ENTITY, "acquire", {"holder": "../etc/0", "leaseSeconds": 30, "waitSeconds": 1}),
            caller.request(ENTITY, "steal", {}),
            caller.request(ENTITY, "acquire", OPTIONS.acquire("collection-a/0").to_json()),
        ],
        functions=functions(clock),
    )
    bad_holder, bad_op, good = (x for _, x in answers(result))
    assert bad_holder[0] == "error" and "holder" in bad_holder[1]
    assert bad_op[0] == "error" and "operation" in bad_op[1]
    assert good["granted"] is True and [x["holder"] for x in entity_state(result)["leases"]] == ["collection-a/0"]


def test_a_key_that_is_not_tenant_and_source_owns_no_budget() -> None:
    clock = Clock()
    wrong = f"@{names.ENTITY_BUDGET}@Contoso.onmicrosoft.com:exchange"
    caller = Caller("collection-a")
    result = episode(
        wrong,
        [caller.request(wrong, "acquire", OPTIONS.acquire("collection-a/0").to_json())],
        functions=functions(clock),
    )
    [(_, answer)] = answers(result)
    assert answer[0] == "error" and "entityKey" in answer[1]
    assert json.loads(state_of(result).get("state") or "null") is None  # nothing was granted or stored


def test_the_capacity_is_the_settings_budget_of_the_keys_source() -> None:
    clock = Clock()
    settings = Settings(budget_exchange=2, budget_graph=0)
    caller, other = Caller("c"), Caller("c")
    graph = f"@{names.ENTITY_BUDGET}@contoso.onmicrosoft.com:graph"
    requests = [OPTIONS.acquire(f"c/{lane}").to_json() for lane in range(4)]
    exchange_result = episode(
        ENTITY, [caller.request(ENTITY, "acquire", r) for r in requests], functions=functions(clock, settings)
    )
    graph_result = episode(
        graph, [other.request(graph, "acquire", r) for r in requests], functions=functions(clock, settings)
    )
    assert [x["granted"] for _, x in answers(exchange_result)] == [True, True, False, False]
    assert [x["granted"] for _, x in answers(graph_result)] == [True] * 4  # 0 = no budget
