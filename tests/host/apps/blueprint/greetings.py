"""The blueprint module: starter, orchestrator and activity."""

from __future__ import annotations

import json

import azure.durable_functions as df
import azure.functions as func

bp = df.Blueprint()


@bp.route(route="hello/{name}", methods=["POST"])
@bp.durable_client_input(client_name="client")
async def hello_start(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    instance_id = await client.start_new("greet", None, req.route_params["name"])
    return client.create_check_status_response(req, instance_id)


@bp.orchestration_trigger(context_name="context", orchestration="greet")
def greet_orchestrator(context: df.DurableOrchestrationContext):
    name = context.get_input()
    if isinstance(name, str) and name.startswith('"'):
        # The SDK client JSON-encodes the input before posting it (see docs/local-host.md).
        name = json.loads(name)
    greeting = yield context.call_activity("shout", name)
    return greeting


@bp.activity_trigger(input_name="name", activity="shout")
def shout_activity(name: str) -> str:
    return f"HELLO {str(name).upper()}"
