"""Graph audit-query chunk activities (thin triggers over ``activities.bodies``)."""

from __future__ import annotations

import azure.durable_functions as df

from activities import bodies, runtime
from shared import names
from shared.errors import CollectorError
from shared.models import ActivityResult, JsonDict

bp = df.Blueprint()


def _api_or_error(payload: JsonDict) -> tuple[object, JsonDict | None]:
    try:
        return runtime.query_api(str(payload["tenantId"])), None
    except CollectorError as exc:  # bad settings doom the collection with the setting named, never a crash
        return None, ActivityResult.failure(exc).to_json()


@bp.activity_trigger(input_name="payload", activity=names.ACTIVITY_GRAPH_SUBMIT)  # type: ignore[untyped-decorator]
def graph_submit_activity(payload: JsonDict) -> JsonDict:
    api, error = _api_or_error(payload)
    try:
        sink = runtime.sink()
    except CollectorError as exc:
        return ActivityResult.failure(exc).to_json()
    return error or bodies.graph_submit(api, sink, payload)  # type: ignore[arg-type]


@bp.activity_trigger(input_name="payload", activity=names.ACTIVITY_GRAPH_COLLECT)  # type: ignore[untyped-decorator]
def graph_collect_activity(payload: JsonDict) -> JsonDict:
    api, error = _api_or_error(payload)
    try:
        sink = runtime.sink()
    except CollectorError as exc:
        return ActivityResult.failure(exc).to_json()
    return error or bodies.graph_collect(api, sink, payload)  # type: ignore[arg-type]


@bp.activity_trigger(input_name="payload", activity=names.ACTIVITY_GRAPH_DELETE)  # type: ignore[untyped-decorator]
def graph_delete_activity(payload: JsonDict) -> JsonDict:
    api, error = _api_or_error(payload)
    return error or bodies.graph_delete(api, payload)  # type: ignore[arg-type]
