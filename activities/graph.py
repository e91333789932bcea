"""Graph audit-query chunk activities (thin triggers over ``activities.bodies``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import azure.durable_functions as df

from activities import bodies, runtime
from shared import names
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


def _with_sink(payload: JsonDict, body: Callable[[Any, ChunkSink, JsonDict], JsonDict]) -> JsonDict:
    """``body(api, sink, payload)``, or the failure that building the api or the sink gave."""
    api, error = _api_or_error(payload)
    if error is not None:
        return error
    try:
        sink = runtime.sink()
    except CollectorError as exc:
        return ActivityResult.failure(exc).to_json()
    return body(api, sink, payload)


@bp.activity_trigger(input_name="payload", activity=names.ACTIVITY_GRAPH_SUBMIT)  # type: ignore[untyped-decorator]
def graph_submit_activity(payload: JsonDict) -> JsonDict:
    with chunk_context(payload, source="graph"):
        return _with_sink(payload, bodies.graph_submit)


@bp.activity_trigger(input_name="payload", activity=names.ACTIVITY_GRAPH_COLLECT)  # type: ignore[untyped-decorator]
def graph_collect_activity(payload: JsonDict) -> JsonDict:
    with chunk_context(payload, source="graph"):
        return _with_sink(payload, bodies.graph_collect)


@bp.activity_trigger(input_name="payload", activity=names.ACTIVITY_GRAPH_DELETE)  # type: ignore[untyped-decorator]
def graph_delete_activity(payload: JsonDict) -> JsonDict:
    with chunk_context(payload, source="graph"):
        api, error = _api_or_error(payload)
        return error or bodies.graph_delete(api, payload)  # type: ignore[arg-type]
