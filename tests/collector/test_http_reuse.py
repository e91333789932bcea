"""Reusing a ``collectionId``: the same id with another body is a conflict, never a silent ``existing: true``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from shared import names
from shared.models import iso
from shared.sinks.memory import MemorySink
from tests.collector.test_http_service import BODY, FakeClient, retry, start


def test_same_id_with_an_identical_body_spelled_differently_answers_existing() -> None:
    client = FakeClient()
    assert start(client, {**BODY, "collectionId": "inc"}).status == 202
    # The same instants and values written another way are the same request once validated.
    again = {**BODY, "collectionId": "inc", "startDate": "2024-11-17T11:00:00+01:00", "intervalMinutes": 240.0}
    response = start(client, again)
    assert (response.status, response.body["existing"]) == (200, True)
    assert len(client.started) == 1


def test_same_id_with_another_body_is_a_409_naming_every_differing_field_and_starts_nothing() -> None:
    client = FakeClient()
    start(client, {**BODY, "collectionId": "inc"})
    widened = {
        **BODY,
        "collectionId": "inc",
        "endDate": "2024-11-18T11:00:00Z",
        "filters": {"operations": ["MailItemsAccessed"]},
    }
    response = start(client, widened)
    assert response.status == 409, response.body
    error = response.body["error"]
    assert (error["field"], error["rule"]) == ("endDate", "conflict")
    message = error["message"]
    assert 'endDate: "2024-11-18T10:00:00Z" → "2024-11-18T11:00:00Z"' in message
    assert 'filters.operations: [] → ["MailItemsAccessed"]' in message
    assert "another collectionId" in message and "startDate" not in message
    assert len(client.started) == 1


@dataclass
class LostRaceClient(FakeClient):
    """Another POST with the same id but another body started the instance between our check and our start."""

    winner_input: Any = None
    checks: int = 0

    async def get_status(self, instance_id: str, show_history: bool = False, show_history_output: bool = False,
                         show_input: bool = False) -> Any:  # fmt: skip
        self.checks += 1
        if self.checks == 1:
            return SimpleNamespace(runtime_status=None)
        return SimpleNamespace(
            runtime_status=SimpleNamespace(value="Running"),
            input_=json.dumps(self.winner_input) if show_input else None,
        )

    async def start_new(self, orchestration_function_name: str, instance_id: str | None, client_input: Any) -> str:
        raise RuntimeError("An instance with ID 'same' already exists and is running")


def test_a_post_that_loses_the_start_race_to_another_body_is_a_409() -> None:
    winner = FakeClient()
    start(winner, {**BODY, "collectionId": "same", "maxConcurrency": 3})
    ((_, _, winner_input),) = winner.started
    response = start(LostRaceClient(winner_input=winner_input), {**BODY, "collectionId": "same"})
    assert response.status == 409 and response.body["error"]["field"] == "maxConcurrency", response.body
    same = start(LostRaceClient(winner_input=winner_input), {**BODY, "collectionId": "same", "maxConcurrency": 3})
    assert (same.status, same.body["existing"]) == (200, True)


# -- leftover output (review F1/F2) and terminated links (F4) --

TENANT = "contoso.onmicrosoft.com"
H = timedelta(hours=1)
T0 = datetime(2024, 11, 17, 10, 0, tzinfo=UTC)  # BODY's start: six 4-hour windows


def summarised(sink: MemorySink, collection_id: str, start: datetime, end: datetime) -> None:
    name = names.chunk_object_name(TENANT, collection_id, start, end)
    sink.objects[name] = b""
    sink.objects[names.summary_object_name(name)] = b"{}"


def test_a_new_collection_is_refused_when_its_prefix_holds_output_and_starts_nothing() -> None:
    client, sink = FakeClient(), MemorySink()
    sink.objects[f"{TENANT}/inc/parts/20241117T100000Z_20241117T140000Z/query.json"] = b'{"queryId": "old"}'
    response = start(client, {**BODY, "collectionId": "inc"}, sink)
    assert response.status == 409 and client.started == []
    error = response.body["error"]
    assert (error["field"], error["rule"]) == ("collectionId", "output_exists")
    assert f"{TENANT}/inc/" in error["message"] and "another collectionId" in error["message"]
    assert start(client, {**BODY, "collectionId": "in"}, sink).status == 202  # a prefix of the id is another id


def test_a_terminated_root_is_retried_over_the_parts_of_its_windows_without_a_chunk_summary() -> None:
    client, sink = FakeClient(), MemorySink()
    start(client, {**BODY, "collectionId": "term"}, sink)
    client.instances["term"].runtime_status = SimpleNamespace(value="Terminated")
    summarised(sink, "term", T0, T0 + 4 * H)  # window 0 done
    summarised(sink, "term", T0 + 4 * H, T0 + 6 * H)  # window 1 was split: its first half done
    summarised(sink, "term", T0 + 8 * H, T0 + 10 * H)  # window 2 was split: both halves done
    summarised(sink, "term", T0 + 10 * H, T0 + 12 * H)
    sink.objects[names.chunk_object_name(TENANT, "term", T0 + 12 * H, T0 + 16 * H)] = b"{}"  # no summary: unfinished
    response = retry(client, "term", sink)
    assert (response.status, response.instance_id, response.body["chunks"]) == (202, "term-retry-1", 4), response.body
    explicit = [(c["start"], c["end"]) for c in client.started[-1][2]["spec"]["explicit"]]
    assert explicit == [
        ("2024-11-17T16:00:00Z", "2024-11-17T18:00:00Z"),
        ("2024-11-17T22:00:00Z", "2024-11-18T02:00:00Z"),
        ("2024-11-18T02:00:00Z", "2024-11-18T06:00:00Z"),
        ("2024-11-18T06:00:00Z", "2024-11-18T10:00:00Z"),
    ]


def test_a_terminated_retry_is_retried_over_what_it_had_not_finished() -> None:
    client, sink = FakeClient(), MemorySink()
    start(client, {**BODY, "collectionId": "tr"}, sink)
    failed = [{"chunk": {"start": iso(T0 + i * 4 * H), "end": iso(T0 + (i + 1) * 4 * H)}, "kind": "t", "message": "m",
               "attempts": 4} for i in (1, 3)]  # fmt: skip
    client.instances["tr"].runtime_status = SimpleNamespace(value="Completed")
    client.instances["tr"].output = {"status": "CompletedWithFailures", "failures": failed, "remaining": {"cursor": 6}}
    assert retry(client, "tr", sink).status == 202
    client.instances["tr-retry-1"].runtime_status = SimpleNamespace(value="Terminated")
    summarised(sink, "tr-retry-1", T0 + 4 * H, T0 + 8 * H)
    response = retry(client, "tr", sink)
    assert (response.status, response.instance_id, response.body["chunks"]) == (202, "tr-retry-2", 1)
    assert client.started[-1][2]["spec"]["explicit"] == [
        {"start": iso(T0 + 12 * H), "end": iso(T0 + 16 * H), "depth": 0}
    ]
    client.instances["tr-retry-2"].runtime_status = SimpleNamespace(value="Terminated")
    summarised(sink, "tr-retry-2", T0 + 12 * H, T0 + 16 * H)  # finished its only window, then was terminated
    done = retry(client, "tr", sink)
    assert done.status == 400 and "every window of it has a chunk summary" in done.body["error"]["message"]


def test_retry_failed_refuses_to_start_a_retry_into_leftover_output() -> None:
    client, sink = FakeClient(), MemorySink()
    start(client, {**BODY, "collectionId": "left"}, sink)
    client.instances["left"].runtime_status = SimpleNamespace(value="Terminated")
    sink.objects[f"{TENANT}/left-retry-1/chunks/20241117T100000Z_20241117T140000Z.summary.json"] = b"{}"
    response = retry(client, "left", sink)
    assert response.status == 409 and len(client.started) == 1
    error = response.body["error"]
    assert (error["field"], error["rule"]) == ("collectionId", "output_exists")
    assert f"{TENANT}/left-retry-1/" in error["message"] and "delete that output first" in error["message"]


@dataclass
class StartedMeanwhileClient(FakeClient):
    """A concurrent POST with the same body started the collection after our first look, and its lanes already wrote:
    the objects under the prefix are that run's, not leftovers."""

    looks: int = 0

    async def get_status(self, instance_id: str, show_history: bool = False, show_history_output: bool = False,
                         show_input: bool = False) -> Any:  # fmt: skip
        self.looks += 1
        return SimpleNamespace(runtime_status=None) if self.looks == 1 else self.instances[instance_id]


def test_objects_of_a_run_started_meanwhile_by_the_same_request_are_not_leftovers() -> None:
    winner = FakeClient()
    start(winner, {**BODY, "collectionId": "inc"})
    client = StartedMeanwhileClient(instances=winner.instances)
    sink = MemorySink()
    sink.objects[f"{names.collection_prefix(BODY['tenantId'], 'inc')}parts/q.json"] = b"{}"
    response = start(client, {**BODY, "collectionId": "inc"}, sink)
    assert (response.status, response.body.get("existing")) == (200, True), response.body
    assert client.started == []
