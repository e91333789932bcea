"""Only the starter can start (issue 29 item 3): the HTTP starters seal every input they start, the admission activity
admits an execution only with its seal, and a run's budget token is derived where it is needed, never stored in an
input (``statusQueryGetUri?showInput=true`` shows inputs to every holder of the system key)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from durable_local.model import EventType, RuntimeStatus
from http_api import retry_chain, service
from shared import names
from shared.budget.token import collection_token, is_run_id
from shared.requests import admission
from shared.settings import Settings
from shared.sinks.memory import MemorySink
from tests.collector.fakes import FakeQueryApi, synthetic
from tests.collector.replay_driver import ReplayDriver, orchestrator_handle
from tests.collector.test_http_service import BODY, NOW, WITH_FAILURE, FakeClient, call, finish, resolve
from tests.collector.test_orchestrator_replay import START, collected_ids, graph_activities
from tests.collector.test_orchestrator_replay import payload as collection_payload

SECRET = "k" * 40
KEYED = Settings(budget_secret=SECRET)


def started_with(settings: Settings, collection_id: str) -> tuple[FakeClient, dict[str, Any]]:
    client = FakeClient()
    raw = json.dumps({**BODY, "collectionId": collection_id}).encode()
    answer = call(service.start_collection(client, raw, settings, NOW, lambda: "x", sink=MemorySink(), resolve=resolve))
    assert answer.status == 202, answer.body
    return client, client.started[-1][2]


def admit(payload: dict[str, Any], instance: str, secret: str = SECRET) -> dict[str, Any]:
    """What the admission activity answers the orchestrator of ``instance`` about ``payload``."""
    request = {
        "instance": instance,
        "digest": admission.digest(instance, payload),
        "seal": payload.get("seal", ""),
        "owner": payload["spec"]["collectionId"],
        "run": payload.get("run", ""),
    }
    return admission.admit(secret, request)


def test_each_start_and_each_retry_link_is_sealed_with_a_run_whose_token_is_in_no_input() -> None:
    client, first = started_with(KEYED, "case-7")
    finish(client, "case-7", WITH_FAILURE)
    retried = call(retry_chain.retry_failed(client, "case-7", NOW, MemorySink(), settings=KEYED, resolve=resolve))
    assert retried.status == 202
    payloads = {instance: payload for _, instance, payload in client.started}
    assert set(payloads) == {"case-7", "case-7-retry-1"}
    for instance, payload in payloads.items():
        assert is_run_id(payload["run"])
        answer = admit(payload, instance)
        token = collection_token(SECRET, instance, payload["run"])
        assert answer == {"admitted": True, "budgetToken": token}
        text = json.dumps(payload)
        assert token not in text and token[-32:] not in text and "budgetToken" not in text  # nowhere in the input
    assert first["run"] != payloads["case-7-retry-1"]["run"]


@pytest.mark.parametrize(
    "edit",
    [
        lambda p: p["spec"]["options"].update(max_concurrency=40),
        lambda p: p["spec"]["options"].update(budget_capacity=0),
        lambda p: p["spec"].update(tenantGuid="00000000-0000-4000-8000-000000000000"),
        lambda p: p.update(run="f" * 32),
        lambda p: p.update(state={"execution": 2, "lanes": []}),
        lambda p: p.pop("seal"),
    ],
    ids=["k40", "budget-off", "other-tenant", "other-run", "forged-state", "no-seal"],
)
def test_an_input_changed_after_the_starter_sealed_it_is_refused_with_the_reason(edit: Any) -> None:
    _, payload = started_with(KEYED, "case-9")
    assert admit(payload, "case-9")["admitted"] is True
    edit(payload)
    answer = admit(payload, "case-9")
    assert answer["admitted"] is False and "budgetToken" not in answer
    assert answer["reason"]["kind"] == "not_admitted" and "nothing was run" in answer["reason"]["message"]


def test_a_sealed_input_started_under_another_id_or_sealed_under_another_key_is_refused() -> None:
    _, payload = started_with(KEYED, "case-10")
    assert admit(payload, "case-10-copy")["admitted"] is False  # same input, another instance (another holder)
    assert admit(payload, "case-10", secret="z" * 40)["admitted"] is False
    assert admission.unsealed_reason(SECRET, "case-10", payload) is None
    assert "does not match" in str(admission.unsealed_reason(SECRET, "case-10-copy", payload))


def test_what_an_orchestration_hands_on_is_sealed_by_the_seal_activity_for_its_instance() -> None:
    _, payload = started_with(KEYED, "case-11")
    following = {**payload, "state": {"execution": 2}}
    sealed = admission.seal_answer(SECRET, admission.seal_request("case-11", following))["seal"]
    assert admit({**following, "seal": sealed}, "case-11")["admitted"] is True
    assert admit({**following, "seal": payload["seal"]}, "case-11")["admitted"] is False  # the old seal: refused


def test_without_a_secret_outside_azure_nothing_is_sealed_and_everything_is_admitted_without_a_token() -> None:
    _, payload = started_with(Settings(), "case-8")
    assert "seal" not in payload and "budgetToken" not in payload
    assert admit(payload, "case-8", secret="") == {"admitted": True, "budgetToken": ""}


@pytest.mark.parametrize("forged", ["unsealed", "k40-budget-off"])
def test_the_orchestrator_runs_no_chunk_for_an_input_it_is_refused(forged: str) -> None:
    """The direct start through the Durable HTTP API (issue 29): an input with edited options, or none of the starter's
    seal, ends Failed with the reason; no chunk activity, no budget operation, no manifest."""
    start = collection_payload("graph", 4, 2, budget_capacity=2, budget_lease_seconds=600.0, budget_poll_seconds=5.0)
    start = admission.sealed(SECRET, "c1", {**start, "run": "3" * 32})
    if forged == "unsealed":
        del start["seal"]
    else:
        start["spec"]["options"].update(max_concurrency=40, budget_capacity=0)
    sink = MemorySink()
    driver = ReplayDriver(
        orchestrator_handle(), graph_activities(FakeQueryApi(synthetic(START, 4, 6)), sink), secret=SECRET
    )
    driver.start(start)
    result = driver.run()
    output = json.loads(result.output or "null")
    assert result.status is RuntimeStatus.COMPLETED and output["status"] == "Failed"
    assert output["reason"]["kind"] == "not_admitted" and "nothing was run" in output["reason"]["message"]
    scheduled = [e["Name"] for e in result.history if e.get("EventType") == EventType.TASK_SCHEDULED]
    assert scheduled == [names.ACTIVITY_ADMIT] and driver.entity_operations == [] and sink.objects == {}


def test_a_sealed_collection_switches_executions_under_the_secret_and_stays_exact() -> None:
    """Every continue-as-new input is sealed by the seal activity and admitted again (M = 2: many executions)."""
    records = synthetic(START, 6, 6)
    sink = MemorySink()
    start = collection_payload(
        "graph", 6, 2, m=2, budget_capacity=2, budget_lease_seconds=600.0, budget_poll_seconds=5.0
    )
    driver = ReplayDriver(
        orchestrator_handle(), graph_activities(FakeQueryApi(records), sink), secret=SECRET, budget_capacity=2
    )
    driver.start(admission.sealed(SECRET, "c1", {**start, "run": "4" * 32}))
    output = json.loads(driver.run().output or "null")
    assert output["status"] == "Completed" and driver.executions > 2
    assert sorted(collected_ids(sink)) == sorted(str(r["id"]) for r in records)
