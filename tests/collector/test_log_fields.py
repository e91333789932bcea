"""Structured log events: the fields ride on the record (``extra``: custom dimensions where an OpenTelemetry handler
exports them) and at the end of the message as ``ual={json}`` (what the Functions host's own pipeline keeps: the
Python worker sends the formatted message only, docs/operations.md)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pytest

from shared.log_fields import EVENTS, chunk_context, log_event, parse_event
from shared.models import Chunk

CHUNK = Chunk(datetime(2024, 6, 3, 0, tzinfo=UTC), datetime(2024, 6, 3, 4, tzinfo=UTC))
PAYLOAD = {"collectionId": "c-1", "tenantId": "contoso.onmicrosoft.com", "chunk": CHUNK.to_json()}


def test_an_event_carries_its_fields_on_the_record_and_in_the_message(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with chunk_context(PAYLOAD, source="graph"):
        log_event(logging.getLogger("test"), logging.WARNING, "api.throttled", "graph throttled", status=429)
    record = caplog.records[-1]
    expected = {
        "event": "api.throttled",
        "collectionId": "c-1",
        "tenantId": "contoso.onmicrosoft.com",
        "source": "graph",
        "chunkStart": "2024-06-03T00:00:00Z",
        "chunkEnd": "2024-06-03T04:00:00Z",
        "status": 429,
    }
    assert {key: getattr(record, key) for key in expected} == expected
    assert parse_event(record.getMessage()) == expected
    assert record.getMessage().startswith("graph throttled ual={")


def test_outside_a_chunk_only_the_given_fields_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    with chunk_context(PAYLOAD, source="graph"):
        pass
    log_event(logging.getLogger("test"), logging.INFO, "api.throttled", "x", tenantId="t", retryAfterSeconds=None)
    assert parse_event(caplog.records[-1].getMessage()) == {"event": "api.throttled", "tenantId": "t"}


def test_a_message_without_fields_is_not_an_event() -> None:
    assert parse_event("collection c-1: lane 3 done") is None
    assert parse_event("x ual={not json") is None


def test_an_unknown_event_or_field_is_refused() -> None:
    """docs/operations.md queries these names: a new one is added to EVENTS (and the doc) on purpose."""
    with pytest.raises(ValueError):
        log_event(logging.getLogger("test"), logging.INFO, "chunk.exploded", "x")
    with pytest.raises(ValueError):
        log_event(logging.getLogger("test"), logging.INFO, "chunk.ended", "x", colour="red")
    assert json.dumps(sorted(EVENTS))  # names are plain strings


def test_the_operations_doc_holds_the_queries_and_queries_only_fields_the_events_carry() -> None:
    import re
    from pathlib import Path

    from shared.log_fields import CONTEXT_FIELDS, KQL

    doc = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text(encoding="utf-8")
    for name, query in KQL.items():
        assert f"```kusto\n{query}\n```" in doc, name
    known = {"event", *CONTEXT_FIELDS, *(field for fields in EVENTS.values() for field in fields)}
    used = set(re.findall(r"\be\.([A-Za-z]+)", doc + "\n".join(KQL.values())))
    assert used and sorted(used - known) == []
    events = set(re.findall(r'e\.event == "([a-z.]+)"', doc))
    assert events <= set(EVENTS) and all(f"`{event}`" in doc for event in EVENTS)
