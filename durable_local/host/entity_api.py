"""The ``entities/{name}/{key}`` routes of the Durable HTTP API (the extension's ``HttpApiHandler``).

* ``GET entities/{name}/{key}`` (``$`` = the empty key): 200 + the entity state JSON; 404 when it does not exist.
* ``GET entities[/{name}]`` (``lastOperationTimeFrom``, ``lastOperationTimeTo``, ``top``, ``fetchState``, header
  ``x-ms-continuation-token``): 200 + ``[{entityId: {name, key}, lastOperationTime, state}]``, the next token in
  ``x-ms-continuation-token``.
* ``POST entities/{name}/{key}?op=`` (body = the input; ``application/json`` bodies are parsed): 202; 400 for an
  unknown entity name, a bad key or unparsable JSON. ``DELETE`` sends the operation ``delete``.

The Python SDK's client uses the GET (``read_entity_state``) and the POST (``signal_entity``, which posts
``json.dumps(input)`` as JSON: the entity's ``get_input()`` decodes both levels).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from durable_local.engine_api import DurableEngine
from durable_local.entities.client import EntityMetadata, EntityQuery
from durable_local.entities.ids import EntityId
from durable_local.errors import FunctionNotFoundError
from durable_local.history import format_timestamp
from durable_local.host.error_json import error_response
from durable_local.host.query import query_bool, query_int, query_of, query_time

EMPTY_KEY = "$"
"""``EmptyEntityKeySymbol``: in a GET, this key means the empty string."""


class EntityHttpApi:
    def __init__(self, engine: DurableEngine) -> None:
        self._engine = engine

    async def handle(self, request: web.Request, segments: list[str]) -> web.StreamResponse:
        """``segments`` are the route segments after ``entities``."""
        if len(segments) > 2:
            return web.Response(status=404)
        name = segments[0] if segments else ""
        key = segments[1] if len(segments) == 2 else ""
        method = request.method.upper()
        try:
            if method == "GET":
                if key:
                    return await self._read(EntityId.of(name, "" if key == EMPTY_KEY else key))
                return await self._list(request, name or None)
            if method in ("POST", "DELETE"):
                return await self._signal(request, EntityId.of(name, key), method)
        except (ValueError, FunctionNotFoundError) as exc:
            return error_response(400, str(exc))
        return web.Response(status=404)

    async def _read(self, entity: EntityId) -> web.StreamResponse:
        found = await asyncio.to_thread(self._engine.read_entity_state, entity)
        if found is None:
            return web.Response(status=404)
        return web.json_response(_json_or_text(found.state), status=200)

    async def _signal(self, request: web.Request, entity: EntityId, method: str) -> web.StreamResponse:
        operation = "delete" if method == "DELETE" else query_of(request).get("op", "")
        body = await request.text()
        input_json: str | None = None
        if body:
            if request.content_type.lower() == "application/json":
                try:
                    value = json.loads(body)
                except (ValueError, RecursionError) as exc:  # too deep for Python's decoder is invalid, not a 500
                    return error_response(400, f"Could not parse JSON content: {exc}")
                input_json = json.dumps(value, separators=(",", ":"))
            else:
                input_json = json.dumps(body)  # a string input is serialised as a JSON string
        await asyncio.to_thread(self._engine.signal_entity, entity, operation, input_json)
        return web.Response(status=202)

    async def _list(self, request: web.Request, name: str | None) -> web.StreamResponse:
        query = EntityQuery(
            entity_name=name,
            last_operation_from=query_time(query_of(request).get("lastOperationTimeFrom")),
            last_operation_to=query_time(query_of(request).get("lastOperationTimeTo")) or datetime.now(UTC),
            continuation_token=request.headers.get("x-ms-continuation-token") or None,
            fetch_state=query_bool(query_of(request).get("fetchState")) or False,
        )
        top = query_int(query_of(request).get("top"))
        if top is not None and top > 0:
            query.page_size = top
        entities, token = await asyncio.to_thread(self._engine.list_entities, query)
        response = web.json_response([_entity_status(e) for e in entities], status=200)
        # HandleListEntitiesRequestAsync adds the header even for the last page (.NET writes the null token as "").
        response.headers["x-ms-continuation-token"] = token or ""
        return response


def _entity_status(entity: EntityMetadata) -> dict[str, Any]:
    """The extension's ``DurableEntityStatus``."""
    return {
        "entityId": entity.entity_id.to_json(),
        "lastOperationTime": format_timestamp(entity.last_operation_time),
        "state": None if entity.state is None else _json_or_text(entity.state),
    }


def _json_or_text(text: str | None) -> Any:
    """Entity state is expected to be JSON; otherwise the raw string (as the extension falls back)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text
