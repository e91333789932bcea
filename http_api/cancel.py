"""``POST /api/collections/{id}/cancel``: stop a collection (or the running link of its retry chain) now, give its
tenant-budget slots back at once, and write a manifest of what it had collected.

Terminating alone left the slots with the dead collection until their leases ran out (600 s by default), and the
next collection of the tenant waited that long. Here the link is terminated, its slots are released by a
``release_collection`` signal once it has stopped (and again while the budget still lists any of them: an ``acquire``
sent just before the end may arrive after the release), and a manifest is written from its chunk summaries, with
status ``Cancelled``: a person who cancelled during an incident learns what had been collected, and every other part
of the range is listed as a gap. Activities that were running keep running (terminating an orchestration does not
stop them) and may still finish their chunks; the manifest lists their windows under ``cancelled.inFlight``. The link
stays what a terminated link is to ``retry-failed``: retried over the parts of its windows without a chunk summary.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from activities.manifest import write_manifest
from http_api import follow_routes
from http_api.budget_slots import BudgetToken, no_token, release_collection
from http_api.common import (
    ACTIVE,
    CANCEL_REASON,
    ApiResponse,
    DurableClient,
    cancelled_reason,
    error,
    json_field,
    runtime_status,
)
from http_api.retry_chain import lineage
from shared import names
from shared.errors import CollectorError
from shared.models import JsonDict, iso
from shared.requests.admission import RUN, unsealed_reason
from shared.sinks.base import ChunkSink, write_bytes
from shared.sources.registry import status_sections
from shared.window.machine import CollectionSpec

logger = logging.getLogger(__name__)

STOP_WAIT_SECONDS = 30.0
"""How long the call waits for the terminated instance to stop (its next episode applies the terminate)."""


@dataclass(frozen=True, slots=True)
class _Link:
    id: str
    status: Any
    payload: JsonDict


async def cancel_collection(
    client: DurableClient,
    collection_id: str,
    now: Callable[[], datetime],
    sink: ChunkSink,
    *,
    budget_token: BudgetToken = no_token,
    secret: str = "",
) -> ApiResponse:
    """Cancel the running link of the chain ``collection_id`` belongs to (itself, or a retry of it);
    ``budget_token`` gives the token the budget entity expects with that run's release; ``secret``: the key its
    input was sealed with (an input the collector did not seal is not acted on: its spec could name anything)."""
    status = await client.get_status(collection_id, False, False, True)
    refused = follow_routes.refuse(collection_id, status, "cancel")
    if refused is not None:
        return refused
    if runtime_status(status) is None:
        return error(404, "id", "not_found", f"no collection {collection_id}")
    payload = json_field(getattr(status, "input_", None))
    if not isinstance(payload, dict) or "spec" not in payload:
        return error(409, "id", "not_a_collection", f"{collection_id} is not a collection this API started")
    tip = await _newest_link(client, _Link(collection_id, status, payload))
    unsealed = unsealed_reason(secret, tip.id, tip.payload)
    if unsealed is not None:
        return error(409, "id", "not_sealed", f"{tip.id} is not a collection this API started: {unsealed}")
    spec = CollectionSpec.from_json(tip.payload["spec"])
    runtime = runtime_status(tip.status)
    if runtime not in ACTIVE:
        if isinstance(json_field(getattr(tip.status, "output", None)), dict):
            return error(409, "id", "not_running", f"{tip.id} has ended ({runtime}); there is nothing to cancel")
        # Ended without a result (cancelled, or terminated some other way): give back any slot it still holds.
        released = await _release(client, spec, tip.payload, budget_token)
        shown = "Cancelled" if cancelled_reason(tip.status) else runtime
        ended: JsonDict = {"collectionId": tip.id, "cancelled": [], "status": shown, "existing": True}
        return ApiResponse(200, {**ended, "slotsReleased": released}, tip.id)
    at = now()
    await asyncio.to_thread(_request_cancel, sink, spec, at)
    await client.terminate(tip.id, CANCEL_REASON.format(id=collection_id, at=iso(at)))
    stopped = await _wait_stopped(client, tip.id)
    if runtime_status(stopped) in ACTIVE:  # not stopped yet (a busy task hub): a later cancel finishes the job
        note = "termination requested but not applied yet; cancel again to give its budget slots back"
        pending: JsonDict = {"collectionId": tip.id, "cancelled": [tip.id], "status": "Cancelling", "note": note}
        return ApiResponse(202, pending, tip.id)
    if runtime_status(stopped) != "Terminated":
        # It finished on its own before the terminate reached it: its manifest and slots are its own business, and
        # nothing of the cancel stays.
        await asyncio.to_thread(_forget_cancel, sink, spec)
        late: JsonDict = {"collectionId": tip.id, "cancelled": [], "status": runtime_status(stopped), "existing": True}
        return ApiResponse(200, late, tip.id)
    released = await _release(client, spec, tip.payload, budget_token)
    progress = json_field(getattr(stopped, "custom_status", None))
    in_flight = list(progress.get("windowsInFlight") or []) if isinstance(progress, dict) else []
    body: JsonDict = {
        "collectionId": tip.id,
        "cancelled": [tip.id],
        "status": "Cancelled",
        "slotsReleased": released,
        "inFlight": in_flight,
    }
    manifest_input = _manifest_input(
        spec, tip.payload, progress, at=at, finished=now(), in_flight=in_flight, named=collection_id
    )
    try:
        written = await asyncio.to_thread(write_manifest, sink, manifest_input)
    except CollectorError as exc:
        body["manifestError"] = {"kind": exc.kind, "message": str(exc)[:500]}
    else:
        body["manifest"] = {"location": written["location"], "totals": written["totals"], "gaps": written["gaps"]}
    logger.info("cancelled collection %s (slots released: %s)", tip.id, released)
    return ApiResponse(200, body, tip.id)


def _request_cancel(sink: ChunkSink, spec: CollectionSpec, at: datetime) -> None:
    """The marker the collection's waiting Graph checks look for (``activities.bodies._CancelWatch``); a failure to
    write it only means they may wait out their bound."""
    marker = names.cancel_marker_name(spec.tenant_id, spec.collection_id)
    try:
        write_bytes(sink, marker, json.dumps({"requestedAt": iso(at)}).encode())
    except CollectorError as exc:
        logger.warning("could not write the cancel request of %s: %s", spec.collection_id, exc)


def _forget_cancel(sink: ChunkSink, spec: CollectionSpec) -> None:
    try:
        sink.delete(names.cancel_marker_name(spec.tenant_id, spec.collection_id))
    except CollectorError as exc:
        logger.warning("could not remove the cancel request of %s: %s", spec.collection_id, exc)


async def _newest_link(client: DurableClient, link: _Link) -> _Link:
    """Follow the retry chain from ``link`` to its newest link (a running retry is what a cancel must stop)."""
    root, generation = lineage(link.id, link.payload)
    while True:
        next_id = names.retry_collection_id(root, generation + 1)
        found = await client.get_status(next_id, False, False, True)
        found_payload = json_field(getattr(found, "input_", None))
        if runtime_status(found) is None or not isinstance(found_payload, dict) or "spec" not in found_payload:
            return link
        if (found_payload.get("request") or {}).get("retryOf") != link.id:
            return link
        link, generation = _Link(next_id, found, found_payload), generation + 1


async def _wait_stopped(client: DurableClient, instance_id: str) -> Any:
    deadline = time.monotonic() + STOP_WAIT_SECONDS
    pause = 0.02
    while True:
        found = await client.get_status(instance_id, False, False, True)
        if runtime_status(found) not in ACTIVE or time.monotonic() >= deadline:
            return found
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.5)


async def _release(client: DurableClient, spec: CollectionSpec, payload: JsonDict, budget_token: BudgetToken) -> bool:
    """Give the run's slots back and close its token: a token read from its history acquires nothing afterwards."""
    if not spec.options.budget.enabled:
        return True
    token = budget_token(spec.collection_id, str(payload.get(RUN) or ""))
    tenant, source = spec.budget_tenant, spec.source
    return await release_collection(client, tenant, source, spec.collection_id, token=token, close=True)


