"""HTTP triggers of the follows API (function auth level): thin wrappers over ``http_api.follow_service``.

* ``POST /api/follows``: start one follower per (tenant, source, filters), or find the running one;
* ``GET /api/follows[?top=N&continuationToken=...]``: every follower, a page at a time;
* ``GET /api/follows/{id}``: one follower's coverage, lag and errors;
* ``POST /api/follows/{id}/stop``: stop it cleanly (it finishes the pass it runs);
* the timer ``follow_passes_purge`` (``COLLECTOR_FOLLOW_PURGE_SCHEDULE``): purge followers' finished passes once
  their day is final (``http_api.follow_purge``).
"""

from __future__ import annotations

import logging
import os
from datetime import timedelta

import azure.durable_functions as df
import azure.functions as func

from http_api import follow_purge, follow_service
from http_api.common import ApiResponse, answer_with_links, config_error_answer, error
from http_api.instance_pages import RpcInstancePages, valid_token
from http_api.tenants import resolver_for
from shared import names
from shared.clock import utc_now
from shared.errors import ConfigError
from shared.follow.state import FOLLOW_PREFIX
from shared.settings import Settings, follow_purge_schedule
from shared.sinks import build_sink

bp = df.Blueprint()
logger = logging.getLogger(__name__)


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
    paging = _list_paging(req.params.get("top"), req.params.get("continuationToken"))
    if isinstance(paging, ApiResponse):
        return _respond(req, client, paging)
    try:
        settings = Settings.from_env(os.environ)
    except ConfigError as exc:
        return _config_error(exc)
    top, token = paging
    pages = RpcInstancePages(client)
    listed = await follow_service.list_follows(client, pages, utc_now(settings), top=top, token=token)
    return _respond(req, client, listed)


def _list_paging(top: str | None, token: str | None) -> tuple[int, str | None] | ApiResponse:
    """``top`` (1..1000, default 100) and ``continuationToken`` (as the previous answer gave it), or the 400."""
    count = follow_service.LIST_TOP
    if top not in (None, ""):
        if not top.isascii() or not top.isdigit() or not 1 <= int(top) <= follow_service.MAX_LIST_TOP:
            return error(400, "top", "range", f"top must be a whole number from 1 to {follow_service.MAX_LIST_TOP}")
        count = int(top)
    if token in (None, ""):
        return count, None
    if not valid_token(token):
        return error(400, "continuationToken", "format", "continuationToken is the value a previous answer gave")
    return count, token


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


@bp.timer_trigger(schedule=follow_purge_schedule(os.environ), arg_name="timer")  # type: ignore[untyped-decorator]
@bp.durable_client_input(client_name="client")  # type: ignore[untyped-decorator]
async def follow_passes_purge(timer: func.TimerRequest, client: df.DurableOrchestrationClient) -> None:
    """Purge followers' finished passes whose day is final (``COLLECTOR_FOLLOW_PURGE_PASSES``)."""
    del timer
    try:
        settings = Settings.from_env(os.environ)
    except ConfigError as exc:
        logger.error("follower passes not purged: %s", exc)
        return
    if not settings.follow_purge_passes:
        return
    keep = timedelta(hours=settings.follow_purge_after_hours)
    report = await follow_purge.purge_passes(client, RpcInstancePages(client), utc_now(settings), keep=keep)
    if report.purged or report.failed:
        logger.info(
            "purged %d finished follower passes of final days (%d kept, %d failed)",
            len(report.purged), report.kept, len(report.failed),
        )  # fmt: skip
