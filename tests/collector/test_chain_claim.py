"""The retry chain's claim: each link of a chain is handed out once (``shared.chain_claim``), and ``retry-failed``
starts only the link it claimed (``http_api.chain_claim`` over a fake Durable client that runs the entity)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from http_api import chain_claim
from http_api.chain_claim import claim_link
from shared import names
from shared.chain_claim import STALE_SECONDS, Claim, ClaimState
from shared.errors import RequestValidationError
from tests.collector.test_http_service import BODY, WITH_FAILURE, FakeClient, finish, retry, start

T0 = datetime(2024, 11, 18, 12, tzinfo=UTC)
A, B, C = "a" * 32, "b" * 32, "c" * 32


def test_the_first_claim_of_a_newer_link_wins_and_no_other_claim_changes_it() -> None:
    state = ClaimState()
    assert state.apply(Claim(1, A), T0)
    assert not state.apply(Claim(1, B), T0)  # the same link, another caller
    assert state.apply(Claim(1, A), T0 + timedelta(seconds=1))  # the same claim delivered again
    assert state.apply(Claim(2, B), T0)  # the next link
    assert not state.apply(Claim(1, C), T0)  # a caller whose view of the chain is stale
    assert (state.generation, state.token, state.at) == (2, B, T0)


def test_a_stale_claim_is_taken_over_only_by_a_caller_naming_it() -> None:
    state = ClaimState()
    state.apply(Claim(1, A), T0)
    young = T0 + timedelta(seconds=STALE_SECONDS - 1)
    old = T0 + timedelta(seconds=STALE_SECONDS)
    assert not state.apply(Claim(1, B, replaces=A), young)  # its winner may still be starting it
    assert not state.apply(Claim(1, B, replaces=C), old)  # names another claim
    assert not state.apply(Claim(1, B), old)  # names none
    assert state.apply(Claim(1, B, replaces=A), old)
    assert not state.apply(Claim(1, C, replaces=A), old)  # a second taker lost the compare-and-swap
    assert (state.token, state.at) == (B, old)
    assert ClaimState.from_json(state.to_json()) == state


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([], "input"),
        ({"generation": -1, "token": A}, "generation"),
        ({"generation": 0, "token": A, "mac": 7}, "mac"),
        ({"generation": True, "token": A}, "generation"),
        ({"generation": 1, "token": "A" * 32}, "token"),
        ({"generation": 1, "token": A, "replaces": "x"}, "replaces"),
    ],
)
def test_a_claim_is_validated_like_any_input(data: Any, field: str) -> None:
    with pytest.raises(RequestValidationError) as raised:
        Claim.parse(data)
    assert raised.value.field == field


class LateClient(FakeClient):
    """Hides an instance from the next ``hidden[id]`` status reads: a call that looked before it started."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden: dict[str, int] = {}

    async def get_status(self, instance_id: str, *args: Any) -> Any:
        if self.hidden.get(instance_id, 0) > 0:
            self.hidden[instance_id] -= 1
            return SimpleNamespace(runtime_status=None)
        return await super().get_status(instance_id, *args)


def test_a_call_that_looked_before_a_link_started_and_finished_does_not_start_it_again() -> None:
    """The window the Durable start left open: a link that *finished* between a call's look-up and its start was
    started again (a finished instance may be restarted). The claim of that link is taken: the call answers with it."""
    client = LateClient()
    start(client, {**BODY, "collectionId": "late"})
    finish(client, "late", WITH_FAILURE)
    assert retry(client, "late").status == 202
    finish(client, "late-retry-1", WITH_FAILURE)
    client.hidden["late-retry-1"] = 2  # the chain walk and the re-read before the claim
    answer = retry(client, "late")
    assert (answer.status, answer.body["collectionId"], answer.body["existing"]) == (200, "late-retry-1", True)
    assert [instance for _, instance, _ in client.started] == ["late", "late-retry-1"]
    assert retry(client, "late").body["collectionId"] == "late-retry-2"  # the chain goes on from there


def test_a_link_claimed_by_a_call_that_died_before_starting_it_is_taken_over_once_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(chain_claim, "CLAIM_WAIT_SECONDS", 0.05)
    client = FakeClient()
    start(client, {**BODY, "collectionId": "orphan"})
    finish(client, "orphan", WITH_FAILURE)
    key = (names.ENTITY_START_CLAIM, "orphan")
    client.entities[key] = ClaimState(1, A, client.clock).to_json()  # claimed, never started
    lost = asyncio.run(claim_link(client, "orphan", 1, "orphan-retry-1", wait_seconds=0.05))
    assert (lost.won, lost.link) == (False, None)  # still young: its winner may be starting it
    waited = retry(client, "orphan")  # after the (bounded) wait
    assert (waited.status, waited.body["error"]["rule"]) == (409, "retry_starting") and len(client.started) == 1
    client.clock += timedelta(seconds=STALE_SECONDS)
    client.entities[key] = ClaimState(1, A, client.clock - timedelta(seconds=STALE_SECONDS)).to_json()
    answer = retry(client, "orphan")
    assert (answer.status, answer.body["collectionId"]) == (202, "orphan-retry-1")
    assert client.entities[key]["token"] != A
