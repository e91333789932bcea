"""Exchange ``Search-UnifiedAuditLog`` chunk activity (thin trigger over ``activities.bodies``)."""

from __future__ import annotations

import azure.durable_functions as df

from activities import bodies, runtime
from shared import names
from shared.errors import CollectorError
from shared.log_fields import chunk_context
from shared.models import ActivityResult, JsonDict

bp = df.Blueprint()


@bp.activity_trigger(input_name="payload", activity=names.ACTIVITY_EXCHANGE_COLLECT)  # type: ignore[untyped-decorator]
def exchange_collect_activity(payload: JsonDict) -> JsonDict:
    with chunk_context(payload, source="exchange"):
        try:
            api = runtime.search_api(str(payload["tenantId"]))
            sink = runtime.sink()
        except CollectorError as exc:
            return ActivityResult.failure(exc).to_json()
        return bodies.exchange_collect(api, sink, payload)
