"""The collections HTTP API as plain async functions over a Durable client (the triggers stay one-liners).

Responses are ``(status_code, body)`` pairs plus, for starts, the client's check-status payload, so the logic is
testable without the Functions host.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from http_api import live
from shared import names
from shared.latency import latency_report
from shared.models import JsonDict, iso, parse_iso
from shared.planning import ChunkPlan
from shared.request_json import parse_request_json
from shared.settings import Settings
from shared.validation import CollectionRequest, InvalidRequest, validate_collection_request
from shared.window import CollectionSpec
from shared.window_state import RunOptions

logger = logging.getLogger(__name__)

_ACTIVE = {"Running", "Pending", "ContinuedAsNew", "Suspended"}


class DurableClient(Protocol):
    """The subset of ``DurableOrchestrationClient`` the API uses."""

    async def start_new(self, orchestration_function_name: str, instance_id: str | None, client_input: Any) -> str: ...

    async def get_status(self, instance_id: str, show_history: bool = ..., show_history_output: bool = ...,
                         show_input: bool = ...) -> Any: ...  # fmt: skip


@dataclass(frozen=True, slots=True)
class ApiResponse:
    status: int
    body: JsonDict
    instance_id: str | None = None
    """Set when the body should be merged into the Durable check-status payload for this instance."""


def _error(status: int, field: str, rule: str, message: str) -> ApiResponse:
    return ApiResponse(status, {"error": {"field": field, "rule": rule, "message": message}})


def _runtime_status(status: Any) -> str | None:
    value = getattr(status, "runtime_status", None)
    if value is None:
        return None
    return str(getattr(value, "value", value))


def _json_field(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def orchestration_input(spec: CollectionSpec, request: JsonDict, now: datetime) -> JsonDict:
    return {"spec": spec.to_json(), "state": None, "request": request, "startedAt": iso(now)}


async def start_collection(
    client: DurableClient, body: bytes, settings: Settings, now: datetime, new_id: Callable[[], str]
) -> ApiResponse:
    """Validate, plan, start (or find the existing collection with the same id)."""
    try:
        request = validate_collection_request(parse_request_json(body), settings, now)
    except InvalidRequest as exc:
        return ApiResponse(400, exc.to_json())
    collection_id = request.collection_id or new_id()
    existing = await client.get_status(collection_id)
    if _runtime_status(existing) is not None:
        return ApiResponse(200, {"collectionId": collection_id, "existing": True}, collection_id)
    spec = _spec_for(request, collection_id, settings)
    try:
        await client.start_new(
            names.ORCHESTRATOR_COLLECT, collection_id, orchestration_input(spec, request.to_json(), now)
        )
    except Exception:
        # A concurrent POST with the same id won the race between our status check and this start. host.json sets
        # overridableExistingInstanceStates=NonRunningStates, so the extension refuses the second start instead
        # of restarting the running collection; answer with the collection that exists.
        if _runtime_status(await client.get_status(collection_id)) is None:
            raise
        return ApiResponse(200, {"collectionId": collection_id, "existing": True}, collection_id)
    logger.info("started collection %s: %d chunks, K=%d", collection_id, request.chunk_count, request.max_concurrency)
    body_out = {"collectionId": collection_id, "existing": False, "chunks": request.chunk_count}
    return ApiResponse(202, body_out, collection_id)


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
        "latency": _latency(spec, payload),
        "outputPrefix": names.collection_prefix(spec.tenant_id, spec.collection_id) if spec else None,
        "parentCollectionId": output.get("parentCollectionId") or (spec.parent_collection_id if spec else None),
        "collection": live.header(payload, spec),
        "grid": live.grid(spec, source.get("grid")),
        "createdTime": str(getattr(status, "created_time", "") or ""),
        "lastUpdatedTime": str(getattr(status, "last_updated_time", "") or ""),
    }
    return ApiResponse(200, body)


def _latency(spec: CollectionSpec | None, payload: Any) -> JsonDict | None:
    """Which windows may still gain late records (``shared.latency``), known from the start: the page and the
    summary say it while the collection runs, the manifest when it ends."""
    started = payload.get("startedAt") if isinstance(payload, dict) else None
    if spec is None or not isinstance(started, str):
        return None
    try:
        started_at = parse_iso(started)
    except ValueError:
        return None
    return latency_report(spec.ranges, started_at)


async def retry_failed(client: DurableClient, collection_id: str, now: datetime) -> ApiResponse:
    """Retry what is still failed in the retry chain of a finished collection; idempotent.

    Retries form a chain ``root -> root-retry-1 -> root-retry-2``, with deterministic ids. A call naming any finished
    link follows the chain to its newest link: while that one runs, the answer is 200 with it (nothing started);
    once it has finished, the next link is started over what the newest link still failed. Concurrent calls all
    name the same next id, and the Durable start refuses all but one (host.json ``overridableExistingInstanceStates:
    NonRunningStates``): the losers answer 200 with the winner. One window remains: a retry that *finishes* between
    another call's check of its id and that call's start would be started again (same windows, same object names,
    so the output stays exact; only the audit API work repeats). A retry keeps its parent's options.
    """
    status = await client.get_status(collection_id, False, False, True)
    runtime = _runtime_status(status)
    if runtime is None:
        return _error(404, "id", "not_found", f"no collection {collection_id}")
    if runtime in _ACTIVE:
        return _error(409, "id", "still_running", f"collection {collection_id} is {runtime}; retry when it ends")
    payload = _json_field(getattr(status, "input_", None))
    if not isinstance(payload, dict) or "spec" not in payload:
        return _error(409, "id", "no_output", f"collection {collection_id} ended without a result ({runtime})")
    root, generation = _lineage(collection_id, payload)
    tip = _Link(collection_id, runtime, payload, _json_field(getattr(status, "output", None)))
    while True:  # follow the chain to its newest link
        next_id = names.retry_collection_id(root, generation + 1)
        found = await client.get_status(next_id, False, False, True)
        found_runtime = _runtime_status(found)
        if found_runtime is None:
            break
        found_payload = _json_field(getattr(found, "input_", None))
        if not isinstance(found_payload, dict) or (found_payload.get("request") or {}).get("retryOf") != tip.id:
            return _error(409, "id", "chain_broken", f"{next_id} is not the retry of {tip.id}")
        tip = _Link(next_id, found_runtime, found_payload, _json_field(getattr(found, "output", None)))
        generation += 1
    if tip.runtime in _ACTIVE:
        return _existing_retry(tip)
    parent = CollectionSpec.from_json(tip.payload["spec"])
    if isinstance(tip.output, dict):
        chunks = parent.retry_chunks(tip.output)
    elif generation > 0:
        chunks = list(parent.explicit)  # a retry that ended without a result (terminated): all of it again
    else:
        return _error(409, "id", "no_output", f"collection {collection_id} ended without a result ({runtime})")
    if not chunks:
        detail = "" if tip.id == collection_id else f" (its latest retry {tip.id} collected everything)"
        return _error(400, "id", "none_failed", f"collection {collection_id} has no failed chunks{detail}")
    retry_id = names.retry_collection_id(root, generation + 1)
    spec = CollectionSpec(
        collection_id=retry_id,
        tenant_id=parent.tenant_id,
        source=parent.source,
        filters=parent.filters,
        options=parent.options,
        explicit=tuple(chunks),
        parent_collection_id=tip.id,
    )
    request = {
        **(tip.payload.get("request") or {}),
        "collectionId": retry_id,
        "retryOf": tip.id,
        "retryRoot": root,
        "retryGeneration": generation + 1,
    }
    try:
        await client.start_new(names.ORCHESTRATOR_COLLECT, retry_id, orchestration_input(spec, request, now))
    except Exception:
        # A concurrent call started this retry between our look-up and our start: answer with it.
        raced = await client.get_status(retry_id, False, False, True)
        raced_payload = _json_field(getattr(raced, "input_", None))
        if _runtime_status(raced) is None or not isinstance(raced_payload, dict):
            raise
        return _existing_retry(_Link(retry_id, _runtime_status(raced) or "", raced_payload, None))
    logger.info("started retry %s of %s: %d chunks", retry_id, tip.id, len(chunks))
    body = {"collectionId": retry_id, "parentCollectionId": tip.id, "chunks": len(chunks), "existing": False}
    return ApiResponse(202, body, retry_id)


@dataclass(frozen=True, slots=True)
class _Link:
    """One collection of a retry chain as the status API shows it."""

    id: str
    runtime: str
    payload: JsonDict
    output: Any


def _lineage(collection_id: str, payload: JsonDict) -> tuple[str, int]:
    """(root id, generation) of a collection: a retry carries both in its request; any other collection is a root."""
    request = payload.get("request") or {}
    root, generation = request.get("retryRoot"), request.get("retryGeneration")
    if isinstance(root, str) and names.is_safe_id(root) and isinstance(generation, int) and generation >= 1:
        return root, generation
    return collection_id, 0


def _existing_retry(link: _Link) -> ApiResponse:
    spec = link.payload.get("spec") or {}
    body = {
        "collectionId": link.id,
        "parentCollectionId": spec.get("parentCollectionId"),
        "chunks": len(spec.get("explicit") or ()),
        "existing": True,
    }
    return ApiResponse(200, body, link.id)
