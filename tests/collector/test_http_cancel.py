"""``POST /api/collections/{id}/cancel`` over a fake Durable client that runs the budget entity (the whole path on
the local host and the emulator: tests/e2e/test_cancel.py)."""

from __future__ import annotations

import json
from datetime import timedelta
from types import SimpleNamespace

from http_api import cancel, live, service
from http_api.budget_slots import Slot
from shared import names
from shared.budget.machine import Budget, BudgetState
from shared.budget.wire import BudgetOptions
from shared.sinks.memory import MemorySink
from tests.collector.test_http_service import (
    BODY,
    GUID,
    NOW,
    WITH_FAILURE,
    FakeClient,
    call,
    finish,
    retry,
    start,
)

BUDGET_KEY = (names.ENTITY_BUDGET, f"{GUID}:graph")


def running(client: FakeClient, collection_id: str, in_flight: list[str]) -> None:
    client.instances[collection_id].runtime_status = SimpleNamespace(value="Running")
    client.instances[collection_id].custom_status = {"windowsInFlight": in_flight, "queries": {"submitted": 2}}


def hold(client: FakeClient, *holders: str) -> None:
    budget = Budget(BudgetState.from_json(client.entities.get(BUDGET_KEY)))
    for holder in holders:
        budget.handle(BudgetOptions(1, 600.0, 10.0).acquire(holder), NOW, client.budget_capacity)
    client.entities[BUDGET_KEY] = budget.state.to_json()


def cancel_now(client: FakeClient, collection_id: str, sink: MemorySink) -> service.ApiResponse:
    return call(cancel.cancel_collection(client, collection_id, lambda: NOW, sink))


def test_cancel_terminates_gives_the_slots_back_and_writes_what_was_collected() -> None:
    client, sink = FakeClient(), MemorySink()
    start(client, {**BODY, "collectionId": "oops"})
    running(client, "oops", ["2024-11-17T14:00:00Z/2024-11-17T18:00:00Z"])
    hold(client, "oops/0", "oops/1", "other/0")
    answer = cancel_now(client, "oops", sink)
    assert answer.status == 200, answer.body
    assert answer.body["cancelled"] == ["oops"] and answer.body["slotsReleased"] is True
    ((instance, reason),) = client.terminated
    assert instance == "oops" and reason.startswith("cancelled through POST /api/collections/oops/cancel at ")
    state = client.entities[BUDGET_KEY]
    assert [x["holder"] for x in state["leases"]] == ["other/0"]  # another collection's slot is left alone
    manifest = json.loads(sink.objects[names.manifest_object_name(BODY["tenantId"], "oops")])
    assert manifest["status"] == "Cancelled" and manifest["reason"]["kind"] == "cancelled"
    assert manifest["cancelled"] == {"at": "2024-11-18T12:00:00Z", "inFlight": answer.body["inFlight"]}
    assert [(g["start"], g["end"]) for g in manifest["gaps"]] == [("2024-11-17T10:00:00Z", "2024-11-18T10:00:00Z")]
    assert manifest["queries"] == {"submitted": 2, "deletion": "off"}
    summary = call(service.collection_summary(client, "oops", lambda: sink)).body
    assert summary["status"] == "Cancelled" and summary["cancelled"] == reason
    assert summary["manifest"] == "memory://" + names.manifest_object_name(BODY["tenantId"], "oops")
    assert call(service.collection_summary(client, "oops")).body["manifest"] is None  # no sink, no look-up
    client.instances["oops"].instance_id, client.instances["oops"].name = "oops", names.ORCHESTRATOR_COLLECT
    assert live.collection_row(client.instances["oops"])["status"] == "Cancelled"


