"""The Durable extension's HTTP management API, served against any ``DurableEngine``.

One handler serves both the public webhooks (``/runtime/webhooks/durabletask/...``) and the RPC base URL
the SDK client calls, exactly like the extension's ``HttpApiHandler``: same routes, query parameters,
status codes and JSON shapes. Engine calls are synchronous, so they run in worker threads.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import unquote

from aiohttp import web

from durable_local.engine_api import DurableEngine, InstanceStatus
from durable_local.errors import (
    FunctionNotFoundError,
    InstanceExistsError,
    InstanceNotFoundError,
    InvalidInstanceStateError,
)
from durable_local.host.client_binding import management_urls
from durable_local.host.entity_api import EntityHttpApi
from durable_local.host.error_json import error_response
from durable_local.host.keys import HostKeys
from durable_local.host.query import query_bool, query_float, query_int, query_of, query_statuses, query_time
from durable_local.host.status_json import status_payload
from durable_local.model import RuntimeStatus
from durable_local.ports import InstanceQuery

logger = logging.getLogger(__name__)

_RUNNING = (RuntimeStatus.RUNNING, RuntimeStatus.PENDING, RuntimeStatus.CONTINUED_AS_NEW, RuntimeStatus.SUSPENDED)


class DurableHttpApi:
    """Routes a path below the webhook (or RPC) base to the extension's operations."""

    def __init__(self, engine: DurableEngine, *, base_url: Callable[[], str], keys: HostKeys) -> None:
        self._engine = engine
        self._base_url = base_url
        self._keys = keys
        self._entities = EntityHttpApi(engine)

    async def handle(self, request: web.Request, tail: str) -> web.StreamResponse:
        segments = [unquote(part) for part in tail.strip("/").split("/")] if tail.strip("/") else []
        method = request.method.upper()
        # The extension matches its routes with ASP.NET's TemplateMatcher: literals in any case.
        literal = segments[0].lower() if segments else ""
        try:
            if literal == "entities":
                return await self._entities.handle(request, segments[1:])
            if literal == "orchestrators" and len(segments) in (2, 3):
                if method != "POST":
                    return web.Response(status=404)
                return await self._start(request, segments[1], segments[2] if len(segments) == 3 else None)
            if literal != "instances":
                return web.Response(status=404)
            if len(segments) == 1:
                if method == "GET":
                    return await self._list(request)
                if method == "DELETE":
                    return await self._purge_many(request)
                return web.Response(status=404)
            instance_id = segments[1]
            if len(segments) == 2:
                if method == "GET":
                    return await self._status(request, instance_id)
                if method == "DELETE":
                    return await self._purge(instance_id)
                return web.Response(status=404)
            if method != "POST":
                return web.Response(status=404)
            operation = segments[2].lower()
            if operation == "raiseevent" and len(segments) == 4:
                return await self._raise_event(request, instance_id, segments[3])
            if len(segments) == 3 and operation in ("terminate", "suspend", "resume"):
                return await self._control(request, instance_id, operation)
            if len(segments) == 3 and operation == "restart":
                return await self._restart(request, instance_id)
            if len(segments) == 3 and operation == "rewind":
                return error_response(501, "Rewind is not supported by the local engine.")
            return web.Response(status=404)
        except (ValueError, FunctionNotFoundError) as exc:
            return error_response(400, "One or more of the arguments submitted is incorrect", exc)
        except Exception as exc:
            # The tail, not request.path: the RPC base path carries the per-process rpc token (a secret).
            logger.exception("durable HTTP API %s /%s failed", method, tail.strip("/"))
            return error_response(500, "Something went wrong while processing your request", exc)

    # -- start / restart ---------------------------------------------------------------------------

    async def _start(self, request: web.Request, name: str, instance_id: str | None) -> web.StreamResponse:
        body = await request.text()
        input_json: str | None = None
        if body:
            try:
                json.loads(body)
            except (ValueError, RecursionError) as exc:  # too deep for Python's decoder is invalid input, not a 500
                return error_response(400, "Invalid JSON content", exc)
            input_json = body
        try:
            new_id = await asyncio.to_thread(
                self._engine.start_new, name, instance_id=instance_id or None, input_json=input_json
            )
        except InstanceExistsError as exc:
            # HandleStartOrchestratorRequestAsync catches only JsonReaderException: DTFx's
            # OrchestrationAlreadyExistsException (an InvalidOperationException) reaches the handler's catch-all.
            return error_response(500, "Something went wrong while processing your request", exc)
        except FunctionNotFoundError as exc:
            return error_response(400, str(exc), exc)
        return await self._created(request, new_id)

    async def _restart(self, request: web.Request, instance_id: str) -> web.StreamResponse:
        flag = query_bool(query_of(request).get("restartWithNewInstanceId"))
        try:
            new_id = await asyncio.to_thread(
                self._engine.restart, instance_id, restart_with_new_instance_id=True if flag is None else flag
            )
        except InstanceNotFoundError as exc:
            # The extension's RestartAsync throws ArgumentException for an unknown id, which its handler answers
            # with 400 (not 404).
            return error_response(400, "InstanceId does not match a valid orchestration instance.", exc)
        except InstanceExistsError as exc:
            # RestartAsync starts the same id again: the same exception, not caught by the restart handler either.
            return error_response(500, "Something went wrong while processing your request", exc)
        return await self._created(request, new_id)

    async def _created(self, request: web.Request, instance_id: str) -> web.StreamResponse:
        timeout = query_float(query_of(request).get("timeout"))
        interval = query_float(query_of(request).get("pollingInterval"))
        if timeout is not None and interval is not None:
            status = await asyncio.to_thread(self._engine.wait_for_completion, instance_id, timeout)
            if status is not None and status.runtime_status == RuntimeStatus.COMPLETED:
                return web.Response(status=200, text=status.output or "null", content_type="application/json")
            if status is not None and status.runtime_status.is_terminal:
                # As the extension: the full status request (input, showHistory... from the query), not the
                # input-less status the wait polled.
                return await self._status(request, instance_id)
        return self.check_status_response(instance_id)

    def check_status_response(self, instance_id: str) -> web.Response:
        urls = management_urls(self._base_url(), self._engine.hub_name, self._keys, instance_id)
        urls.pop("rewindPostUri")
        response = web.json_response(urls, status=202)
        response.headers["Location"] = urls["statusQueryGetUri"]
        response.headers["Retry-After"] = "10"
        return response

    # -- status / list ------------------------------------------------------------------------------

    async def _status(self, request: web.Request, instance_id: str) -> web.StreamResponse:
        show_history = query_bool(query_of(request).get("showHistory")) or False
        show_input = query_bool(query_of(request).get("showInput"))
        status = await asyncio.to_thread(
            self._engine.get_status,
            instance_id,
            show_history=show_history,
            show_input=True if show_input is None else show_input,
        )
        if status is None:
            return web.Response(status=404)
        return self._status_response(request, status, show_input=show_input is not False)

    def _status_response(
        self, request: web.Request, status: InstanceStatus, *, show_input: bool = True
    ) -> web.Response:
        history_output = query_bool(query_of(request).get("showHistoryOutput")) or False
        payload = status_payload(status, show_input=show_input, show_history_output=history_output)
        code = 200
        if status.runtime_status in _RUNNING:
            code = 202
        elif status.runtime_status == RuntimeStatus.FAILED and query_bool(
            query_of(request).get("returnInternalServerErrorOnFailure")
        ):
            code = 500
        response = web.json_response(payload, status=code)
        if code == 202:
            # The public base, not request.url: that carries whatever Host header the caller sent.
            response.headers["Location"] = self._base_url() + request.raw_path
            response.headers["Retry-After"] = "5"
        return response

    async def _list(self, request: web.Request) -> web.StreamResponse:
        query = InstanceQuery(
            runtime_status=query_statuses(query_of(request).getall("runtimeStatus", [])),
            created_from=query_time(query_of(request).get("createdTimeFrom")),
            created_to=query_time(query_of(request).get("createdTimeTo")),
            instance_id_prefix=query_of(request).get("instanceIdPrefix") or None,
            continuation_token=request.headers.get("x-ms-continuation-token") or None,
        )
        top = query_int(query_of(request).get("top"))
        if top is not None and top > 0:
            query.page_size = top
        show_input = query_bool(query_of(request).get("showInput"))
        statuses, token = await asyncio.to_thread(self._engine.query, query)
        body = [status_payload(s, show_input=show_input is not False) for s in statuses]
        response = web.json_response(body, status=200)
        # HttpApiHandler always adds the header; with no next page the token is null, which .NET's
        # HttpHeaders.Add stores as an empty value (the header is sent, empty).
        response.headers["x-ms-continuation-token"] = token or ""
        return response

    # -- purge ---------------------------------------------------------------------------------------

    async def _purge(self, instance_id: str) -> web.StreamResponse:
        # HttpApiHandler.HandleDeleteHistoryByIdRequestAsync: 404 for an unknown id, else purge whatever the
        # status (the Azure Storage tracking store deletes a running instance too).
        status = await asyncio.to_thread(self._engine.get_status, instance_id, show_input=False)
        if status is None:
            return web.Response(status=404)
        deleted = await asyncio.to_thread(self._engine.purge, instance_id)
        return web.json_response({"instancesDeleted": 1 if deleted else 0}, status=200)

    async def _purge_many(self, request: web.Request) -> web.StreamResponse:
        created_from = query_time(query_of(request).get("createdTimeFrom"))
        if created_from is None:
            return web.json_response("Please provide value for 'createdTimeFrom' parameter.", status=400)
        created_to = query_time(query_of(request).get("createdTimeTo")) or datetime.now(UTC)
        statuses = tuple(query_statuses(query_of(request).getall("runtimeStatus", [])))
        count = await asyncio.to_thread(
            lambda: self._engine.purge_many(created_from=created_from, created_to=created_to, statuses=statuses)
        )
        if count == 0:
            return web.Response(status=404)
        return web.json_response({"instancesDeleted": count}, status=200)

    # -- events and control --------------------------------------------------------------------------

    async def _raise_event(self, request: web.Request, instance_id: str, event_name: str) -> web.StreamResponse:
        status = await asyncio.to_thread(self._engine.get_status, instance_id, show_input=False)
        if status is None:
            return web.Response(status=404)
        if status.runtime_status.is_terminal:
            return web.Response(status=410)
        if request.content_type.lower() != "application/json":
            return error_response(400, "Only application/json request content is supported")
        text = await request.text()
        try:
            data_json = json.dumps(json.loads(text)) if text.strip() else None
        except (ValueError, RecursionError) as exc:
            return error_response(400, "Invalid JSON content", exc)
        try:
            await asyncio.to_thread(self._engine.raise_event, instance_id, event_name, data_json)
        except InstanceNotFoundError:
            return web.Response(status=404)
        except InvalidInstanceStateError:
            return web.Response(status=410)
        return web.Response(status=202)

    async def _control(self, request: web.Request, instance_id: str, operation: str) -> web.StreamResponse:
        status = await asyncio.to_thread(self._engine.get_status, instance_id, show_input=False)
        if status is None:
            return web.Response(status=404)
        if status.runtime_status.is_terminal:
            return web.Response(status=410)
        reason = query_of(request).get("reason")
        action = {"terminate": self._engine.terminate, "suspend": self._engine.suspend, "resume": self._engine.resume}
        try:
            await asyncio.to_thread(action[operation], instance_id, reason)
        except InstanceNotFoundError:
            return web.Response(status=404)
        except InvalidInstanceStateError as exc:
            # Not terminal (checked above) but not in a state for this operation (resume of a running instance,
            # suspend of a suspended one): the extension's client throws InvalidOperationException, which its
            # handler answers with a 500.
            return error_response(500, "Something went wrong while processing your request", exc)
        return web.Response(status=202)
