"""The retry chain entity: one Durable Entity per chain, key = the chain's root collection id.

A thin trigger over ``shared.chain_claim``: its only operation, ``claim``, hands the next link of the chain to the
first ``retry-failed`` call that asks for it (``http_api/chain_claim.py`` signals it and reads its state). It reads
the wall clock, as an entity may (entity operations are not replayed).
"""

from __future__ import annotations

from datetime import UTC, datetime

import azure.durable_functions as df

from shared import names
from shared.chain_claim import Claim, ClaimState
from shared.errors import RequestValidationError

bp = df.Blueprint()

OPERATION = "claim"


def entity_id(root_id: str) -> df.EntityId:
    if not names.is_safe_id(root_id):
        raise RequestValidationError("root", "must be a collection id")
    return df.EntityId(names.ENTITY_RETRY_CHAIN, root_id)


def run_operation(context: df.DurableEntityContext, now: datetime) -> None:
    """One claim; an invalid key, operation or input raises, which fails only that operation."""
    if not names.is_safe_id(context.entity_key):
        raise RequestValidationError("entityKey", "must be a collection id")
    if context.operation_name != OPERATION:
        raise RequestValidationError("operation", f"must be {OPERATION}")
    claim = Claim.parse(context.get_input(expected_type=dict))
    state = ClaimState.from_json(context.get_state(lambda: None, expected_type=dict))
    won = state.apply(claim, now)
    context.set_state(state.to_json())
    context.set_result({"won": won, **state.to_json()})


@bp.entity_trigger(context_name="context", entity_name=names.ENTITY_RETRY_CHAIN)  # type: ignore[untyped-decorator]
def retry_chain(context: df.DurableEntityContext) -> None:
    run_operation(context, datetime.now(UTC))
