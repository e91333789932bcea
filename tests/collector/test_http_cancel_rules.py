"""``POST /api/collections/{id}/cancel``: the rules a hand mutation showed no other test held (docs/testing.md,
"Mutation"); the same fake Durable client as tests/collector/test_http_cancel.py."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import timedelta
from types import SimpleNamespace

import pytest

from http_api import cancel
from shared import names
from shared.errors import SinkError
from shared.models import iso
from shared.requests import admission
from shared.sinks.base import StoredObject
from shared.sinks.memory import MemorySink
from tests.collector.follow_replay import FOLLOW, NOW, payload
from tests.collector.test_http_cancel import BUDGET_KEY, hold, running
from tests.collector.test_http_service import BODY, FakeClient, call, start

SECRET = "cancel-rules-secret-" * 2


def cancel_with(client: FakeClient, collection_id: str, sink: MemorySink, secret: str = "") -> cancel.ApiResponse:
    return call(cancel.cancel_collection(client, collection_id, lambda: NOW, sink, secret=secret))


def test_a_followers_id_is_refused_with_the_route_to_stop_it_and_nothing_is_touched() -> None:
    """It answered 500 (KeyError ``collectionId``: a follower's input holds a follower's spec), issue 29."""
    client, sink = FakeClient(), MemorySink()
    client.instances[FOLLOW] = SimpleNamespace(
        name=names.ORCHESTRATOR_FOLLOW,
        instance_id=FOLLOW,
        runtime_status=SimpleNamespace(value="Running"),
        input_=payload(NOW),
        output=None,
        custom_status=None,
    )
    answer = cancel_with(client, FOLLOW, sink)
    assert (answer.status, answer.body["error"]["rule"]) == (409, "follower"), answer.body
    assert f"POST /api/follows/{FOLLOW}/stop" in answer.body["error"]["message"]
    assert client.terminated == [] and client.signals == [] and sink.objects == {}


def test_an_instance_whose_input_is_no_collection_is_a_409_and_is_not_terminated() -> None:
    client, sink = FakeClient(), MemorySink()
    client.instances["other"] = SimpleNamespace(
        runtime_status=SimpleNamespace(value="Running"), input_={"request": {}}, output=None, custom_status=None
    )
    answer = cancel_with(client, "other", sink)
    assert (answer.status, answer.body["error"]["rule"]) == (409, "not_a_collection"), answer.body
    assert client.terminated == [] and sink.objects == {}


def test_under_a_secret_only_an_input_the_collector_sealed_is_acted_on() -> None:
    """An instance started directly through the Durable HTTP API names whatever spec it likes: a cancel must not
    release its budget slots or write a manifest in its name."""
    client, sink = FakeClient(), MemorySink()
    start(client, {**BODY, "collectionId": "forged"})
    running(client, "forged", [])
    hold(client, "forged/0")
    answer = cancel_with(client, "forged", sink, secret=SECRET)
    assert (answer.status, answer.body["error"]["rule"]) == (409, "not_sealed"), answer.body
    assert "carries no seal" in answer.body["error"]["message"]
    assert client.terminated == [] and sink.objects == {}
    signals = len(client.signals)
    client.instances["forged"].input_ = admission.sealed(SECRET, "forged", client.instances["forged"].input_)
    answer = cancel_with(client, "forged", sink, secret=SECRET)
    assert answer.status == 200 and answer.body["cancelled"] == ["forged"], answer.body
    assert [i for i, _ in client.terminated] == ["forged"] and len(client.signals) > signals


class NotStopping(FakeClient):
    """A busy task hub: the terminate is accepted but not applied while the cancel waits."""

    async def terminate(self, instance_id: str, reason: str) -> None:
        self.terminated.append((instance_id, reason))


class FinishedFirst(FakeClient):
    """The collection completed on its own just before the terminate reached it (DTFx drops the terminate)."""

    async def terminate(self, instance_id: str, reason: str) -> None:
        self.terminated.append((instance_id, reason))
        self.instances[instance_id].runtime_status = SimpleNamespace(value="Completed")
        self.instances[instance_id].output = json.dumps({"status": "Completed", "failures": []})


def test_a_terminate_not_applied_yet_answers_202_cancelling_and_writes_and_releases_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cancel, "STOP_WAIT_SECONDS", 0.05)
    client, sink = NotStopping(), MemorySink()
    start(client, {**BODY, "collectionId": "busy"})
    running(client, "busy", [])
    hold(client, "busy/0")
    answer = cancel_with(client, "busy", sink)
    assert (answer.status, answer.body["status"]) == (202, "Cancelling"), answer.body
    assert "cancel again" in answer.body["note"]
    # No Cancelled manifest for a collection still running; only the cancel's request, which its waiting checks read.
    assert list(sink.objects) == [names.cancel_marker_name(BODY["tenantId"], "busy")], sink.objects
    assert [x["holder"] for x in client.entities[BUDGET_KEY]["leases"]] == ["busy/0"], "its slot is still in use"


def test_a_collection_that_completed_before_the_terminate_keeps_its_own_manifest_and_slots() -> None:
    client, sink = FinishedFirst(), MemorySink()
    start(client, {**BODY, "collectionId": "raced"})
    running(client, "raced", [])
    answer = cancel_with(client, "raced", sink)
    assert answer.status == 200 and answer.body == {
        "collectionId": "raced",
        "cancelled": [],
        "status": "Completed",
        "existing": True,
    }
    assert sink.objects == {}, "no Cancelled manifest over a collection that completed"
    assert [s for s in client.signals if s[0] == names.ENTITY_BUDGET] == []


def test_the_windows_in_flight_when_cancelled_are_answered_and_listed_in_the_manifest() -> None:
    client, sink = FakeClient(), MemorySink()
    start(client, {**BODY, "collectionId": "flying"})
    in_flight = ["2024-11-17T14:00:00Z/2024-11-17T18:00:00Z", "2024-11-17T18:00:00Z/2024-11-17T22:00:00Z"]
    running(client, "flying", in_flight)
    answer = cancel_with(client, "flying", sink)
    assert answer.status == 200 and answer.body["inFlight"] == in_flight
    manifest = json.loads(sink.objects[names.manifest_object_name(BODY["tenantId"], "flying")])
    assert manifest["cancelled"]["inFlight"] == in_flight
    assert "2 window(s) in flight" in manifest["reason"]["message"]


def test_an_instance_with_the_next_retry_id_that_is_no_retry_of_this_link_is_not_cancelled_for_it() -> None:
    """``<id>-retry-1`` started by someone else (or a retry of another link) is not this collection's retry: the
    cancel stops the collection it names."""
    client, sink = FakeClient(), MemorySink()
    start(client, {**BODY, "collectionId": "root"})
    running(client, "root", [])
    start(client, {**BODY, "collectionId": "elsewhere"})
    stranger = client.instances["elsewhere"]
    client.instances[names.retry_collection_id("root", 1)] = SimpleNamespace(
        runtime_status=SimpleNamespace(value="Running"),
        input_={**stranger.input_, "request": {**stranger.input_["request"], "retryOf": "elsewhere"}},
        output=None,
        custom_status=None,
    )
    answer = cancel_with(client, "root", sink)
    assert answer.status == 200 and answer.body["cancelled"] == ["root"], answer.body
    assert [i for i, _ in client.terminated] == ["root"]


def test_a_collection_run_without_the_tenant_budget_is_cancelled_without_a_budget_operation() -> None:
    """Budget off (``budget_capacity`` 0): there is no entity to release slots at, and none is created by the
    cancel's release."""
    client, sink = FakeClient(), MemorySink()
    start(client, {**BODY, "collectionId": "unbudgeted"})
    client.instances["unbudgeted"].input_["spec"]["options"]["budget_capacity"] = 0
    running(client, "unbudgeted", [])
    answer = cancel_with(client, "unbudgeted", sink)
    assert answer.status == 200 and answer.body["slotsReleased"] is True, answer.body
    assert [s for s in client.signals if s[0] == names.ENTITY_BUDGET] == [] and BUDGET_KEY not in client.entities


