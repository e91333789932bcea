"""The tenant budget entity: one Durable Entity per (tenant, source), key ``<tenant>:<source>``.

A thin trigger over ``shared.budget.machine``: it reads the settings (built once per worker, ``activities.runtime``)
and the wall clock (an entity operation is not replayed, so both are allowed here, unlike in orchestrator code),
checks that the operation's token belongs to the collection it acts for (``shared.budget.token``: an entity cannot
know its sender), runs the operation within the settings' limits and stores the state.
Orchestrations talk to it with ``call_entity(EntityId("tenant_budget", key), op, request)``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import azure.durable_functions as df

from activities import runtime
from shared import names
from shared.budget.machine import Budget, BudgetState, Limits
from shared.budget.token import token_matches
from shared.budget.wire import BudgetRequest, entity_key, parse_entity_key
from shared.clock import utc_now
from shared.errors import RequestValidationError
from shared.settings import Settings

bp = df.Blueprint()


def entity_id(tenant_id: str, source: str) -> df.EntityId:
    """The budget entity of one tenant and source (the key is validated and lower-cased)."""
    return df.EntityId(names.ENTITY_BUDGET, entity_key(tenant_id, source))


def run_operation(context: df.DurableEntityContext, settings: Settings, now: datetime) -> None:
    """One budget operation; an invalid key or request raises, which fails only that operation."""
    _, source = parse_entity_key(context.entity_key)
    request = BudgetRequest.parse(context.operation_name, _input(context))
    if request.op != "status":
        check_token(settings, request)
    options = settings.budget(source)
    limits = Limits(options.capacity, options.lease_seconds, options.poll_seconds, options.quota)
    budget = Budget(BudgetState.from_json(context.get_state(lambda: None, expected_type=dict)))
    answer = budget.handle(request, now, limits)
    context.set_state(budget.state.to_json())
    context.set_result(answer)


def check_token(settings: Settings, request: BudgetRequest) -> None:
    """Refuse an operation whose token is not the one of the collection it acts for (any token passes when no
    ``COLLECTOR_BUDGET_SECRET`` is set)."""
    if not token_matches(settings.budget_secret or "", request.owner, request.token):
        raise RequestValidationError("token", f"is not the budget token of collection {request.owner}")


def _input(context: df.DurableEntityContext) -> Any:
    try:
        return context.get_input(expected_type=dict)
    except (TypeError, ValueError):  # no input at all (``status`` needs none)
        return None


@bp.entity_trigger(context_name="context", entity_name=names.ENTITY_BUDGET)  # type: ignore[untyped-decorator]
def tenant_budget(context: df.DurableEntityContext) -> None:
    settings = runtime.settings()
    run_operation(context, settings, utc_now(settings))
