"""Finalize activity: writes the collection manifest (thin trigger over ``activities.bodies``)."""

from __future__ import annotations

import azure.durable_functions as df

from activities import bodies, runtime
from shared import names
from shared.errors import CollectorError
from shared.models import ActivityResult, JsonDict

bp = df.Blueprint()


@bp.activity_trigger(input_name="payload", activity=names.ACTIVITY_FINALIZE)  # type: ignore[untyped-decorator]
def finalize_activity(payload: JsonDict) -> JsonDict:
    try:
        sink = runtime.sink()
    except CollectorError as exc:
        return ActivityResult.failure(exc).to_json()
    return bodies.finalize(sink, payload)
