"""Pure activity bodies: each takes its ports (audit API, sink) and the JSON payload, and returns a JSON result.

Expected failures never raise: they come back as ``ActivityResult`` errors carrying the error ``kind`` so the
orchestrator decides (retry, split, fail the chunk, stop the collection). Records never leave these functions:
they stream to the sink and only counts plus a claim check (object name, SHA-256, size) are returned.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from activities import graph_waits
from activities.graph_export import GraphReads
from activities.reread import earlier_read, write_window
from shared import names
from shared.audit.filter_check import FilterCheck
from shared.audit.ports import (
    AuditQueryApi,
    AuditSearchApi,
    TimeWindow,
)
from shared.budget.slot_deadline import SlotDeadline
from shared.errors import CollectorError, NeedsSplitError, QueryFailedError, TransientApiError
from shared.log_fields import log_event
from shared.models import ActivityResult, Chunk, JsonDict
from shared.redact import redact
from shared.sinks.base import ChunkSink, write_bytes
from shared.sources.graph import query_rules
from shared.sources.graph.calls import GraphChecked, GraphDeleted, GraphPoll, GraphSubmit, GraphSubmitted
from shared.window.calls import ChunkCall

logger = logging.getLogger(__name__)


@runtime_checkable
class FindsQueries(Protocol):
    """A query API that can find a query an earlier attempt created (Graph lists queries by displayName)."""

    def find_query(self, window: TimeWindow, *, display_name: str) -> str | None: ...


def query_display_name(collection_id: str, chunk: Chunk) -> str:
    """Deterministic per (collection, window): a retried submit can find the query an earlier attempt created."""
    return f"ual-{collection_id}-{chunk.start:%Y%m%dT%H%M%S}-{chunk.end:%Y%m%dT%H%M%S}"


def _guard(body: Callable[[], ActivityResult]) -> JsonDict:
    """Run a body, mapping the collector's expected errors onto the result envelope."""
    return _guarded(body).to_json()


def _guarded(body: Callable[[], ActivityResult]) -> ActivityResult:
    try:
        return body()
    except NeedsSplitError as exc:
        logger.info("window needs a split: %s", exc)
        data: JsonDict = {"limit": exc.limit, "reportedCount": exc.reported_count, "reason": redact(str(exc))[:500]}
        if exc.evidence is not None:
            data["exchange"] = exc.evidence
        return ActivityResult.split(data)
    except CollectorError as exc:
        if isinstance(exc, TransientApiError) and exc.status == 429:  # left to the orchestrator's retry
            text = f"activity throttled (429), retried by the orchestrator: {exc}"
            log_event(logger, logging.WARNING, "api.throttled", text, status=429, retryAfterSeconds=exc.retry_after)
        else:
            logger.warning("activity failed (%s): %s", exc.kind, exc)
        return ActivityResult.failure(exc)


def graph_submit(api: AuditQueryApi, sink: ChunkSink, payload: JsonDict) -> JsonDict:
    submit = GraphSubmit.from_json(payload)
    call = submit.call
    chunk = call.chunk

    def body() -> ActivityResult:
        # An earlier run may have created the query: a failed attempt, or this very attempt run twice (the worker
        # died after the create, before its result was recorded: crash points C8/C9, where the payload's ``attempt``
        # is unchanged). Reuse it: the quota counts creates, and a lost id would leak a live query. The chunk's
        # submit record says what earlier runs did; only a run that died between its intent and its id leaves the
        # question open, and only then is the tenant's query list searched by name (a page per hundred queries).
        chunk_name = names.chunk_object_name(call.tenant_id, call.collection_id, chunk.start, chunk.end)
        record = names.query_record_name(chunk_name)
        # A window read before (a settle pass, a follower's re-read) needs a query of its own, created now: its name
        # carries the content it reads over, so a look-up by name never finds the earlier read's query.
        over = earlier_read(sink, chunk_name)
        after = over.sha256 if over is not None else None
        # A query that failed, vanished or stayed unfinished is resubmitted under a name of its own (the look-up by
        # name must not find the one given up on), a bounded number of times (each costs a submission).
        again = submit.resubmit
        display = (
            query_display_name(call.collection_id, chunk)
            + (f"-{after[:8]}" if after else "")
            + (f"-r{again}" if again else "")
        )
        earlier = sink.read_bytes(record)
        recorded = json.loads(earlier) if earlier is not None else None
        if recorded is not None and (recorded.get("after") != after or int(recorded.get("resubmit") or 0) != again):
            recorded = None  # left by an earlier read of the window, or the query given up on: not this one
        if recorded is not None and recorded.get("queryId"):
            return ActivityResult.success(GraphSubmitted(str(recorded["queryId"])).to_json())
        deadline = SlotDeadline.of(call.slot_json)
        deadline.check("the query's create")  # the lane's budget slot must still be held
        with deadline.guarding(every_request=True):  # ...and still be, right before each request
            query_id = None
            if recorded is not None and isinstance(api, FindsQueries):
                query_id = api.find_query(chunk.window(), display_name=str(recorded.get("displayName") or display))
            if query_id is None:
                intent = {"displayName": display, "after": after, "resubmit": again}
                write_bytes(sink, record, json.dumps(intent).encode())
                query_id = api.create_query(chunk.window(), call.filters, display_name=display)
        done = {"displayName": display, "queryId": query_id, "after": after, "resubmit": again}
        write_bytes(sink, record, json.dumps(done).encode())
        return ActivityResult.success(GraphSubmitted(query_id).to_json())

    return _guard(body)


