"""Test app for the collector's tenant budget entity on the local host: the real entity blueprint
(``orchestrators.budget_entity``) and a lane-like orchestrator that takes a slot, holds it (renewing) and releases it.

The repository root is on ``PYTHONPATH`` when the tests serve this app, so the collector's modules import.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import azure.durable_functions as df
import azure.functions as func

from orchestrators.budget_entity import bp as budget_entity
from orchestrators.budget_entity import entity_id
from shared.budget.wire import BudgetOptions, BudgetRequest
from shared.models import iso

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)
app.register_functions(budget_entity)


@app.orchestration_trigger(context_name="context")
def hold_slot(context: df.DurableOrchestrationContext) -> Any:
    """Acquire (asking again after a durable timer while queued), hold ``hold`` seconds renewing every third of the
    lease, release; answer the grant and when it was seen."""
    spec = context.get_input()
    options = BudgetOptions(1, spec["lease"], spec["poll"])
    entity, holder = entity_id(spec["tenant"], spec["source"]), spec["holder"]
    asked_at = context.current_utc_datetime
    polls = 0
    answer = yield context.call_entity(entity, "acquire", options.acquire(holder).to_json())
    while not answer["granted"]:
        polls += 1
        yield context.create_timer(context.current_utc_datetime + timedelta(seconds=options.poll_seconds))
        answer = yield context.call_entity(entity, "acquire", options.acquire(holder).to_json())
    granted_at = context.current_utc_datetime
    until = granted_at + timedelta(seconds=spec["hold"])
    renewals, lost = 0, 0
    while context.current_utc_datetime < until:
        step = min(timedelta(seconds=options.renew_seconds), until - context.current_utc_datetime)
        yield context.create_timer(context.current_utc_datetime + step)
        if context.current_utc_datetime < until:
            renewed = yield context.call_entity(entity, "renew", options.renew(holder).to_json())
            renewals += 1
            lost += 0 if renewed["granted"] else 1
    released_at = context.current_utc_datetime
    yield context.call_entity(entity, "release", BudgetRequest("release", holder).to_json())
    return {
        "holder": holder,
        "grant": answer["grant"],
        "polls": polls,
        "renewals": renewals,
        "lost": lost,
        "askedAt": iso(asked_at),
        "grantedAt": iso(granted_at),
        "releasedAt": iso(released_at),
    }


@app.route(route="orchestrators/{functionName}/{instanceId?}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def start(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    body = req.get_body()
    payload = json.loads(body) if body else None
    instance_id = await client.start_new(req.route_params["functionName"], req.route_params.get("instanceId"), payload)
    return client.create_check_status_response(req, instance_id)