def _manifest_input(
    spec: CollectionSpec,
    payload: JsonDict,
    progress: Any,
    *,
    at: datetime,
    finished: datetime,
    in_flight: list[Any],
    named: str,
) -> JsonDict:
    """What the finalize activity would be given, for a collection stopped by a cancel: no failures are known (its
    output was never written), so everything not collected is a gap."""
    progress = progress if isinstance(progress, dict) else {}
    message = f"cancelled at {iso(at)} through POST /api/collections/{named}/cancel"
    if in_flight:
        message += f"; {len(in_flight)} window(s) in flight then may still gain a chunk afterwards (cancelled.inFlight)"
    return {
        "collectionId": spec.collection_id,
        "tenantId": spec.tenant_id,
        "parentCollectionId": spec.parent_collection_id,
        "source": spec.source,
        "filters": spec.filters,
        "ranges": [c.span_json() for c in spec.ranges],
        "status": "Cancelled",
        "reason": {"kind": "cancelled", "message": message},
        "failures": [],
        **status_sections(progress),  # each source's section as the collection last published it
        "deleteQueries": spec.options.delete_queries,
        "highCompleteness": spec.options.high_completeness,
        "startedAt": payload.get("startedAt"),
        "finishedAt": iso(finished),
        "request": payload.get("request"),
        "cancelled": {"at": iso(at), "inFlight": in_flight},
    }
