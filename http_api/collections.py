"""HTTP triggers of the collections API (function auth level): thin wrappers over ``http_api.service``."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime

import azure.durable_functions as df
import azure.functions as func

from http_api import retry_chain, service, view
from shared import names
from shared.errors import ConfigError
from shared.settings import Settings
from shared.sinks import build_sink

bp = df.Blueprint()


def _settings() -> Settings:
    return Settings.from_env(os.environ)


def _new_id() -> str:
    return uuid.uuid4().hex


def _respond(
    req: func.HttpRequest, client: df.DurableOrchestrationClient, result: service.ApiResponse
) -> func.HttpResponse:
    body = dict(result.body)
    if result.instance_id is not None:
        links = client.get_client_response_links(req, result.instance_id)
        base = req.url.split("/api/", 1)[0]
        body = {**links, **body, "summaryUri": f"{base}/api/collections/{result.instance_id}"}
    return func.HttpResponse(json.dumps(body), status_code=result.status, mimetype="application/json")


def _config_error(exc: ConfigError) -> func.HttpResponse:
    body = {"error": {"field": exc.setting, "rule": "config", "message": str(exc)}}
    return func.HttpResponse(json.dumps(body), status_code=500, mimetype="application/json")


@bp.route(route="collections", methods=["POST"], trigger_arg_name="req")  # type: ignore[untyped-decorator]
@bp.durable_client_input(client_name="client")  # type: ignore[untyped-decorator]
async def collections_start(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    try:
        settings = _settings()
    except ConfigError as exc:
        return _config_error(exc)
    try:
        sink = build_sink(settings)
    except ConfigError as exc:
        return _config_error(exc)
    try:  # the collection's budget token needs COLLECTOR_BUDGET_SECRET on Azure
        result = await service.start_collection(client, req.get_body(), settings, datetime.now(UTC), _new_id, sink=sink)
    except ConfigError as exc:
        return _config_error(exc)
    return _respond(req, client, result)


@bp.route(route="collections/{id}", methods=["GET"], trigger_arg_name="req")  # type: ignore[untyped-decorator]
@bp.durable_client_input(client_name="client")  # type: ignore[untyped-decorator]
async def collections_summary(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    collection_id = req.route_params.get("id", "")
    if collection_id.lower() == view.LIST_SEGMENT:
        # The Functions host may try this route before the literal collections/view one (see http_api/view.py).
        return view.list_page()
    if not names.is_safe_id(collection_id):
        return _respond(
            req, client, service.ApiResponse(400, {"error": {"field": "id", "rule": "format", "message": "bad id"}})
        )
    return _respond(req, client, await service.collection_summary(client, collection_id))


@bp.route(route="collections/{id}/retry-failed", methods=["POST"], trigger_arg_name="req")  # type: ignore[untyped-decorator]
@bp.durable_client_input(client_name="client")  # type: ignore[untyped-decorator]
async def collections_retry_failed(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    collection_id = req.route_params.get("id", "")
    if not names.is_safe_id(collection_id):
        return _respond(
            req, client, service.ApiResponse(400, {"error": {"field": "id", "rule": "format", "message": "bad id"}})
        )
    try:
        settings = _settings()
        sink = build_sink(settings)
    except ConfigError as exc:
        return _config_error(exc)
    try:
        result = await retry_chain.retry_failed(
            client,
            collection_id,
            datetime.now(UTC),
            sink,
            retention_days=settings.retention_days,
            budget_token=settings.budget_token,
        )
    except ConfigError as exc:
        return _config_error(exc)
    return _respond(req, client, result)
