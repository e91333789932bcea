"""The aiohttp application: app HTTP routes under the route prefix, the Durable webhooks and RPC base,
``/admin/host/status``, ``POST /admin/functions/{name}`` (``durable_local.host.admin``) and the home page at ``/``.
Function invocation follows the Python worker (``func.HttpRequest`` in, ``func.HttpResponse``/str/bytes out; async
handlers on the loop, sync handlers in a thread pool), under the function's retry policy
(``durable_local.host.retries``).

The home page is the Functions host's ``HomepageMiddleware``: a request for exactly ``/`` that no function answered
gets an HTML page saying the app is up (200, any method), or 204 when ``AzureWebJobsDisableHomepage`` is ``true``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote

import azure.functions as func
from aiohttp import web

from durable_local.host.admin import ADMIN_FUNCTIONS, AdminFunctions
from durable_local.host.client_binding import RPC_PATH, WEBHOOK_PATH, client_binding_json
from durable_local.host.invoke import InvocationContext, log_invocation
from durable_local.host.keys import HostKeys, keys_equal
from durable_local.host.loader import HttpFunction, LoadedApp
from durable_local.host.retries import Attempts
from durable_local.host.webhooks import DurableHttpApi

logger = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class AppServer:
    """Builds the ``web.Application`` for one loaded app."""

    def __init__(
        self,
        app: LoadedApp,
        api: DurableHttpApi,
        *,
        hub_name: str,
        route_prefix: str,
        keys: HostKeys,
        base_url: Callable[[], str],
        rpc_base_url: Callable[[], str] | None = None,
        sync_workers: int = 16,
        admin: AdminFunctions | None = None,
        admin_routes: Mapping[str, Handler] | None = None,
    ) -> None:
        self._app = app
        self._api = api
        self._hub_name = hub_name
        self._prefix = route_prefix.strip("/")
        self._keys = keys
        self._base_url = base_url
        """The public base (``LocalHost.public_base_url``): URLs in answers and ``req.url``, never the Host header."""
        self._rpc_base_url = rpc_base_url or base_url
        self._pool = ThreadPoolExecutor(max_workers=sync_workers, thread_name_prefix="http-fn")
        self._admin = admin
        self._admin_routes = dict(admin_routes or {})
        """More of the host's own GET routes (e.g. ``stats_route``), matched before the app's."""

    def build(self) -> web.Application:
        application = web.Application(client_max_size=100 * 1024 * 1024)
        application.router.add_route("GET", "/admin/host/status", self._host_status)
        for path, handler in self._admin_routes.items():
            application.router.add_route("GET", path, handler)
        application.router.add_route("*", RPC_PATH + "/{token}/{tail:.*}", self._rpc)
        application.router.add_route("*", WEBHOOK_PATH + "/{tail:.*}", self._webhook)
        application.router.add_route("*", "/{tail:.*}", self._functions)
        application.on_cleanup.append(self._close)
        return application

    async def _close(self, _: web.Application) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _host_status(self, request: web.Request) -> web.StreamResponse:
        if not self._keys.allows("admin", request.query, request.headers):
            return web.Response(status=401)
        return nosniff(web.json_response({"state": "Running", "functions": self._app.function_names}))

    async def _rpc(self, request: web.Request) -> web.StreamResponse:
        token = request.match_info["token"]
        if not (self._keys.required and keys_equal(token, self._keys.rpc_token)):
            return web.Response(status=404)
        return nosniff(await self._api.handle(request, _raw_tail(request, f"{RPC_PATH}/{token}")))

    async def _webhook(self, request: web.Request, tail: str | None = None) -> web.StreamResponse:
        if not self._keys.allows("system", request.query, request.headers):
            return web.Response(status=401)
        return nosniff(await self._api.handle(request, _raw_tail(request, WEBHOOK_PATH) if tail is None else tail))

    async def _functions(self, request: web.Request) -> web.StreamResponse:
        raw_path = request.raw_path.split("?", 1)[0]
        # ASP.NET routing compares literals case-insensitively (the webhook path, the route prefix, the routes);
        # aiohttp's router does not, so the webhook path in another case lands here.
        lowered = raw_path.lower()
        if lowered.startswith(WEBHOOK_PATH + "/") and not lowered.startswith(RPC_PATH + "/"):
            return await self._webhook(request, raw_path[len(WEBHOOK_PATH) :])
        name = raw_path[len(ADMIN_FUNCTIONS) :]
        admin_run = lowered.startswith(ADMIN_FUNCTIONS) and request.method.upper() == "POST" and "/" not in name
        if admin_run and name and self._admin is not None:  # MVC routes come before the functions' routes on the host
            return await self._admin.invoke(request, unquote(name))
        answer = await self._function_route(request, raw_path)
        if answer is None and raw_path == "/":
            return _homepage()
        return answer or web.Response(status=404)

    async def _function_route(self, request: web.Request, raw_path: str) -> web.StreamResponse | None:
        """The answer of the app's function for this request, or None when no function route matches."""
        prefix = f"/{self._prefix}".lower() if self._prefix else ""
        lowered = raw_path.lower()
        if prefix and not (lowered == prefix or lowered.startswith(prefix + "/")):
            return None
        relative = raw_path[len(prefix) :].strip("/")
        method = request.method.upper()
        for function in self._app.http:
            values = function.route.match(relative)
            if values is None or method not in function.methods:
                continue
            if not self._keys.allows(function.auth_level, request.query, request.headers):
                return web.Response(status=401)
            return await self._invoke(request, function, values)
        return None

    async def _invoke(self, request: web.Request, function: HttpFunction, values: dict[str, str]) -> web.StreamResponse:
        headers: dict[str, str] = {}
        for name, value in request.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        body = await request.read()
        attempts = Attempts(function.name, function.retry)
        while True:
            started = time.perf_counter()
            # The host buffers the body and rewinds it: every attempt gets the same request.
            http_request = func.HttpRequest(
                method=request.method.upper(),
                url=self._base_url() + request.raw_path,
                headers=headers,
                params={key: request.query[key] for key in request.query},
                route_params=values,
                body=body,
            )
            try:
                response = await self._attempt(function, http_request, attempts)
            except Exception as exc:
                logger.exception("Function '%s' raised", function.name)
                log_invocation(function.name, started, f"Failed: {type(exc).__name__}: {exc}")
                delay = attempts.failed(exc)
                if delay is None:
                    return web.Response(status=500, text=f"Exception while executing function: {function.name}")
                await asyncio.sleep(delay)
                continue
            log_invocation(function.name, started, f"Succeeded, status {response.status}")
            return response

    async def _attempt(
        self, function: HttpFunction, http_request: func.HttpRequest, attempts: Attempts
    ) -> web.Response:
        kwargs: dict[str, Any] = {function.request_parameter: http_request}
        for client in function.clients:
            kwargs[client.parameter] = client_binding_json(
                self._base_url(), self._hub_name, self._keys, task_hub=client.task_hub, rpc_base=self._rpc_base_url()
            )
        if function.context_parameter:
            kwargs[function.context_parameter] = InvocationContext(
                function.name, str(self._app.app_dir), retry_context=attempts.context
            )
        if function.is_async:
            result = await function.handler(**kwargs)
        else:
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(self._pool, functools.partial(function.handler, **kwargs))
        return to_web_response(result)


