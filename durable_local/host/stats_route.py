"""``GET /admin/host/stats``: the engine's counters as JSON (admin level, like ``/admin/host/status``).

Not a Functions host route: the local host's own, for benchmarks that compare what the engine did (orchestration and
entity episodes, past events replayed, entity operations, what the execution cache saved) between two runs. The
counters only grow while the host runs; a caller takes the difference of two reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from durable_local.engine_api import DurableEngine
from durable_local.host.keys import HostKeys

STATS_PATH = "/admin/host/stats"

_LEFT_OUT = frozenset({"activities_in_flight_at_start"})
"""One value per activity ever started: the tests read it from ``Engine.stats()``; it is not worth sending."""


def stats_handler(engine: DurableEngine, keys: HostKeys) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def stats(request: web.Request) -> web.StreamResponse:
        if not keys.allows("admin", request.query, request.headers):
            return web.Response(status=401)
        read: Callable[[], dict[str, Any]] | None = getattr(engine, "stats", None)
        if read is None:
            return web.Response(status=404)
        counters = {name: value for name, value in read().items() if name not in _LEFT_OUT}
        response = web.json_response(counters)
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    return stats
