"""``GET /api/doctor?tenantId=...[&source=graph|exchange|all][&timeoutSeconds=N]`` (function auth): the read-only
preflight (``shared.doctor``) answered as JSON, one result per probe.

The trigger is synchronous (the worker runs it on a thread) and time-bounded: by default 200 s, under the 230 s an
Azure front end waits for an HTTP answer. A bad parameter is a 400 naming it; nothing is probed then.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import azure.durable_functions as df
import azure.functions as func

from http_api.common import json_answer
from shared.doctor import SOURCES, run_doctor
from shared.validation import InvalidRequest, validate_tenant_id

bp = df.Blueprint()

DEFAULT_TIMEOUT_SECONDS = 200.0
MAX_TIMEOUT_SECONDS = 220.0
MIN_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class DoctorResponse:
    status: int
    body: dict[str, Any]


def _error(field: str, rule: str, message: str) -> DoctorResponse:
    return DoctorResponse(400, {"error": {"field": field, "rule": rule, "message": message}})


def doctor_response(params: Mapping[str, str], env: Mapping[str, str]) -> DoctorResponse:
    """Validate the query parameters, run the doctor, answer its report (200 even when probes failed: it ran)."""
    try:
        tenant = validate_tenant_id(params.get("tenantId"))
    except InvalidRequest as exc:
        return DoctorResponse(400, exc.to_json())
    source = params.get("source", "all")
    if source not in SOURCES:
        return _error("source", "choice", f"source must be one of {', '.join(SOURCES)}")
    raw_timeout = params.get("timeoutSeconds")
    timeout = DEFAULT_TIMEOUT_SECONDS
    if raw_timeout is not None:
        try:
            timeout = float(raw_timeout)
        except ValueError:
            return _error("timeoutSeconds", "type", "timeoutSeconds must be a number of seconds")
        if not MIN_TIMEOUT_SECONDS <= timeout <= MAX_TIMEOUT_SECONDS:
            return _error(
                "timeoutSeconds",
                "range",
                f"timeoutSeconds must be between {MIN_TIMEOUT_SECONDS:g} and {MAX_TIMEOUT_SECONDS:g}",
            )
    report = run_doctor(env, tenant, source, budget_seconds=timeout)
    return DoctorResponse(200, report.to_json())


@bp.route(route="doctor", methods=["GET"], trigger_arg_name="req")  # type: ignore[untyped-decorator]
def doctor(req: func.HttpRequest) -> func.HttpResponse:
    result = doctor_response(req.params, os.environ)
    return json_answer(result.status, result.body)
