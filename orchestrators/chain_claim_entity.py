"""The start claim entity: one Durable Entity per chain, key = its root (a collection id, or a follower id).

A thin trigger over ``shared.chain_claim``: its only operation, ``claim``, hands each start of the chain (the root's
own start is generation 0, each ``retry-failed`` link the next) to the first caller that asks for it
(``http_api/chain_claim.py`` signals it and reads its state). It reads the wall clock and the settings (the key a
claim is signed with), as an entity may (entity operations are not replayed).
"""

from __future__ import annotations

from datetime import UTC, datetime

import azure.durable_functions as df

from activities import runtime
from shared import names
from shared.chain_claim import Claim, ClaimState, claim_signed
from shared.errors import RequestValidationError

bp = df.Blueprint()

OPERATION = "claim"


def entity_id(root_id: str) -> df.EntityId:
    if not names.is_safe_id(root_id):
        raise RequestValidationError("root", "must be a collection or follower id")
    return df.EntityId(names.ENTITY_START_CLAIM, root_id)


def run_operation(context: df.DurableEntityContext, now: datetime, secret: str = "") -> None:
    """One claim; an invalid key, operation, input or signature raises, which fails only that operation."""
    if not names.is_safe_id(context.entity_key):
        raise RequestValidationError("entityKey", "must be a collection or follower id")
    if context.operation_name != OPERATION:
        raise RequestValidationError("operation", f"must be {OPERATION}")
    claim = Claim.parse(context.get_input(expected_type=dict))
    if not claim_signed(secret, context.entity_key, claim):
        raise RequestValidationError("mac", "is not the collector's signature of this claim")
    state = ClaimState.from_json(context.get_state(lambda: None, expected_type=dict))
    won = state.apply(claim, now)
    context.set_state(state.to_json())
    context.set_result({"won": won, **state.to_json()})


@bp.entity_trigger(context_name="context", entity_name=names.ENTITY_START_CLAIM)  # type: ignore[untyped-decorator]
def start_claim(context: df.DurableEntityContext) -> None:
    run_operation(context, datetime.now(UTC), runtime.settings().budget_secret or "")
