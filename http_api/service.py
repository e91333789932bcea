"""The collections HTTP API as plain async functions over a Durable client (the triggers stay one-liners).

Responses are ``(status_code, body)`` pairs plus, for starts, the client's check-status payload, so the logic is
testable without the Functions host.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from http_api import follow_routes, live, reuse
from http_api.chain_claim import claim_link
from http_api.common import ACTIVE, ApiResponse, DurableClient, cancelled_reason, orchestration_input
from http_api.common import error as _error
from http_api.common import json_field as _json_field
from http_api.common import runtime_status as _runtime_status
from http_api.plan_report import plan_report, tenant_quota
from http_api.request_json import parse_request_json
from http_api.tenants import TenantResolver, guid_or_error
from shared import names
from shared.chain_claim import ROOT
from shared.errors import CollectorError
from shared.fixes import with_fix
from shared.log_fields import log_event
from shared.models import JsonDict
from shared.requests.validation import CollectionRequest, InvalidRequest
from shared.settings import Settings
from shared.sinks.base import ChunkSink
from shared.sources.registry import source as source_named
from shared.sources.registry import status_sections, validate_collection_request
from shared.timeline.latency import latency_report, started_at_of
from shared.timeline.planning import ChunkPlan
from shared.timeline.retention import retention_report
from shared.window.machine import CollectionSpec

logger = logging.getLogger(__name__)

__all__ = [
    "ApiResponse",
    "DurableClient",
    "collection_summary",
    "orchestration_input",
    "start_collection",
]


async def start_collection(
    client: DurableClient,
    body: bytes,
    settings: Settings,
    now: datetime,
    new_id: Callable[[], str],
    *,
    sink: ChunkSink,
    resolve: TenantResolver,
) -> ApiResponse:
    """Validate, plan, start (or find the existing collection with the same id and the same request).

    An id whose instance does not exist but whose output prefix holds objects is refused (``output_exists``): the
    new run would pick up the old run's queries and parts, and its manifest would count the old chunks. The tenant's
    GUID (``resolve``) goes into the spec: the tenant budget is keyed by it, whatever spelling the request used.

    A ``collectionId`` the request names is claimed first (``http_api.chain_claim``: generation 0 of its chain), so of
    concurrent requests naming one new id exactly one starts it and answers 202; the others answer as for an existing
    collection (200 with the same request, 409 ``conflict`` with another). The input is sealed for its instance
    (``shared.requests.admission``): the orchestrator runs nothing else.
    """
    try:
        request = validate_collection_request(parse_request_json(body), settings, now)
    except InvalidRequest as exc:
        return ApiResponse(400, exc.to_json())
    collection_id = request.collection_id or new_id()
    existing = await client.get_status(collection_id, False, False, True)
    if _runtime_status(existing) is not None:
        return _existing(collection_id, existing, request)
    guid = await guid_or_error(resolve, request.tenant_id)
    if isinstance(guid, ApiResponse):
        return guid
    leftover = reuse.output_exists(sink, request.tenant_id, collection_id)
    # Objects, then the instance again: a run writes only after its instance exists, so objects of a run a concurrent
    # POST just started are always seen with that instance (this POST then answers as for it); and reading it just
    # before the start keeps the listing out of the window in which two concurrent starts could both be accepted.
    raced = await client.get_status(collection_id, False, False, True)
    if _runtime_status(raced) is not None:
        return _existing(collection_id, raced, request)
    if leftover is not None:
        return leftover
    secret = settings.budget_secret or ""
    if request.collection_id:  # a generated id is new by construction; a named one may be asked for twice at once
        claimed = await claim_link(client, collection_id, ROOT, collection_id, secret=secret)
        if not claimed.won:
            if claimed.link is not None:
                return _existing(collection_id, claimed.link, request)
            return _error(
                409, "collectionId", "starting",
                f"another request is starting collection {collection_id}; GET /api/collections/{collection_id} "
                "in a few seconds shows which",
            )  # fmt: skip
    spec = _spec_for(request, collection_id, settings, guid)
    plan = plan_report(
        source=request.source,
        chunks=request.chunk_count,
        settings=settings,
        now=now,
        ranges=spec.ranges,
        interval_minutes=request.interval_minutes,
        interval_defaulted=request.interval_defaulted,
        quota=await tenant_quota(client, guid, request.source, settings, now),
        settle=request.settle,
    )
    try:
        await client.start_new(
            names.ORCHESTRATOR_COLLECT,
            collection_id,
            orchestration_input(spec, request.to_json(), now, plan, secret=secret),
        )
    except Exception:
        # A concurrent POST with the same id won the race between our status check and this start. host.json sets
        # overridableExistingInstanceStates=NonRunningStates, so the extension refuses the second start instead
        # of restarting the running collection; answer with the collection that exists.
        raced = await client.get_status(collection_id, False, False, True)
        if _runtime_status(raced) is None:
            raise
        return _existing(collection_id, raced, request)
    log_event(
        logger,
        logging.INFO,
        "collection.started",
        f"started collection {collection_id}: {request.chunk_count} chunks, K={request.max_concurrency}",
        collectionId=collection_id,
        tenantId=request.tenant_id,
        source=request.source,
        chunks=request.chunk_count,
        concurrency=request.max_concurrency,
    )
    body_out = {"collectionId": collection_id, "existing": False, "chunks": request.chunk_count, "plan": plan}
    return ApiResponse(202, body_out, collection_id)


def _existing(collection_id: str, status: Any, request: CollectionRequest) -> ApiResponse:
    """The collection that holds this id: 200 when it was started with this request, else a 409 conflict."""
    conflict = reuse.conflict(collection_id, status, request.to_json())
    if conflict is not None:
        return conflict
    return ApiResponse(200, {"collectionId": collection_id, "existing": True}, collection_id)


def _spec_for(request: CollectionRequest, collection_id: str, settings: Settings, guid: str) -> CollectionSpec:
    from datetime import timedelta

    from shared.models import filters_to_json

    return CollectionSpec(
        collection_id=collection_id,
        tenant_id=request.tenant_id,
        source=request.source,
        filters=filters_to_json(request.filters),
        options=source_named(request.source).run_options(
            settings, request.max_concurrency, high_completeness=request.high_completeness
        ),
        plan=ChunkPlan(request.start, request.end, timedelta(minutes=request.interval_minutes)),
        tenant_guid=guid,
    )


async def collection_summary(
    client: DurableClient, collection_id: str, sink_of: Callable[[], ChunkSink | None] | None = None
) -> ApiResponse:
    """A friendly view over the Durable status: progress while running, totals and failures when done, plus what the
    live page shows (the collection's header from its input, and the chunk grid). A cancelled collection
    (``POST .../cancel``) says so; its manifest, which the cancel wrote, is looked up through ``sink_of``."""
    status = await client.get_status(collection_id, False, False, True)
    refused = follow_routes.refuse(collection_id, status, "summary")  # a follower's id: what to use instead
    if refused is not None:
        return refused
    runtime = _runtime_status(status)
    if runtime is None:
        return _error(404, "id", "not_found", f"no collection {collection_id}")
    cancelled = cancelled_reason(status)
    progress = _json_field(getattr(status, "custom_status", None))
    progress = progress if isinstance(progress, dict) else {}
    output = _json_field(getattr(status, "output", None))
    output = output if isinstance(output, dict) else {}
    source = output or progress
    payload = _json_field(getattr(status, "input_", None))
    spec = live.spec_of(payload)
    stopped = not output and runtime not in ACTIVE  # terminated (or crashed): its last custom status is stale
    if stopped:
        progress = live.stopped(progress)
        source = progress
    if output:
        failures = [
            with_fix({"window": f"{f['chunk']['start']}/{f['chunk']['end']}", "kind": f["kind"],
                           "reason": f["message"], "attempts": f.get("attempts")})
            for f in output.get("failures", [])
        ]  # fmt: skip
    else:
        failures = live.running_failures(progress.get("grid"))
    reason = output.get("reason")
    body: JsonDict = {
        "collectionId": collection_id,
        "runtimeStatus": runtime,
        "status": output.get("status") or ("Cancelled" if cancelled else runtime),
        "cancelled": cancelled,
        "progress": {
            key: source.get(key)
            for key in ("total", "completed", "failed", "inFlight", "percent", "splits", "incomplete", "execution")
            if key in source
        },
        "records": source.get("records", 0),
        **status_sections(source),  # each source's section (Graph: its queries; Exchange: what its calls cost)
        "incompleteWindows": output.get("incompleteWindows") or [],
        "windowsInFlight": progress.get("windowsInFlight", []) if not output else [],
        "failures": failures,
        "reason": with_fix(reason) if isinstance(reason, dict) else reason,
        "stopping": progress.get("stopping") if not output else None,
        "budget": source.get("budget"),
        "manifest": output.get("manifest") or (_cancel_manifest(spec, sink_of) if cancelled else None),
        "chain": output.get("chain"),  # a finished retry link: its chain's headline (the manifest proves it)
        "settling": progress.get("settling") if not output and not stopped else None,  # waiting to read late windows
        "settled": output.get("settled"),  # a settle collection's second pass: windows read again, late records
        "latency": _latency(spec, payload),
        "plan": payload.get("plan") if isinstance(payload, dict) else None,
        "retention": _retention(spec, payload, status),
        "expired": _expired(payload),
        "outputPrefix": names.collection_prefix(spec.tenant_id, spec.collection_id) if spec else None,
        "parentCollectionId": output.get("parentCollectionId") or (spec.parent_collection_id if spec else None),
        "collection": live.header(payload, spec),
        "grid": live.grid(spec, source.get("grid")),
        "createdTime": str(getattr(status, "created_time", "") or ""),
        "lastUpdatedTime": str(getattr(status, "last_updated_time", "") or ""),
    }
    return ApiResponse(200, body)


def _cancel_manifest(spec: CollectionSpec | None, sink_of: Callable[[], ChunkSink | None] | None) -> str | None:
    """Where the manifest a cancel wrote is, if it is there (a cancel writes it after the instance has stopped)."""
    sink = sink_of() if sink_of is not None and spec is not None else None
    if sink is None or spec is None:
        return None
    name = names.manifest_object_name(spec.tenant_id, spec.collection_id)
    try:
        return sink.location(name) if name in sink.list_names(name) else None
    except CollectorError:
        return None


def _expired(payload: Any) -> list[JsonDict]:
    """Windows a retry left out because they ended before the audit log's retention (``retry_chain``)."""
    request = payload.get("request") if isinstance(payload, dict) else None
    found = request.get("expired") if isinstance(request, dict) else None
    return found if isinstance(found, list) else []


def _retention(spec: CollectionSpec | None, payload: Any, status: Any) -> JsonDict | None:
    """Which windows may be partial because they are older than the tenant's guaranteed retention
    (``shared.timeline.retention``), as of the latest moment a query of the collection may have run so far: its status's
    last update (or its start). The manifest says it as of the collection's end."""
    started_at = started_at_of(payload)
    if spec is None or started_at is None:
        return None
    moment = started_at
    updated = getattr(status, "last_updated_time", None)
    if isinstance(updated, datetime) and updated.tzinfo is not None:
        moment = max(moment, updated)
    return retention_report(spec.ranges, moment, spec.options.retention_days)


def _latency(spec: CollectionSpec | None, payload: Any) -> JsonDict | None:
    """Which windows may still gain late records (``shared.timeline.latency``), known from the start: the page and the
    summary say it while the collection runs, the manifest when it ends."""
    started_at = started_at_of(payload)
    if spec is None or started_at is None:
        return None
    return latency_report(spec.ranges, started_at)
