"""Structured log events an operator queries (docs/operations.md): which collection, chunk window, source and tenant.

Each event carries its fields twice:

- as attributes of the log record (``extra``): an OpenTelemetry log handler (the Azure Monitor distro, when the app
  enables it) exports them as custom dimensions;
- at the end of the message, as `` ual={json}``: the Functions host's own pipeline, what the template deploys, keeps
  only the formatted message of a Python record (the worker's ``RpcLog`` carries no properties), so the queries read
  the fields from there. ``parse_event`` reads them back.

Activities set the chunk's fields once (``chunk_context``); every event logged inside, down to the HTTP layer's
throttling, carries them. The orchestrator logs only when not replaying. Field values are never secrets.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

MARK = " ual="

CONTEXT_FIELDS = ("collectionId", "tenantId", "source", "chunkStart", "chunkEnd")
EVENTS: dict[str, frozenset[str]] = {
    "chunk.ended": frozenset({"outcome", "records", "incomplete", "errorKind", "error", "attempts", "seconds"}),
    "api.throttled": frozenset({"api", "status", "attempt", "retryAfterSeconds", "waitSeconds"}),
    "collection.started": frozenset({"chunks", "concurrency"}),
}
"""Each event and the fields it may carry besides ``CONTEXT_FIELDS`` (docs/operations.md queries these names)."""

_context: ContextVar[Mapping[str, Any] | None] = ContextVar("ual_log_context", default=None)


@contextmanager
def chunk_context(payload: Mapping[str, Any], *, source: str) -> Iterator[None]:
    """Inside, every event carries the payload's collection, tenant and chunk window, and ``source``."""
    chunk = payload.get("chunk") or {}
    fields = {
        "collectionId": payload.get("collectionId"),
        "tenantId": payload.get("tenantId"),
        "source": source,
        "chunkStart": chunk.get("start"),
        "chunkEnd": chunk.get("end"),
    }
    token = _context.set({key: value for key, value in fields.items() if value is not None})
    try:
        yield
    finally:
        _context.reset(token)


def log_event(logger: logging.Logger, level: int, event: str, text: str, **fields: Any) -> None:
    """Log ``text`` with the event's fields (the chunk context's, then ``fields``; ``None`` values left out)."""
    allowed = EVENTS.get(event)
    if allowed is None:
        raise ValueError(f"unknown log event {event!r}: add it to shared.log_fields.EVENTS and docs/operations.md")
    unknown = set(fields) - allowed - set(CONTEXT_FIELDS)
    if unknown:
        raise ValueError(f"log event {event!r} has no field {sorted(unknown)}")
    merged = {"event": event, **(_context.get() or {}), **{k: v for k, v in fields.items() if v is not None}}
    if logger.isEnabledFor(level):
        text = text.replace("\n", " ")
        logger.log(level, "%s%s%s", text, MARK, json.dumps(merged, separators=(",", ":")), extra=merged)


def parse_event(message: str) -> dict[str, Any] | None:
    """The fields of a logged event's message, or ``None`` for a message that is not one."""
    _, mark, tail = message.rpartition(MARK)
    if not mark:
        return None
    try:
        fields = json.loads(tail)
    except ValueError:
        return None
    return fields if isinstance(fields, dict) and "event" in fields else None


KQL_PREFIX = """traces
| where message contains " ual={"
| extend e = parse_json(extract(@" ual=(\\{.*\\})$", 1, message))"""
KQL = {
    "failed": KQL_PREFIX
    + """
| where e.event == "chunk.ended" and e.outcome == "failed" and e.collectionId == "<collection id>"
| project timestamp, chunkStart = tostring(e.chunkStart), chunkEnd = tostring(e.chunkEnd),
    errorKind = tostring(e.errorKind), attempts = toint(e.attempts), error = tostring(e.error)
| order by chunkStart asc""",
    "throttling": KQL_PREFIX
    + """
| where e.event == "api.throttled"
| summarize throttled = count() by tenantId = tostring(e.tenantId), source = tostring(e.source), bin(timestamp, 5m)
| order by timestamp asc
| render timechart""",
    "slowest": KQL_PREFIX
    + """
| where e.event == "chunk.ended" and e.outcome == "done"
| project timestamp, collectionId = tostring(e.collectionId), chunkStart = tostring(e.chunkStart),
    chunkEnd = tostring(e.chunkEnd), seconds = todouble(e.seconds), records = toint(e.records)
| top 10 by seconds desc""",
}
"""docs/operations.md's queries over these events in Application Insights (the live page shows them for its
collection; a test holds the document to them). ``<collection id>`` is replaced by the page."""
