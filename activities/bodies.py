"""Pure activity bodies: each takes its ports (audit API, sink) and the JSON payload, and returns a JSON result.

Expected failures never raise: they come back as ``ActivityResult`` errors carrying the error ``kind`` so the
orchestrator decides (retry, split, fail the chunk, stop the collection). Records never leave these functions:
they stream to the sink and only counts plus a claim check (object name, SHA-256, size) are returned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

from activities.chunk_writer import write_chunk
from shared.audit.ports import (
    AuditFilters,
    AuditQueryApi,
    AuditSearchApi,
    QueryState,
    RecordPage,
    TimeWindow,
)
from shared.errors import CollectorError, NeedsSplitError
from shared.models import ActivityResult, Chunk, JsonDict, filters_from_json
from shared.redact import redact
from shared.sinks.base import ChunkSink

logger = logging.getLogger(__name__)


@runtime_checkable
class FindsQueries(Protocol):
    """A query API that can find a query an earlier attempt created (Graph lists queries by displayName)."""

    def find_query(self, window: TimeWindow, *, display_name: str) -> str | None: ...


@runtime_checkable
class PagesUpToCap(Protocol):
    """A search API that can page a window over its session cap as far as the cap allows.

    It yields the pages it can, then raises ``NeedsSplitError`` when records were left out.
    """

    def iter_record_pages_up_to_cap(
        self, window: TimeWindow, filters: AuditFilters, *, high_completeness: bool = False
    ) -> Iterator[RecordPage]: ...


def query_display_name(collection_id: str, chunk: Chunk) -> str:
    """Deterministic per (collection, window): a retried submit can find the query an earlier attempt created."""
    return f"ual-{collection_id}-{chunk.start:%Y%m%dT%H%M%S}-{chunk.end:%Y%m%dT%H%M%S}"


def _guard(body: Callable[[], ActivityResult]) -> JsonDict:
    """Run a body, mapping the collector's expected errors onto the result envelope."""
    try:
        return body().to_json()
    except NeedsSplitError as exc:
        logger.info("window needs a split: %s", exc)
        return ActivityResult.split({"limit": exc.limit, "reportedCount": exc.reported_count}).to_json()
    except CollectorError as exc:
        logger.warning("activity failed (%s): %s", exc.kind, exc)
        return ActivityResult.failure(exc).to_json()


def graph_submit(api: AuditQueryApi, payload: JsonDict) -> JsonDict:
    chunk = Chunk.from_json(payload["chunk"])

    def body() -> ActivityResult:
        display = query_display_name(str(payload["collectionId"]), chunk)
        query_id = None
        if isinstance(api, FindsQueries):
            # An earlier run may have created the query: a failed attempt, or this very attempt run twice (the worker
            # died after the create, before its result was recorded: crash points C8/C9, where the payload's
            # ``attempt`` is unchanged). Reuse it: the quota counts creates, and a lost id would leak a live query.
            query_id = api.find_query(chunk.window(), display_name=display)
        if query_id is None:
            query_id = api.create_query(chunk.window(), filters_from_json(payload.get("filters")), display_name=display)
        return ActivityResult.success({"queryId": query_id})

    return _guard(body)


def graph_status(api: AuditQueryApi, payload: JsonDict) -> JsonDict:
    def body() -> ActivityResult:
        status = api.get_query(str(payload["queryId"]))
        return ActivityResult.success(
            {
                "state": status.state.value if status.state is not QueryState.PENDING else "pending",
                "rawStatus": status.raw_status,
                "limitExceeded": status.record_count_limit_exceeded,
                "approximateCount": status.approximate_record_count,
            }
        )

    return _guard(body)


def graph_export(api: AuditQueryApi, sink: ChunkSink, payload: JsonDict) -> JsonDict:
    chunk = Chunk.from_json(payload["chunk"])

    def body() -> ActivityResult:
        summary = write_chunk(
            sink,
            tenant_id=str(payload["tenantId"]),
            collection_id=str(payload["collectionId"]),
            chunk=chunk,
            pages=api.iter_record_pages(str(payload["queryId"])),
            attempt=int(payload.get("attempt", 1)),
            incomplete=bool(payload.get("allowIncomplete", False)),
        )
        return ActivityResult.success(summary.to_json())

    return _guard(body)


def graph_delete(api: AuditQueryApi, payload: JsonDict) -> JsonDict:
    """Best effort, reported truthfully: ``disposition`` is "deleted" only when the service answered a 2xx.

    The service does not support DELETE today (a 404 "No HTTP resource was found"): that is "deleteUnsupported".
    Any other failure is "deleteFailed". The chunk's outcome never changes.
    """
    try:
        outcome = api.delete_query(str(payload["queryId"]))
    except CollectorError as exc:
        logger.warning("could not delete audit query (%s): %s", exc.kind, exc)
        data = {"deleted": False, "disposition": "deleteFailed", "kind": exc.kind, "reason": redact(str(exc))[:300]}
        return ActivityResult.success(data).to_json()
    if not outcome.deleted:
        logger.info("audit query %s was not deleted: %s", payload["queryId"], outcome.detail)
        data = {"deleted": False, "disposition": "deleteUnsupported", "reason": redact(outcome.detail)[:300]}
        return ActivityResult.success(data).to_json()
    return ActivityResult.success({"deleted": True, "disposition": "deleted"}).to_json()


def exchange_collect(api: AuditSearchApi, sink: ChunkSink, payload: JsonDict) -> JsonDict:
    chunk = Chunk.from_json(payload["chunk"])
    allow_incomplete = bool(payload.get("allowIncomplete", False))
    filters = filters_from_json(payload.get("filters"))
    high = bool(payload.get("highCompleteness", False))
    cut_short: list[bool] = []

    def pages() -> Iterator[RecordPage]:
        try:
            if allow_incomplete and isinstance(api, PagesUpToCap):
                yield from api.iter_record_pages_up_to_cap(chunk.window(), filters, high_completeness=high)
            else:
                yield from api.iter_record_pages(chunk.window(), filters, high_completeness=high)
        except NeedsSplitError:
            if not allow_incomplete:
                raise
            # A minimum-size window over the session cap: keep what arrived, report the chunk incomplete.
            cut_short.append(True)

    def body() -> ActivityResult:
        summary = write_chunk(
            sink,
            tenant_id=str(payload["tenantId"]),
            collection_id=str(payload["collectionId"]),
            chunk=chunk,
            pages=pages(),
            attempt=int(payload.get("attempt", 1)),
            incomplete=lambda: bool(cut_short),
        )
        return ActivityResult.success(summary.to_json())

    return _guard(body)


def finalize(sink: ChunkSink, payload: JsonDict) -> JsonDict:
    from activities.manifest import write_manifest

    def body() -> ActivityResult:
        return ActivityResult.success(write_manifest(sink, payload))

    return _guard(body)


__all__: list[Any] = [
    "exchange_collect",
    "finalize",
    "graph_delete",
    "graph_export",
    "graph_status",
    "graph_submit",
]