def graph_collect(api: AuditQueryApi, sink: ChunkSink, payload: JsonDict) -> JsonDict:
    """Check the chunk's query; once it is finished and needs no split, export it in the same call.

    One activity instead of a status check followed by an export saves the orchestration a step per chunk. The
    decision (``shared.sources.graph.query_rules.graph_outcome``) reads the query's status and the input's
    ``allowIncomplete`` (the window cannot be split any further) and ``maxRecords``. Records the request's filters
    exclude are trimmed and counted (``shared.audit.filter_check``): the service's own filtering is not trusted.
    A payload that may wait (window version 2, ``GraphPoll``) checks on its schedule with the waiter of
    ``activities.graph_waits.waiting_with`` (once, at once, without one).
    """
    poll = GraphPoll.from_json(payload)
    check = _collect_check(api, sink, poll.call)
    waiter = graph_waits.current()
    if poll.wait_seconds <= 0 or waiter is None:
        return check().to_json()
    return graph_waits.run(poll, waiter, check, _cancel_requested(sink, poll.call)).to_json()


async def graph_collect_async(
    api: AuditQueryApi, sink: ChunkSink, payload: JsonDict, waiter: graph_waits.Waiter
) -> JsonDict:
    """``graph_collect`` on an event loop: a waiting payload sleeps with ``asyncio.sleep`` between its checks, and
    every check (blocking HTTP, the export) runs in a thread."""
    poll = GraphPoll.from_json(payload)
    check = _collect_check(api, sink, poll.call)
    if poll.wait_seconds <= 0:
        return (await asyncio.to_thread(check)).to_json()
    return (await graph_waits.run_async(poll, waiter, check, _cancel_requested(sink, poll.call))).to_json()


def _cancel_requested(sink: ChunkSink, call: ChunkCall) -> Callable[[], bool]:
    """Whether the collection's cancel was requested (``names.cancel_marker_name``, written by the cancel route before
    it terminates the collection): a waiting check looks before each check after its first and then returns, so a
    cancelled collection's lanes do not go on to check and export chunks for up to the wait bound after it stopped
    (terminating an orchestration does not stop its activities)."""
    name = names.cancel_marker_name(call.tenant_id, call.collection_id)

    def requested() -> bool:
        try:
            return sink.read_bytes(name) is not None
        except CollectorError as exc:  # storage unreadable: check on as before
            logger.warning("could not look for the collection's cancel request: %s", exc)
            return False

    return requested


