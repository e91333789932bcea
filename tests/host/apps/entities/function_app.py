"""Test app for durable entities on the local host: entities, orchestrators calling them, SDK client routes."""

from __future__ import annotations

import json
from typing import Any

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.entity_trigger(context_name="context")
def tally(context: df.DurableEntityContext) -> None:
    """A counter whose ``add`` answers the new value."""
    value = context.get_state(lambda: 0)
    if context.operation_name == "add":
        value += context.get_input()
        context.set_result(value)
    elif context.operation_name == "get":
        context.set_result(value)
    elif context.operation_name == "fail":
        raise ValueError("tally refuses")
    context.set_state(value)


@app.entity_trigger(context_name="context", entity_name="Ledger")
def ledger_entity(context: df.DurableEntityContext) -> None:
    """Registered under another name than its function: ``Ledger``."""
    entries = context.get_state(lambda: [])
    if context.operation_name == "append":
        entries.append(context.get_input())
    elif context.operation_name == "get":
        context.set_result(entries)
    context.set_state(entries)


@app.orchestration_trigger(context_name="context")
def count_up(context: df.DurableOrchestrationContext) -> Any:
    """``n`` sequential calls ``add 1`` on one tally; answers what the entity returned each time."""
    spec = context.get_input()
    entity = df.EntityId("tally", spec["key"])
    answers = []
    for _ in range(spec["n"]):
        answers.append((yield context.call_entity(entity, "add", 1)))
    return answers


@app.orchestration_trigger(context_name="context")
def calls_failing_operation(context: df.DurableOrchestrationContext) -> Any:
    try:
        yield context.call_entity(df.EntityId("tally", "f"), "fail")
    except Exception as exc:
        return f"caught: {exc}"
    return "not caught"


@app.route(route="orchestrators/{functionName}/{instanceId?}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def start(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    body = req.get_body()
    payload = json.loads(body) if body else None
    instance_id = await client.start_new(req.route_params["functionName"], req.route_params.get("instanceId"), payload)
    return client.create_check_status_response(req, instance_id)


@app.route(route="entity/{name}/{key}/{operation}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def signal(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    body = req.get_body()
    value = json.loads(body) if body else None
    entity = df.EntityId(req.route_params["name"], req.route_params["key"])
    await client.signal_entity(entity, req.route_params["operation"], value)
    return func.HttpResponse(status_code=202)


@app.route(route="entity/{name}/{key}", methods=["GET"])
@app.durable_client_input(client_name="client")
async def read(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    found = await client.read_entity_state(df.EntityId(req.route_params["name"], req.route_params["key"]))
    body = {"exists": found.entity_exists, "state": found.entity_state}
    return func.HttpResponse(json.dumps(body), mimetype="application/json")
