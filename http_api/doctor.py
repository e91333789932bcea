"""``GET /api/doctor?tenantId=...[&source=graph|exchange|all][&timeoutSeconds=N]`` (function auth): the read-only
preflight (``shared.doctor``) answered as JSON, one result per probe.

The trigger is time-bounded: by default 200 s, under the 230 s an Azure front end waits for an HTTP answer. A bad
parameter is a 400 naming it; nothing is probed then.

The doctor's Graph query and Exchange searches count against the tenant's limits like a collection's, so it takes a
slot of the tenant budget of each source it probes (the budget of the tenant's GUID, as collections do: a domain is
resolved first) and holds it, renewed, while it runs. When every slot is held it waits in the budget's queue, first
in first out with the collections' lanes, for at most half its time, and its answer says how long it waited
(``budget``); if no slot came it answers 503 and probes nothing. The slot is asked for the way a lane asks, through
signals and the entity's state (``http_api.budget_slots``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import azure.durable_functions as df
import azure.functions as func

from http_api.budget_slots import BudgetToken, Slot, SlotCredits, no_token, quota_refusal, run_holding
from http_api.common import ApiResponse, DurableClient, json_answer
from http_api.tenants import guid_or_error, resolver_for
from shared.budget.wire import collection_of
from shared.doctor import SOURCES, run_doctor
from shared.doctor.resubmit import counting
from shared.doctor.sources import chosen
from shared.errors import ConfigError
from shared.requests.validation import InvalidRequest, validate_tenant_id
from shared.settings import Settings

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


async def doctor_response(
    params: Mapping[str, str],
    env: Mapping[str, str],
    client: DurableClient | None = None,
    *,
    budget_token: BudgetToken = no_token,
) -> DoctorResponse:
    """Validate the query parameters, take budget slots, run the doctor, answer its report (200 even when probes
    failed: it ran). Without a client (or a budget), the doctor runs without slots. ``budget_token`` gives the token
    the budget entity expects with the operations of the doctor's holder."""
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
    began = time.monotonic()
    slots = await _slots(client, env, tenant, source, budget_token)
    if isinstance(slots, DoctorResponse):
        return slots
    try:
        for slot in slots:
            if not await slot.acquire(timeout / 2 - (time.monotonic() - began)):
                if slot.quota_until:
                    return DoctorResponse(503, quota_refusal(slot, slots))
                busy = {
                    "error": {
                        "field": "tenantId",
                        "rule": "budget_busy",
                        "message": f"every {slot.source} slot of the tenant budget stayed held for "
                        f"{slot.waited:.0f} s (collections running); nothing was probed, try again later",
                    },
                    "budget": {s.source: s.report() for s in slots},
                }
                return DoctorResponse(503, busy)
        left = timeout - (time.monotonic() - began)
        graph = next((slot for slot in slots if slot.submits), None)
        credits = SlotCredits(graph, asyncio.get_running_loop()) if graph is not None else None
        with counting(credits):  # each query the doctor submits after its first takes one more credit
            report = await run_holding(slots, lambda: run_doctor(env, tenant, source, budget_seconds=left))
    finally:
        for slot in slots:
            if slot.granted:
                await slot.release()
    return DoctorResponse(200, {**report.to_json(), "budget": {s.source: s.report() for s in slots}})


async def _slots(
    client: DurableClient | None, env: Mapping[str, str], tenant: str, source: str, budget_token: BudgetToken
) -> list[Slot] | DoctorResponse:
    """A slot for each probed source whose budget is on, keyed by the tenant's GUID; none when the settings or the
    look-up fail (the doctor then reports that, and signs in to nothing)."""
    if client is None:
        return []
    try:
        settings = Settings.from_env(env)
    except ConfigError:
        return []
    probed = [doctor.name for doctor in chosen(source) if settings.budget(doctor.name).enabled]
    if not probed:
        return []
    guid = await guid_or_error(resolver_for(settings), tenant)
    if isinstance(guid, ApiResponse):
        if guid.status == 400:
            return DoctorResponse(400, guid.body)
        return []  # the authority cannot be asked: the doctor's sign-in probes say so, and nothing reaches the APIs
    slots = [Slot(client, guid, s, settings.budget(s)) for s in probed]
    try:
        for slot in slots:
            slot.token = budget_token(collection_of(slot.holder), "")
    except ConfigError:  # no COLLECTOR_BUDGET_SECRET on Azure: the budget refuses every operation, take no slot
        return []
    return slots


@bp.route(route="doctor", methods=["GET"], trigger_arg_name="req")  # type: ignore[untyped-decorator]
@bp.durable_client_input(client_name="client")  # type: ignore[untyped-decorator]
async def doctor(req: func.HttpRequest, client: df.DurableOrchestrationClient) -> func.HttpResponse:
    budget_token: BudgetToken = no_token
    with contextlib.suppress(ConfigError):  # bad settings: the doctor's settings probe names them
        budget_token = Settings.from_env(os.environ).budget_token
    result = await doctor_response(req.params, os.environ, client, budget_token=budget_token)
    return json_answer(result.status, result.body)
