"""HTTP triggers of the collections API (function auth level): thin wrappers over ``http_api.service``."""

from __future__ import annotations

import os
import uuid

import azure.durable_functions as df
import azure.functions as func

from http_api import cancel, retry_chain, service, view
from http_api.common import answer_with_links, config_error_answer, json_answer
from http_api.tenants import resolver_for
from shared import names
from shared.clock import utc_now
from shared.errors import ConfigError
from shared.settings import Settings
from shared.sinks import ChunkSink, build_sink

bp = df.Blueprint()


def _settings() -> Settings:
    return Settings.from_env(os.environ)


def _new_id() -> str:
    return uuid.uuid4().hex


def _respond(
    req: func.HttpRequest, client: df.DurableOrchestrationClient, result: service.ApiResponse
) -> func.HttpResponse:
    del req  # its URL carries the caller's Host header: the links come from the binding (``answer_with_links``)
    return answer_with_links(client, result, "collections")


def _config_error(exc: ConfigError) -> func.HttpResponse:
    return config_error_answer(exc)


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
        result = await service.start_collection(
            client, req.get_body(), settings, utc_now(settings), _new_id, sink=sink, resolve=resolver_for(settings)
        )
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
    return _respond(req, client, await service.collection_summary(client, collection_id, _sink_or_none))


def _sink_or_none() -> ChunkSink | None:
    try:
        return build_sink(_settings())
    except ConfigError:
        return None


def _collection_edge(req: func.HttpRequest) -> tuple[str, Settings, ChunkSink] | func.HttpResponse:
    """The route's collection id (checked), the settings and the output store, or the answer that refuses them."""
    collection_id = req.route_params.get("id", "")
    if not names.is_safe_id(collection_id):
        return json_answer(400, {"error": {"field": "id", "rule": "format", "message": "bad id"}})
    try:
        settings = _settings()
        return collection_id, settings, build_sink(settings)
    except ConfigError as exc:
        return _config_error(exc)


@bp.route(route="collections/{id}/cancel", methods=["POST"], trigger_arg_name="req")  # type: ignore[untyped-decorator]
@bp.durable_client_input(client_name="client")  # type: ignore[untyped-decorator]
async def collections_cancel(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    edge = _collection_edge(req)
    if isinstance(edge, func.HttpResponse):
        return edge
    collection_id, settings, sink = edge
    result = await cancel.cancel_collection(
        client,
        collection_id,
        lambda: utc_now(settings),
        sink,
        budget_token=settings.budget_token,
        secret=settings.budget_secret or "",
    )
    return _respond(req, client, result)


@bp.route(route="collections/{id}/retry-failed", methods=["POST"], trigger_arg_name="req")  # type: ignore[untyped-decorator]
@bp.durable_client_input(client_name="client")  # type: ignore[untyped-decorator]
async def collections_retry_failed(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    edge = _collection_edge(req)
    if isinstance(edge, func.HttpResponse):
        return edge
    collection_id, settings, sink = edge
    try:
        result = await retry_chain.retry_failed(
            client, collection_id, utc_now(settings), sink, settings=settings, resolve=resolver_for(settings)
        )
    except ConfigError as exc:
        return _config_error(exc)
    return _respond(req, client, result)
