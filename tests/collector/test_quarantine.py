"""Malformed records follow the good records' window and de-duplication rules (issue 12, item 1): the pure rules,
the chunk writer over hand-built pages, the manifest's collection-wide count, and what the normalisers can still read.
"""

from __future__ import annotations

import json
from datetime import timedelta

from activities.chunk_writer import write_chunk
from activities.manifest import write_manifest
from shared.audit.normalise import normalise_exchange_row, normalise_graph_record
from shared.audit.ports import MalformedRecord, RecordPage
from shared.models import Chunk, ChunkSummary
from shared.records.rules import Quarantine, quarantine_key
from shared.sinks.memory import MemorySink
from tests.collector.fakes import T0, record

TENANT = "contoso.onmicrosoft.com"
HOUR = timedelta(hours=1)
FIRST, SECOND = Chunk(T0, T0 + HOUR), Chunk(T0 + HOUR, T0 + 2 * HOUR)


def broken(record_id: str | None, minutes: float | None, raw: str = "") -> MalformedRecord:
    created = T0 + timedelta(minutes=minutes) if minutes is not None else None
    return MalformedRecord(
        raw or f'{{"id": "{record_id}", "auditData": "{{trunc', "auditData is not JSON", record_id, created
    )


# -- the pure rules -------------------------------------------------------------------------------------------------
def test_a_record_outside_the_window_is_trimmed_not_quarantined() -> None:
    quarantine = Quarantine(FIRST.window())
    quarantine.add(broken("in", 59.9))
    quarantine.add(broken("bleed", 60))  # the window is half-open: its end belongs to the next chunk
    quarantine.add(broken("early", -0.1))
    assert [m.record_id for m in quarantine.settle(set())] == ["in"]
    assert (quarantine.trimmed, quarantine.duplicates) == (2, 0)


def test_a_record_is_kept_once_and_not_at_all_when_a_good_copy_arrived() -> None:
    quarantine = Quarantine(FIRST.window())
    for item in (broken("a", 1), broken("a", 1), broken("b", 2), broken(None, None, "x"), broken(None, None, "x")):
        quarantine.add(item)
    kept = quarantine.settle({"b"})  # "b" also arrived intact: the output has it
    assert [m.record_id for m in kept] == ["a", None]
    assert quarantine.duplicates == 3


def test_the_key_is_the_id_or_a_hash_of_the_raw_text() -> None:
    assert quarantine_key("rec-1", "anything") == "rec-1"
    assert quarantine_key(None, "x") == quarantine_key(None, "x") != quarantine_key(None, "y")
    assert quarantine_key(None, "x").startswith("sha256:")


# -- the chunk writer -------------------------------------------------------------------------------------------------
def _write(sink: MemorySink, chunk: Chunk, pages: list[RecordPage]) -> ChunkSummary:
    return write_chunk(sink, tenant_id=TENANT, collection_id="c1", chunk=chunk, pages=pages, attempt=1)


def _quarantined(sink: MemorySink, summary: ChunkSummary) -> list[dict[str, object]]:
    if summary.quarantine_blob is None:
        return []
    return [json.loads(line) for line in (sink.read_bytes(summary.quarantine_blob) or b"").splitlines()]


def test_graph_bleed_puts_a_broken_record_in_its_own_chunk_only() -> None:
    """Each query returns its window plus the first records after it; a broken one there belongs to the next chunk."""
    sink = MemorySink()
    first_query = [
        RecordPage([record(1, T0 + timedelta(minutes=10))], [broken("mid-1", 30)]),
        RecordPage([record(2, T0 + timedelta(minutes=50))], [broken("edge", 60), broken("mid-1", 30)]),
    ]
    second_query = [RecordPage([record(3, T0 + timedelta(minutes=70))], [broken("edge", 60), broken("past", 125)])]
    first, second = _write(sink, FIRST, first_query), _write(sink, SECOND, second_query)

    assert [q["id"] for q in _quarantined(sink, first)] == ["mid-1"]
    assert [q["id"] for q in _quarantined(sink, second)] == ["edge"]
    assert (first.malformed, first.trimmed, first.duplicates, first.untimed) == (1, 1, 1, 0)
    assert (second.malformed, second.trimmed, second.untimed) == (1, 1, 0)
    assert _quarantined(sink, second)[0]["createdDateTime"] == "2024-11-17T11:00:00Z"


def test_a_record_with_an_unreadable_time_is_quarantined_where_seen_and_counted_once_per_collection() -> None:
    sink = MemorySink()
    untimed = broken("no-time", None)
    anonymous = broken(None, None, raw="<not even an object>")
    first = _write(sink, FIRST, [RecordPage([record(1, T0)], [untimed, anonymous, broken("in-first", 5)])])
    second = _write(sink, SECOND, [RecordPage([record(2, T0 + 90 * timedelta(minutes=1))], [untimed, anonymous])])
    assert (first.malformed, first.untimed, second.malformed, second.untimed) == (3, 2, 2, 2)
    assert {q["createdDateTime"] for q in _quarantined(sink, second)} == {None}

    manifest = write_manifest(
        sink,
        {
            "tenantId": TENANT,
            "collectionId": "c1",
            "ranges": [{"start": "2024-11-17T10:00:00Z", "end": "2024-11-17T12:00:00Z"}],
        },
    )
    # 5 quarantine lines in all: the record placed in its window once, the two untimed ones once each.
    assert (manifest["totals"]["malformed"], manifest["totals"]["untimed"]) == (3, 2)


def test_a_record_the_writer_cannot_use_keeps_its_id_and_is_still_placed_by_time() -> None:
    sink = MemorySink()
    no_time = {"id": "bad-time", "createdDateTime": "yesterday"}
    no_id = {"createdDateTime": "2024-11-17T12:30:00Z"}  # readable time outside the first window: trimmed
    summary = _write(sink, FIRST, [RecordPage([record(1, T0), no_time, no_id])])
    assert [(q["id"], q["createdDateTime"]) for q in _quarantined(sink, summary)] == [("bad-time", None)]
    assert (summary.records, summary.malformed, summary.untimed, summary.trimmed) == (1, 1, 1, 1)


# -- what the adapters' normalisers keep of a broken record ---------------------------------------------------
def test_a_graph_record_with_a_broken_payload_keeps_its_id_and_time() -> None:
    raw = {"id": "g-1", "createdDateTime": "2024-11-17T10:20:30.1234567Z", "auditData": '{"Id": "g-1", "Ope'}
    result = normalise_graph_record(raw)
    assert isinstance(result, MalformedRecord)
    assert (result.record_id, result.created) == ("g-1", T0 + timedelta(minutes=20, seconds=30, microseconds=123456))
    no_time = normalise_graph_record({**raw, "createdDateTime": "soon"})
    assert isinstance(no_time, MalformedRecord) and (no_time.record_id, no_time.created) == ("g-1", None)


def test_an_exchange_row_with_a_broken_audit_data_keeps_identity_and_creation_date() -> None:
    row = {"Identity": "x-1", "CreationDate": "2024-11-17T10:05:00Z", "AuditData": '{"Id": "x-1", "Creat'}
    result = normalise_exchange_row(row)
    assert isinstance(result, MalformedRecord)
    assert (result.record_id, result.created) == ("x-1", T0 + timedelta(minutes=5))
    bare = normalise_exchange_row({"AuditData": "{"})
    assert isinstance(bare, MalformedRecord) and (bare.record_id, bare.created) == (None, None)
