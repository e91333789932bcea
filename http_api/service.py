"""The collections HTTP API as plain async functions over a Durable client (the triggers stay one-liners).

Responses are ``(status_code, body)`` pairs plus, for starts, the client's check-status payload, so the logic is
testable without the Functions host.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from http_api import live, reuse
from http_api.common import ACTIVE, ApiResponse, DurableClient, orchestration_input
from http_api.common import error as _error
from http_api.common import json_field as _json_field
from http_api.common import runtime_status as _runtime_status
from shared import names
from shared.latency import latency_report, started_at_of
from shared.models import JsonDict
from shared.planning import ChunkPlan
from shared.request_json import parse_request_json
from shared.settings import Settings
from shared.sinks.base import ChunkSink
from shared.validation import CollectionRequest, InvalidRequest, validate_collection_request
from shared.window import CollectionSpec
from shared.window_state import RunOptions

logger = logging.getLogger(__name__)

__all__ = [
    "ApiResponse",
    "DurableClient",
    "collection_summary",
    "orchestration_input",
    "start_collection",
]


async def start_collection(
    client: DurableClient, body: bytes, settings: Settings, now: datetime, new_id: Callable[[], str], *, sink: ChunkSink
) -> ApiResponse:
    """Validate, plan, start (or find the existing collection with the same id and the same request).

    An id whose instance does not exist but whose output prefix holds objects is refused (``output_exists``): the
    new run would pick up the old run's queries and parts, and its manifest would count the old chunks.
    """
    try:
        request = validate_collection_request(parse_request_json(body), settings, now)
    except InvalidRequest as exc:
        return ApiResponse(400, exc.to_json())
    collection_id = request.collection_id or new_id()
    existing = await client.get_status(collection_id, False, False, True)
    if _runtime_status(existing) is not None:
        return _existing(collection_id, existing, request)
    leftover = reuse.output_exists(sink, request.tenant_id, collection_id)
    # Objects, then the instance again: a run writes only after its instance exists, so objects of a run a concurrent
    # POST just started are always seen with that instance (this POST then answers as for it); and reading it just
    # before the start keeps the listing out of the window in which two concurrent starts could both be accepted.
    raced = await client.get_status(collection_id, False, False, True)
    if _runtime_status(raced) is not None:
        return _existing(collection_id, raced, request)
    if leftover is not None:
        return leftover
    spec = _spec_for(request, collection_id, settings)
    token = settings.budget_token(collection_id, spec.source)
    try:
        await client.start_new(
            names.ORCHESTRATOR_COLLECT, collection_id, orchestration_input(spec, request.to_json(), now, token)
        )
    except Exception:
        # A concurrent POST with the same id won the race between our status check and this start. host.json sets
        # overridableExistingInstanceStates=NonRunningStates, so the extension refuses the second start instead
        # of restarting the running collection; answer with the collection that exists.
        raced = await client.get_status(collection_id, False, False, True)
        if _runtime_status(raced) is None:
            raise
        return _existing(collection_id, raced, request)
    logger.info("started collection %s: %d chunks, K=%d", collection_id, request.chunk_count, request.max_concurrency)
    body_out = {"collectionId": collection_id, "existing": False, "chunks": request.chunk_count}
    return ApiResponse(202, body_out, collection_id)


def _existing(collection_id: str, status: Any, request: CollectionRequest) -> ApiResponse:
    """The collection that holds this id: 200 when it was started with this request, else a 409 conflict."""
    conflict = reuse.conflict(collection_id, status, request.to_json())
    if conflict is not None:
        return conflict
    return ApiResponse(200, {"collectionId": collection_id, "existing": True}, collection_id)


def _spec_for(request: CollectionRequest, collection_id: str, settings: Settings) -> CollectionSpec:
    from datetime import timedelta

    from shared.models import filters_to_json

    return CollectionSpec(
        collection_id=collection_id,
        tenant_id=request.tenant_id,
        source=request.source,
        filters=filters_to_json(request.filters),
        options=RunOptions.from_settings(
            settings, request.max_concurrency, source=request.source, high_completeness=request.high_completeness
        ),
        plan=ChunkPlan(request.start, request.end, timedelta(minutes=request.interval_minutes)),
    )


async def collection_summary(client: DurableClient, collection_id: str) -> ApiResponse:
    """A friendly view over the Durable status: progress while running, totals and failures when done, plus what the
    live page shows (the collection's header from its input, and the chunk grid)."""
    status = await client.get_status(collection_id, False, False, True)
    runtime = _runtime_status(status)
    if runtime is None:
        return _error(404, "id", "not_found", f"no collection {collection_id}")
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
            live.with_fix({"window": f"{f['chunk']['start']}/{f['chunk']['end']}", "kind": f["kind"],
                           "reason": f["message"], "attempts": f.get("attempts")})
            for f in output.get("failures", [])
        ]  # fmt: skip
    else:
        failures = live.running_failures(progress.get("grid"))
    reason = output.get("reason")
    body: JsonDict = {
        "collectionId": collection_id,
        "runtimeStatus": runtime,
        "status": output.get("status") or runtime,
        "progress": {
            key: source.get(key)
            for key in ("total", "completed", "failed", "inFlight", "percent", "splits", "incomplete", "execution")
            if key in source
        },
        "records": source.get("records", 0),
        "queries": source.get("queries"),
        "windowsInFlight": progress.get("windowsInFlight", []) if not output else [],
        "failures": failures,
        "reason": live.with_fix(reason) if isinstance(reason, dict) else reason,
        "stopping": progress.get("stopping") if not output else None,
        "budget": source.get("budget"),
        "manifest": output.get("manifest"),
        "chain": output.get("chain"),  # a finished retry link: its chain's headline (the manifest proves it)
        "latency": _latency(spec, payload),
        "expired": _expired(payload),
        "outputPrefix": names.collection_prefix(spec.tenant_id, spec.collection_id) if spec else None,
        "parentCollectionId": output.get("parentCollectionId") or (spec.parent_collection_id if spec else None),
        "collection": live.header(payload, spec),
        "grid": live.grid(spec, source.get("grid")),
        "createdTime": str(getattr(status, "created_time", "") or ""),
        "lastUpdatedTime": str(getattr(status, "last_updated_time", "") or ""),
    }
    return ApiResponse(200, body)


def _expired(payload: Any) -> list[JsonDict]:
    """Windows a retry left out because they ended before the audit log's retention (``retry_chain``)."""
    request = payload.get("request") if isinstance(payload, dict) else None
    found = request.get("expired") if isinstance(request, dict) else None
    return found if isinstance(found, list) else []


def _latency(spec: CollectionSpec | None, payload: Any) -> JsonDict | None:
    """Which windows may still gain late records (``shared.latency``), known from the start: the page and the
    summary say it while the collection runs, the manifest when it ends."""
    started_at = started_at_of(payload)
    if spec is None or started_at is None:
        return None
    return latency_report(spec.ranges, started_at)
