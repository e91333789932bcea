"""Sample app for the local host tests: one DFApp, anonymous routes, every durable pattern."""

from __future__ import annotations

import json
import os
from datetime import timedelta

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)

_attempts: dict[str, int] = {}


def _input(context: df.DurableOrchestrationContext) -> object:
    value = context.get_input()
    # Inputs posted as raw JSON strings (not through the SDK client) arrive as JSON text; accept both shapes.
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


# -- HTTP ---------------------------------------------------------------------------------------------


@app.route(route="orchestrators/{functionName}/{instanceId?}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def start(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    body = req.get_body()
    payload = json.loads(body) if body else None
    instance_id = await client.start_new(req.route_params["functionName"], req.route_params.get("instanceId"), payload)
    return client.create_check_status_response(req, instance_id)


@app.route(route="wait/{functionName}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def start_and_wait(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    body = req.get_body()
    instance_id = await client.start_new(req.route_params["functionName"], None, json.loads(body) if body else None)
    return await client.wait_for_completion_or_create_check_status_response(req, instance_id, 20000, 100)


@app.route(route="status/{instanceId}", methods=["GET"])
@app.durable_client_input(client_name="client")
async def status(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    found = await client.get_status(req.route_params["instanceId"], show_history=True, show_input=True)
    if not found:
        return func.HttpResponse("missing", status_code=404)
    body = {
        "runtimeStatus": found.runtime_status.value if found.runtime_status else None,
        "output": found.output,
        "input": found.input_,
        "historyLength": len(found.historyEvents or []) if hasattr(found, "historyEvents") else None,
    }
    return func.HttpResponse(json.dumps(body), mimetype="application/json")


@app.route(route="events/{instanceId}/{eventName}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def raise_event(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    await client.raise_event(req.route_params["instanceId"], req.route_params["eventName"], req.get_json())
    return func.HttpResponse(status_code=202)


@app.route(route="terminate/{instanceId}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def terminate(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    await client.terminate(req.route_params["instanceId"], req.params.get("reason", "because"))
    return func.HttpResponse(status_code=202)


@app.route(route="list", methods=["GET"])
@app.durable_client_input(client_name="client")
async def list_instances(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    statuses = await client.get_status_all()
    return func.HttpResponse(json.dumps(sorted(s.instance_id for s in statuses)), mimetype="application/json")


@app.route(route="echo/{n:int}/{rest?}", methods=["GET", "POST"])
def echo(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    body = {
        "method": req.method,
        "route": dict(req.route_params),
        "query": dict(req.params),
        "header": req.headers.get("x-test"),
        "body": req.get_body().decode(),
        "function": context.function_name,
    }
    return func.HttpResponse(json.dumps(body), mimetype="application/json")


@app.route(route="url", methods=["GET"])
def url(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(json.dumps({"url": req.url}), mimetype="application/json")


@app.route(route="text", methods=["GET"])
async def text(req: func.HttpRequest) -> str:
    return "plain " + req.params.get("q", "")


@app.route(route="boom", methods=["GET"])
def boom(req: func.HttpRequest) -> func.HttpResponse:
    raise RuntimeError("boom")


# -- orchestrators ------------------------------------------------------------------------------------


@app.orchestration_trigger(context_name="context")
def chaining(context: df.DurableOrchestrationContext):
    results = []
    for city in ("Tokyo", "Seattle", "London"):
        results.append((yield context.call_activity("say_hello", city)))
    return results


@app.orchestration_trigger(context_name="context")
def fan_out(context: df.DurableOrchestrationContext):
    spec = _input(context) or {}
    count = int(spec.get("count", 5))
    tasks = [
        context.call_activity("write_blob", {"container": spec.get("container"), "index": i}) for i in range(count)
    ]
    names = yield context.task_all(tasks)
    return sorted(names)


@app.orchestration_trigger(context_name="context")
def timer(context: df.DurableOrchestrationContext):
    seconds = float(_input(context) or 1)
    yield context.create_timer(context.current_utc_datetime + timedelta(seconds=seconds))
    return "timer fired"


@app.orchestration_trigger(context_name="context")
def approval(context: df.DurableOrchestrationContext):
    context.set_custom_status("waiting")
    value = yield context.wait_for_external_event("Approval")
    return {"approved": value}


@app.orchestration_trigger(context_name="context")
def parent(context: df.DurableOrchestrationContext):
    first = yield context.call_sub_orchestrator("child", 2)
    second = yield context.call_sub_orchestrator("child", 5)
    return [first, second]


@app.orchestration_trigger(context_name="context")
def child(context: df.DurableOrchestrationContext):
    value = int(_input(context) or 0)
    doubled = yield context.call_activity("double", value)
    return doubled


@app.orchestration_trigger(context_name="context")
def counter(context: df.DurableOrchestrationContext):
    value = int(_input(context) or 0)
    if value < 3:
        context.continue_as_new(value + 1)
        return None
    return value


@app.orchestration_trigger(context_name="context")
def retrying(context: df.DurableOrchestrationContext):
    options = df.RetryOptions(first_retry_interval_in_milliseconds=100, max_number_of_attempts=4)
    result = yield context.call_activity_with_retry("flaky", options, context.instance_id)
    return result


@app.orchestration_trigger(context_name="context")
def failing(context: df.DurableOrchestrationContext):
    yield context.call_activity("explode", "kaboom")
    return "unreachable"


@app.orchestration_trigger(context_name="context")
def slow_steps(context: df.DurableOrchestrationContext):
    spec = _input(context) or {}
    steps = int(spec.get("steps", 3))
    total = 0
    for i in range(steps):
        total += yield context.call_activity("sleepy", {"value": i, "seconds": spec.get("seconds", 0.2)})
    return total


@app.orchestration_trigger(context_name="context")
def long_wait(context: df.DurableOrchestrationContext):
    yield context.create_timer(context.current_utc_datetime + timedelta(hours=1))
    return "done"


# -- activities ---------------------------------------------------------------------------------------


@app.activity_trigger(input_name="name")
def say_hello(name: str) -> str:
    return f"Hello {name}!"


@app.activity_trigger(input_name="value")
def double(value: int) -> int:
    return value * 2


@app.activity_trigger(input_name="key")
def flaky(key: str) -> str:
    _attempts[key] = _attempts.get(key, 0) + 1
    if _attempts[key] < 3:
        raise RuntimeError(f"transient failure {_attempts[key]}")
    return f"succeeded after {_attempts[key]} attempts"


@app.activity_trigger(input_name="message")
def explode(message: str) -> str:
    raise ValueError(message)


@app.activity_trigger(input_name="spec")
async def sleepy(spec: dict) -> int:
    import asyncio

    await asyncio.sleep(float(spec["seconds"]))
    return int(spec["value"]) + 1


@app.activity_trigger(input_name="spec")
def write_blob(spec: dict) -> str:
    from azure.storage.blob import BlobServiceClient

    service = BlobServiceClient.from_connection_string(os.environ["HOST_TEST_BLOB_CONNECTION"])
    name = f"item-{spec['index']:03d}.txt"
    service.get_blob_client(spec["container"], name).upload_blob(f"payload {spec['index']}", overwrite=True)
    return name


# -- SDK client operations, driven by tests/host/test_e2e_sdk_client.py ---------------------------------


@app.route(route="sdk/{op}/{instanceId?}", methods=["POST"])
@app.durable_client_input(client_name="client")
async def sdk_operation(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    from datetime import UTC, datetime

    op = req.route_params["op"]
    instance_id = req.route_params.get("instanceId", "")
    result: object = None
    if op == "suspend":
        await client.suspend(instance_id, "pause")
    elif op == "resume":
        await client.resume(instance_id, "go")
    elif op == "restart":
        result = await client.restart(instance_id, restart_with_new_instance_id=False)
    elif op == "purge":
        result = (await client.purge_instance_history(instance_id)).instances_deleted
    elif op == "purge_by":
        purged = await client.purge_instance_history_by(
            created_time_from=datetime(2000, 1, 1, tzinfo=UTC),
            runtime_status=[df.OrchestrationRuntimeStatus.Completed],
        )
        result = purged.instances_deleted
    elif op == "status_by":
        found = await client.get_status_by(runtime_status=[df.OrchestrationRuntimeStatus.Running])
        result = sorted(s.instance_id for s in found)
    elif op == "payload":
        result = client.create_http_management_payload(instance_id)
    return func.HttpResponse(json.dumps({"result": result}, default=str), mimetype="application/json")


@app.orchestration_trigger(context_name="context")
def logged(context: df.DurableOrchestrationContext):
    import logging

    for step in range(3):
        logging.getLogger("sample.logged").info("logged-orchestrator step %s", step)
        yield context.call_activity("double", step)
    return "logged"