def test_cancel_stops_the_running_link_of_the_chain_and_retry_failed_takes_over_from_it() -> None:
    client, sink = FakeClient(), MemorySink()
    start(client, {**BODY, "collectionId": "chain"})
    finish(client, "chain", WITH_FAILURE)
    assert retry(client, "chain").status == 202
    running(client, "chain-retry-1", [])
    answer = cancel_now(client, "chain", sink)  # naming the root: its running retry is what stops
    assert answer.status == 200 and answer.body["cancelled"] == ["chain-retry-1"], answer.body
    assert [i for i, _ in client.terminated] == ["chain-retry-1"]
    again = cancel_now(client, "chain-retry-1", sink)
    assert (again.status, again.body["cancelled"], again.body["status"]) == (200, [], "Cancelled")
    assert len(client.terminated) == 1
    nxt = retry(client, "chain")  # a cancelled link is retried like a terminated one: whatever it had not finished
    assert (nxt.status, nxt.body["collectionId"], nxt.body["parentCollectionId"]) == (202, "chain-retry-2",
                                                                                    "chain-retry-1")  # fmt: skip


def test_nothing_to_cancel_is_a_404_or_a_409_and_touches_nothing() -> None:
    client, sink = FakeClient(), MemorySink()
    assert cancel_now(client, "ghost", sink).status == 404
    start(client, {**BODY, "collectionId": "done"})
    finish(client, "done", json.dumps({"status": "Completed", "failures": []}))
    answer = cancel_now(client, "done", sink)
    assert (answer.status, answer.body["error"]["rule"]) == (409, "not_running")
    assert client.terminated == [] and sink.objects == {}
    assert [s for s in client.signals if s[0] == names.ENTITY_BUDGET] == []  # the start's claim is all it sent


def test_a_collection_terminated_another_way_gets_its_slots_back_from_a_cancel() -> None:
    client, sink = FakeClient(), MemorySink()
    start(client, {**BODY, "collectionId": "plain"})
    hold(client, "plain/0")
    client.instances["plain"].runtime_status = SimpleNamespace(value="Terminated")
    client.instances["plain"].output = json.dumps("analyst")
    client.clock = NOW + timedelta(seconds=1)
    answer = cancel_now(client, "plain", sink)
    assert answer.status == 200 and answer.body["status"] == "Terminated" and answer.body["slotsReleased"]
    assert client.entities[BUDGET_KEY]["leases"] == [] and client.terminated == []


def test_a_slot_asked_for_from_the_edge_waits_in_the_queue_and_gives_its_place_back_when_it_gives_up() -> None:
    """The doctor's slot (``http_api.budget_slots.Slot``): granted when free, queued behind held slots, and a slot that
    gave up leaves no queue place to block the collections behind it."""
    client = FakeClient(budget_capacity=1)
    options = BudgetOptions(1, 600.0, 0.05)
    first, second = Slot(client, GUID, "graph", options), Slot(client, GUID, "graph", options)
    assert call(first.acquire(1.0)) and not first.queued
    assert not call(second.acquire(0.2))
    assert second.queued and second.report()["granted"] is False
    state = client.entities[BUDGET_KEY]
    assert [x["holder"] for x in state["leases"]] == [first.holder] and state["waiters"] == []
    call(first.release())
    assert call(second.acquire(1.0)) and [x["holder"] for x in client.entities[BUDGET_KEY]["leases"]] == [second.holder]


def test_the_budget_token_of_the_collection_goes_with_every_operation_the_edge_sends() -> None:
    """The seam for the budget entity's per-collection token (``Settings.budget_token`` once it exists): a cancel's
    release and the doctor's slot carry the token of the collection they act for."""
    client, sink = FakeClient(), MemorySink()
    start(client, {**BODY, "collectionId": "tok"})
    running(client, "tok", [])
    hold(client, "tok/0")
    asked: list[tuple[str, str]] = []

    def token(collection: str, source: str) -> str:
        asked.append((collection, source))
        return "ab" * 16

    assert call(cancel.cancel_collection(client, "tok", lambda: NOW, sink, budget_token=token)).status == 200
    slot = Slot(client, GUID, "graph", BudgetOptions(1, 600.0, 0.05), token=token("doctor-x", ""))
    assert call(slot.acquire(1.0))
    call(slot.release())
    sent = [(op, data) for name, _, op, data in client.signals if name == names.ENTITY_BUDGET]
    assert [op for op, _ in sent] == ["release_collection", "acquire", "release"]
    assert all(data["token"] == "ab" * 16 for _, data in sent)
    assert asked[0] == ("tok", client.started[0][2]["run"])  # the token of the run that was cancelled
    assert sent[0][1]["close"] is True  # and its run is closed: a token read from its history acquires nothing
