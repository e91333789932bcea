"""``retry-failed``: the retry chain ``root -> root-retry-1 -> root-retry-2`` of a finished collection.

A link that finished with a result is retried over what it failed (and, after a stop, what it never started). A link
that ended without one (terminated, or failed before its result) is retried over its windows that have no chunk
summary under its prefix: a summary is written last, after the chunk object, so its presence means the window was
collected. The retry covers exactly the parts of those windows that summaries do not tile (after a split, only the
halves still missing), so no record is collected twice across the chain. An activity of a terminated link may still
finish after the retry was planned; its window then lies inside the retry's windows, and the newer link wins there.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from activities.manifest_windows import coverage_gaps, union_windows
from http_api import follow_routes, reuse
from http_api.chain_claim import claim_link
from http_api.common import ACTIVE, ApiResponse, DurableClient, error, json_field, orchestration_input, runtime_status
from http_api.plan_report import plan_report, tenant_quota
from http_api.tenants import TenantResolver, guid_or_error
from shared import names
from shared.models import Chunk, JsonDict
from shared.requests.admission import unsealed_reason
from shared.settings import Settings
from shared.sinks.base import ChunkSink
from shared.window.machine import CollectionSpec

logger = logging.getLogger(__name__)


async def retry_failed(
    client: DurableClient,
    collection_id: str,
    now: datetime,
    sink: ChunkSink,
    *,
    settings: Settings,
    resolve: TenantResolver,
) -> ApiResponse:
    """Retry what is still failed in the retry chain of a finished collection; idempotent.

    A call naming any finished link follows the chain to its newest link: while that one runs, the answer is 200
    with it (nothing started); once it has finished, the next link is started over what the newest link still
    failed. Concurrent calls all name the same next id, and exactly one of them starts it: the chain's entity hands
    each link out once (``http_api.chain_claim``); the others answer 200 with the link the winner started. The Durable
    start alone could not decide it (DTFx writes the Instances row after the start message, so two starts checking
    in between are both accepted), nor refuse a link that has already *finished* when a call with an older view of
    the chain starts it again; a claim is never handed out twice. A retry keeps its parent's options (with a budget
    token of its own) and tenant GUID (a parent started before GUIDs were carried has its tenant resolved now). The
    next link's output prefix must be empty (it has no instance yet).

    Windows older than ``COLLECTOR_MAX_LOOKBACK_DAYS`` are left out as expired, exactly what a start refuses; younger
    ones are retried even past the guaranteed retention (flagged possibly partial in the retry's manifest, as they
    were in the root's), so a collection an E5 tenant could start can also be retried.
    """
    status = await client.get_status(collection_id, False, False, True)
    refused = follow_routes.refuse(collection_id, status, "retry-failed")
    if refused is not None:
        return refused
    runtime = runtime_status(status)
    if runtime is None:
        return error(404, "id", "not_found", f"no collection {collection_id}")
    if runtime in ACTIVE:
        return error(409, "id", "still_running", f"collection {collection_id} is {runtime}; retry when it ends")
    payload = json_field(getattr(status, "input_", None))
    if not isinstance(payload, dict) or "spec" not in payload:
        return error(409, "id", "no_output", f"collection {collection_id} ended without a result ({runtime})")
    root, generation = lineage(collection_id, payload)
    tip = _Link(collection_id, runtime, payload, json_field(getattr(status, "output", None)))
    while True:  # follow the chain to its newest link
        next_id = names.retry_collection_id(root, generation + 1)
        found = await client.get_status(next_id, False, False, True)
        found_runtime = runtime_status(found)
        if found_runtime is None:
            break
        found_payload = json_field(getattr(found, "input_", None))
        if not isinstance(found_payload, dict) or (found_payload.get("request") or {}).get("retryOf") != tip.id:
            return error(409, "id", "chain_broken", f"{next_id} is not the retry of {tip.id}")
        tip = _Link(next_id, found_runtime, found_payload, json_field(getattr(found, "output", None)))
        generation += 1
    if tip.runtime in ACTIVE:
        return _existing_retry(tip)
    unsealed = unsealed_reason(settings.budget_secret or "", tip.id, tip.payload)
    if unsealed is not None:  # its options and windows are not the collector's: never start a sealed link from them
        return error(409, "id", "not_sealed", f"{tip.id} cannot be retried: {unsealed}")
    parent = CollectionSpec.from_json(tip.payload["spec"])
    if isinstance(tip.output, dict):
        chunks = parent.retry_chunks(tip.output)
    else:  # ended without a result (terminated): whatever it had not finished
        chunks = unfinished_windows(parent, sink)
    if not chunks:
        detail = "" if tip.id == collection_id else f" (its latest retry {tip.id} collected everything)"
        if not isinstance(tip.output, dict):
            detail = f" ({tip.id} ended {tip.runtime}, but every window of it has a chunk summary)"
        return error(400, "id", "none_failed", f"collection {collection_id} has no failed chunks{detail}")
    lookback = settings.max_lookback_days
    chunks, expired = split_at_retention(chunks, now - timedelta(days=lookback))
    if not chunks:
        windows = ", ".join(c.label() for c in expired)
        return error(
            400, "id", "retention",
            f"nothing left to retry: {windows} ended more than {lookback} days ago (COLLECTOR_MAX_LOOKBACK_DAYS); "
            "no tenant keeps audit records that long",
        )  # fmt: skip
    guid = parent.tenant_guid or await guid_or_error(resolve, parent.tenant_id)
    if isinstance(guid, ApiResponse):
        return guid
    retry_id = names.retry_collection_id(root, generation + 1)
    leftover = reuse.output_exists(sink, parent.tenant_id, retry_id, hint="delete that output first")
    # A concurrent call may have started this retry since our look-up, and its lanes written already: its instance
    # existed before its first object, so reading it after the listing tells the two apart; reading it just before
    # the start also keeps the listing out of the window in which two concurrent starts could both be accepted.
    raced = await client.get_status(retry_id, False, False, True)
    raced_payload = json_field(getattr(raced, "input_", None))
    if runtime_status(raced) is not None and isinstance(raced_payload, dict):
        return _existing_retry(_Link(retry_id, runtime_status(raced) or "", raced_payload, None))
    if leftover is not None:
        return leftover
    secret = settings.budget_secret or ""
    claimed = await claim_link(client, root, generation + 1, retry_id, secret=secret)
    if not claimed.won:
        link_payload = json_field(getattr(claimed.link, "input_", None))
        if isinstance(link_payload, dict):
            return _existing_retry(_Link(retry_id, runtime_status(claimed.link) or "", link_payload, None))
        return error(409, "id", "retry_starting", f"another call is starting {retry_id}; call again in a few seconds")
    spec = replace(
        parent, collection_id=retry_id, plan=None, explicit=tuple(chunks), parent_collection_id=tip.id, tenant_guid=guid
    )
    tip_request = tip.payload.get("request") or {}
    expired_json = [c.span_json() for c in expired]
    request = {
        **tip_request,
        "collectionId": retry_id,
        "retryOf": tip.id,
        "retryRoot": root,
        "retryGeneration": generation + 1,
        "expired": expired_json,
        # What the chain section of this link's manifest needs and storage cannot tell: the root's ranges, and the
        # windows every link left out as expired. A link started before these were carried passes none on.
        **_chain_facts(parent, tip_request, expired_json),
    }
    quota = await tenant_quota(client, spec.budget_tenant, spec.source, settings, now)
    plan = plan_report(
        source=spec.source, chunks=len(chunks), settings=settings, now=now, ranges=list(chunks), quota=quota
    )
    try:
        await client.start_new(
            names.ORCHESTRATOR_COLLECT, retry_id, orchestration_input(spec, request, now, plan, secret=secret)
        )
    except Exception:
        # A concurrent call started this retry between our look-up and our start: answer with it.
        raced = await client.get_status(retry_id, False, False, True)
        raced_payload = json_field(getattr(raced, "input_", None))
        if runtime_status(raced) is None or not isinstance(raced_payload, dict):
            raise
        return _existing_retry(_Link(retry_id, runtime_status(raced) or "", raced_payload, None))
    logger.info("started retry %s of %s: %d chunks", retry_id, tip.id, len(chunks))
    body = {
        "collectionId": retry_id,
        "parentCollectionId": tip.id,
        "chunks": len(chunks),
        "existing": False,
        "expired": expired_json,
        "plan": plan,
    }
    return ApiResponse(202, body, retry_id)


def split_at_retention(chunks: list[Chunk], cutoff: datetime) -> tuple[list[Chunk], list[Chunk]]:
    """(what can still be collected, what the service no longer holds): a window straddling the retention cut-off
    keeps its part after it. The expired parts are reported, never retried (they would come back empty)."""
    kept: list[Chunk] = []
    expired: list[Chunk] = []
    for chunk in chunks:
        if chunk.end <= cutoff:
            expired.append(chunk)
        elif chunk.start < cutoff:
            expired.append(Chunk(chunk.start, cutoff, chunk.depth))
            kept.append(Chunk(cutoff, chunk.end, chunk.depth))
        else:
            kept.append(chunk)
    return kept, expired


def unfinished_windows(spec: CollectionSpec, sink: ChunkSink) -> list[Chunk]:
    """The parts of the collection's planned windows that no chunk summary under its prefix covers, in order."""
    prefix = names.collection_prefix(spec.tenant_id, spec.collection_id) + "chunks/"
    done = [Chunk(*window) for window in map(names.summary_window, sink.list_names(prefix)) if window is not None]
    done.sort(key=lambda c: c.start)
    missing: list[Chunk] = []
    for index in range(spec.planned):
        planned = spec.planned_chunk(index)
        inside = [c for c in done if c.start < planned.end and planned.start < c.end]
        missing += coverage_gaps(planned.start, planned.end, inside)
    return missing


@dataclass(frozen=True, slots=True)
class _Link:
    """One collection of a retry chain as the status API shows it."""

    id: str
    runtime: str
    payload: JsonDict
    output: Any


def lineage(collection_id: str, payload: JsonDict) -> tuple[str, int]:
    """(root id, generation) of a collection: a retry carries both in its request; any other collection is a root."""
    request = payload.get("request") or {}
    root, generation = request.get("retryRoot"), request.get("retryGeneration")
    if isinstance(root, str) and names.is_safe_id(root) and isinstance(generation, int) and generation >= 1:
        return root, generation
    return collection_id, 0


def _chain_facts(tip: CollectionSpec, tip_request: JsonDict, expired: list[JsonDict]) -> JsonDict:
    """``rootRanges`` (the root's own ranges, or the ones the tip carries) and ``chainExpired`` (the union of every
    link's expired windows); neither when the tip is a retry that carries no ``rootRanges``."""
    if tip.parent_collection_id is None:  # the tip is the root
        root_ranges: Any = [c.span_json() for c in tip.ranges]
        earlier: list[JsonDict] = []
    else:
        root_ranges, earlier = tip_request.get("rootRanges"), tip_request.get("chainExpired") or []
    if not isinstance(root_ranges, list):
        return {}
    union = [c.span_json() for c in union_windows([*earlier, *expired])]
    return {"rootRanges": root_ranges, "chainExpired": union}


def _existing_retry(link: _Link) -> ApiResponse:
    spec = link.payload.get("spec") or {}
    body = {
        "collectionId": link.id,
        "parentCollectionId": spec.get("parentCollectionId"),
        "chunks": len(spec.get("explicit") or ()),
        "existing": True,
    }
    return ApiResponse(200, body, link.id)
