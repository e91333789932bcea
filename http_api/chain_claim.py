"""Claiming a start through the start claim entity (``shared.chain_claim``), from the HTTP edge: a new collection id
(generation 0 of its chain), the next link of a retry chain, a new follower.

A client can only signal an entity and read its state, so a call signals ``claim`` with a token of its own and reads
the entity until its claim has been decided: the state names this token (won), another token of the same link
(lost: another call starts that link, so this one answers with it), or a later link (lost: this call's view of the
chain is stale). Losing to a claim that is stale and whose link never started (its winner died), the call takes it
over. An entity's queue is polled like any other, so the first answer can take as long as the task hub's longest
queue polling interval (30 s by default); the wait is bounded well above that.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from http_api.common import runtime_status
from orchestrators.chain_claim_entity import OPERATION, entity_id
from shared.chain_claim import Claim, ClaimState

CLAIM_WAIT_SECONDS = 90.0
"""How long a call waits for its claim to be decided and, having lost, for the winner's link to appear."""
_FIRST_PAUSE, _LONGEST_PAUSE = 0.02, 0.5


class ClaimClient(Protocol):
    """What a claim needs of the Durable client: signal the entity, read it, look the started instance up."""

    async def signal_entity(self, entity_id: Any, operation_name: str, operation_input: Any = ..., /) -> None: ...

    async def read_entity_state(self, entity_id: Any, /) -> Any: ...

    async def get_status(self, instance_id: str, show_history: bool = ..., show_history_output: bool = ...,
                         show_input: bool = ...) -> Any: ...  # fmt: skip


@dataclass(frozen=True, slots=True)
class ClaimOutcome:
    won: bool
    link: Any = None
    """Lost: the Durable status of the link another call started (None if it has not appeared in time)."""


async def claim_link(
    client: ClaimClient,
    root: str,
    generation: int,
    link_id: str,
    *,
    secret: str = "",
    wait_seconds: float | None = None,
) -> ClaimOutcome:
    """Claim start ``generation`` (instance ``link_id``) of the chain rooted at ``root``; exactly one caller wins.
    ``secret``: the key claims are signed with (``COLLECTOR_BUDGET_SECRET``)."""
    entity = entity_id(root)
    claim = Claim(generation, uuid.uuid4().hex).signed(secret, root)
    await client.signal_entity(entity, OPERATION, claim.to_json())
    deadline = time.monotonic() + (CLAIM_WAIT_SECONDS if wait_seconds is None else wait_seconds)
    pause = _FIRST_PAUSE
    while True:
        state = ClaimState.from_json(getattr(await client.read_entity_state(entity), "entity_state", None))
        if state.generation == generation and state.token == claim.token:
            return ClaimOutcome(True)
        if state.generation >= generation:  # another call holds this link (or a later one)
            found = await client.get_status(link_id, False, False, True)
            if runtime_status(found) is not None:
                return ClaimOutcome(False, found)
            if state.generation == generation and state.is_stale(datetime.now(UTC)):
                # Its winner never started it: take the claim over (the entity checks the age again).
                claim = Claim(generation, claim.token, replaces=state.token).signed(secret, root)
                await client.signal_entity(entity, OPERATION, claim.to_json())
        if time.monotonic() >= deadline:
            return ClaimOutcome(False)
        await asyncio.sleep(pause)
        pause = min(pause * 2, _LONGEST_PAUSE)
