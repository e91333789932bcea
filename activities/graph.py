"""Graph audit-query chunk activities (thin triggers over ``activities.bodies``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import azure.durable_functions as df

from activities import bodies, graph_waits, runtime
from shared import names
from shared.clock import utc_now
from shared.errors import CollectorError
from shared.log_fields import chunk_context
from shared.models import ActivityResult, JsonDict
from shared.sinks import ChunkSink

bp = df.Blueprint()


def _api_or_error(payload: JsonDict) -> tuple[object, JsonDict | None]:
    try:
        return runtime.query_api(str(payload["tenantId"])), None
    except CollectorError as exc:  # bad settings doom the collection with the setting named, never a crash
        return None, ActivityResult.failure(exc).to_json()


def _api_and_sink(payload: JsonDict) -> tuple[Any, ChunkSink] | JsonDict:
    """The api and the sink for ``payload``, or the failure that building either gave."""
    api, error = _api_or_error(payload)
    if error is not None:
        return error
    try:
        return api, runtime.sink()
    except CollectorError as exc:
        return ActivityResult.failure(exc).to_json()


def _with_sink(payload: JsonDict, body: Callable[[Any, ChunkSink, JsonDict], JsonDict]) -> JsonDict:
    """``body(api, sink, payload)``, or the failure that building the api or the sink gave."""
    built = _api_and_sink(payload)
    if isinstance(built, dict):
        return built
    return body(*built, payload)


@bp.activity_trigger(input_name="payload", activity=names.ACTIVITY_GRAPH_SUBMIT)  # type: ignore[untyped-decorator]
def graph_submit_activity(payload: JsonDict) -> JsonDict:
    with chunk_context(payload, source="graph"):
        return _with_sink(payload, bodies.graph_submit)


@bp.activity_trigger(input_name="payload", activity=names.ACTIVITY_GRAPH_COLLECT)  # type: ignore[untyped-decorator]
async def graph_collect_activity(payload: JsonDict) -> JsonDict:
    """Async so that a check that waits for its query (window version 2, ``activities.graph_waits``) holds no
    worker thread while it sleeps; the checks and the export run in a thread."""
    with chunk_context(payload, source="graph"):
        built = _api_and_sink(payload)
        if isinstance(built, dict):
            return built
        api, sink = built
        return await bodies.graph_collect_async(api, sink, payload, _waiter())


def _waiter() -> graph_waits.Waiter:
    """The app's clock (moved by ``COLLECTOR_CLOCK_FILE`` on the local host's tests and benchmarks)."""
    settings = runtime.settings()
    return graph_waits.Waiter(lambda: utc_now(settings), moved=bool(settings.clock_file))


@bp.activity_trigger(input_name="payload", activity=names.ACTIVITY_GRAPH_DELETE)  # type: ignore[untyped-decorator]
def graph_delete_activity(payload: JsonDict) -> JsonDict:
    with chunk_context(payload, source="graph"):
        api, error = _api_or_error(payload)
        return error or bodies.graph_delete(api, payload)  # type: ignore[arg-type]
