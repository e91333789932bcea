"""Reusing a ``collectionId``: the same id with another body is a conflict, never a silent ``existing: true``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from tests.collector.test_http_service import BODY, FakeClient, start


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