class RefusingSink(MemorySink):
    """A sink that refuses to write (storage down, or a permission taken away)."""

    def write_stream(self, name: str, parts: Iterable[bytes]) -> StoredObject:
        raise SinkError(f"cannot write {name}: 403 AuthorizationPermissionMismatch")


def test_a_manifest_that_cannot_be_written_is_reported_and_the_cancel_still_stands() -> None:
    client, sink = FakeClient(), RefusingSink()
    start(client, {**BODY, "collectionId": "nostore"})
    running(client, "nostore", [])
    hold(client, "nostore/0")
    answer = cancel_with(client, "nostore", sink)
    assert answer.status == 200 and answer.body["cancelled"] == ["nostore"] and "manifest" not in answer.body
    assert answer.body["manifestError"]["kind"] == "sink" and "403" in answer.body["manifestError"]["message"]
    assert answer.body["slotsReleased"] is True and client.entities[BUDGET_KEY]["leases"] == []


def test_the_manifest_says_when_the_cancel_was_asked_and_when_it_was_written() -> None:
    """The terminate takes a while to apply (its next episode): ``cancelled.at`` is the moment of the cancel (as the
    terminate reason says), ``timings.finishedAt`` the moment the manifest was written."""
    client, sink = FakeClient(), MemorySink()
    start(client, {**BODY, "collectionId": "timed"})
    running(client, "timed", [])
    ticks = iter([NOW, NOW + timedelta(seconds=7)])
    answer = call(cancel.cancel_collection(client, "timed", lambda: next(ticks), sink))
    assert answer.status == 200, answer.body
    manifest = json.loads(sink.objects[names.manifest_object_name(BODY["tenantId"], "timed")])
    assert manifest["cancelled"]["at"] == iso(NOW)
    assert manifest["timings"]["finishedAt"] == iso(NOW + timedelta(seconds=7))
    assert f"cancelled at {iso(NOW)}" in manifest["reason"]["message"]
    assert iso(NOW) in client.terminated[0][1]
