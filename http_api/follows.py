"""HTTP triggers of the follows API (function auth level): thin wrappers over ``http_api.follow_service``.

* ``POST /api/follows``: start one follower per (tenant, source, filters), or find the running one;
* ``GET /api/follows``: the followers; ``GET /api/follows/{id}``: one follower's coverage, lag and errors;
* ``POST /api/follows/{id}/stop``: stop it cleanly (it finishes the pass it runs).
"""

from __future__ import annotations

import os

import azure.durable_functions as df
import azure.functions as func

from http_api import follow_service
from http_api.common import ApiResponse, answer_with_links, config_error_answer, error
from http_api.tenants import resolver_for
from shared import names
from shared.clock import utc_now
from shared.errors import ConfigError
from shared.follow.state import FOLLOW_PREFIX
from shared.settings import Settings
from shared.sinks import build_sink

bp = df.Blueprint()


def _respond(req: func.HttpRequest, client: df.DurableOrchestrationClient, result: ApiResponse) -> func.HttpResponse:
    del req  # its URL carries the caller's Host header: the links come from the binding (``answer_with_links``)
    return answer_with_links(client, result, "follows")


def _config_error(exc: ConfigError) -> func.HttpResponse:
    return config_error_answer(exc)


def _bad_id(follow: str) -> ApiResponse | None:
    if names.is_safe_id(follow) and follow.startswith(FOLLOW_PREFIX):
        return None
    return error(400, "id", "format", f"a follower id is {FOLLOW_PREFIX}<source>-<digest>")


@bp.route(route="follows", methods=["POST"], trigger_arg_name="req")  # type: ignore[untyped-decorator]
@bp.durable_client_input(client_name="client")  # type: ignore[untyped-decorator]
async def follows_start(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    try:
        settings = Settings.from_env(os.environ)
        sink = build_sink(settings)
    except ConfigError as exc:
        return _config_error(exc)
    result = await follow_service.start_follow(
        client, req.get_body(), settings, utc_now(settings), sink=sink, resolve=resolver_for(settings)
    )
    return _respond(req, client, result)


@bp.route(route="follows", methods=["GET"], trigger_arg_name="req")  # type: ignore[untyped-decorator]
@bp.durable_client_input(client_name="client")  # type: ignore[untyped-decorator]
async def follows_list(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    try:
        settings = Settings.from_env(os.environ)
    except ConfigError as exc:
        return _config_error(exc)
    return _respond(req, client, await follow_service.list_follows(client, utc_now(settings)))


@bp.route(route="follows/{id}", methods=["GET"], trigger_arg_name="req")  # type: ignore[untyped-decorator]
@bp.durable_client_input(client_name="client")  # type: ignore[untyped-decorator]
async def follows_summary(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    follow = req.route_params.get("id", "")
    bad = _bad_id(follow)
    if bad is not None:
        return _respond(req, client, bad)
    try:
        settings = Settings.from_env(os.environ)
    except ConfigError as exc:
        return _config_error(exc)
    return _respond(req, client, await follow_service.follow_summary(client, follow, utc_now(settings)))


@bp.route(route="follows/{id}/stop", methods=["POST"], trigger_arg_name="req")  # type: ignore[untyped-decorator]
@bp.durable_client_input(client_name="client")  # type: ignore[untyped-decorator]
async def follows_stop(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    follow = req.route_params.get("id", "")
    bad = _bad_id(follow)
    return _respond(req, client, bad or await follow_service.stop_follow(client, follow))