HOMEPAGE = """<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Your Azure Function App is up and running.</title></head>
<body>
<h1>Your Functions app is up and running</h1>
<p>Served by durable_local, the local Durable Functions host. The app's HTTP functions are under its route prefix;
the Durable HTTP API is under <code>/runtime/webhooks/durabletask</code>.</p>
</body>
</html>
"""


def _homepage() -> web.Response:
    """``HomepageMiddleware``: the page, or 204 No Content when ``AzureWebJobsDisableHomepage`` is ``true``."""
    # The host's setting name, as written (app settings are environment variables; Linux keeps their case).
    if os.environ.get("AzureWebJobsDisableHomepage", "").strip().lower() == "true":  # noqa: SIM112
        return web.Response(status=204)
    return web.Response(status=200, text=HOMEPAGE, content_type="text/html")


def nosniff(response: web.StreamResponse) -> web.StreamResponse:
    """The host's own JSON answers tell browsers not to guess another type (``X-Content-Type-Options``). Function
    answers are left as the functions made them, as the Functions host leaves them."""
    if response.content_type == "application/json":
        response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def _raw_tail(request: web.Request, base: str) -> str:
    raw_path = request.raw_path.split("?", 1)[0]
    return raw_path[len(base) :] if raw_path.startswith(base) else request.match_info.get("tail", "")


def to_web_response(result: object) -> web.Response:
    """What the worker sends back for a ``$return`` HTTP output."""
    if isinstance(result, func.HttpResponse):
        headers = {name: value for name, value in result.headers.items()}
        if not any(name.lower() == "content-type" for name in headers):
            headers["Content-Type"] = f"{result.mimetype}; charset={result.charset}"
        return web.Response(status=result.status_code, body=result.get_body(), headers=headers)
    if result is None:
        return web.Response(status=204)
    if isinstance(result, str):
        return web.Response(status=200, text=result)
    if isinstance(result, bytes | bytearray):
        return web.Response(status=200, body=bytes(result))
    raise TypeError(f"an HTTP function must return func.HttpResponse, str or bytes, not {type(result).__name__}")