def _collect_check(api: AuditQueryApi, sink: ChunkSink, call: ChunkCall) -> Callable[[], ActivityResult]:
    """One status check of the chunk's query (and its export when it is done), as a result envelope."""
    chunk = call.chunk

    def body() -> ActivityResult:
        query_id = str(call.query_id)
        deadline = SlotDeadline.of(call.slot_json)
        deadline.check("the query's status check")  # the lane's budget slot must still be held
        with deadline.guarding(every_request=True):  # ...and still be, right before each request and page
            return checked_and_exported(query_id)

    def checked_and_exported(query_id: str) -> ActivityResult:
        try:
            status = api.get_query(query_id)
        except QueryFailedError as exc:  # gone from the service (404): the lane resubmits it, a bounded number of times
            logger.warning("audit query %s vanished: %s", query_id, exc)
            return ActivityResult.success(GraphChecked(query_rules.FAILED, "vanished (404)").to_json())
        splittable = not call.allow_incomplete
        outcome = query_rules.graph_outcome(status, splittable=splittable, max_records=call.max_records)
        checked = GraphChecked(
            outcome, status.raw_status, status.record_count_limit_exceeded, status.approximate_record_count
        )
        if outcome == query_rules.SPLIT:
            return ActivityResult.split(checked.to_json())
        if outcome in (query_rules.PENDING, query_rules.FAILED):
            return ActivityResult.success(checked.to_json())
        # Read until the export agrees with what the query said it holds (a capped export splits the window).
        reads = GraphReads(api, query_id, status, splittable=splittable)
        summary = write_window(  # a window read before (a settle pass) is replaced only where it changed
            sink,
            tenant_id=call.tenant_id,
            collection_id=call.collection_id,
            chunk=chunk,
            pages=reads.pages(),
            attempt=call.attempt,
            incomplete=lambda: outcome == query_rules.EXPORT_INCOMPLETE or reads.incomplete,
            check=FilterCheck.of(call.filters),
            evidence=lambda: (reads.evidence(),),
        )
        exported = dataclasses.replace(checked, summary=summary.to_json(), reads=len(reads.reads))
        return ActivityResult.success(exported.to_json())

    return lambda: _guarded(body)


def graph_delete(api: AuditQueryApi, payload: JsonDict) -> JsonDict:
    """Best effort, reported truthfully: ``disposition`` is "deleted" only when the service answered a 2xx.

    The service does not support DELETE today (a 404 "No HTTP resource was found"): that is "deleteUnsupported".
    Any other failure is "deleteFailed". The chunk's outcome never changes.
    """
    query_id = str(payload["queryId"])  # a ChunkCall's: the query is all a DELETE needs of it
    try:
        outcome = api.delete_query(query_id)
    except CollectorError as exc:
        logger.warning("could not delete audit query (%s): %s", exc.kind, exc)
        failed = GraphDeleted(False, "deleteFailed", reason=redact(str(exc))[:300], kind=exc.kind)
        return ActivityResult.success(failed.to_json()).to_json()
    if not outcome.deleted:
        logger.info("audit query %s was not deleted: %s", query_id, outcome.detail)
        unsupported = GraphDeleted(False, "deleteUnsupported", reason=redact(outcome.detail)[:300])
        return ActivityResult.success(unsupported.to_json()).to_json()
    return ActivityResult.success(GraphDeleted(True, "deleted").to_json()).to_json()


def exchange_collect(api: AuditSearchApi, sink: ChunkSink, payload: JsonDict) -> JsonDict:
    """One ``Search-UnifiedAuditLog`` call of the lane's chunk, written as one part (``activities.exchange_calls``).

    Returns ``{"cursor": ...}`` (the lane carries it to its next call) or, after the last call, ``{"summary": ...}``
    of the committed chunk object. A window over the session cap asks for a split unless ``allowIncomplete``.
    """
    from activities.chunk_parts import ChunkParts
    from activities.exchange_calls import exchange_call
    from shared.sources.exchange.calls import ExchangeCall

    call = ExchangeCall.from_json(payload)
    base = call.call
    parts = ChunkParts(sink, tenant_id=base.tenant_id, collection_id=base.collection_id, chunk=base.chunk)
    return _guard(lambda: exchange_call(api, parts, call))


def finalize(sink: ChunkSink, payload: JsonDict) -> JsonDict:
    from activities.manifest import write_manifest

    def body() -> ActivityResult:
        written = write_manifest(sink, payload)
        _forget_parts(sink, str(payload["tenantId"]), str(payload["collectionId"]))
        return ActivityResult.success(written)

    return _guard(body)


def _forget_parts(sink: ChunkSink, tenant_id: str, collection_id: str) -> None:
    """Submit records, and part records a commit never cleaned up (a chunk split after some calls, a run nobody
    waited for)."""
    try:
        for name in sink.list_names(names.parts_prefix(tenant_id, collection_id)):
            sink.delete(name)
    except CollectorError as exc:  # best effort: the manifest is written and the output is complete without it
        logger.warning("could not remove leftover part records: %s", exc)


__all__: list[Any] = [
    "exchange_collect",
    "finalize",
    "graph_collect",
    "graph_collect_async",
    "graph_delete",
    "graph_submit",
]
