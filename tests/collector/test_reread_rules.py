"""Reading a window again (``activities.reread``): the rules a hand mutation showed no other test held
(docs/testing.md, "Mutation"): late records never counted back, the request's filters on every read, nothing left
staged, the summary and quarantine of a read that changed only in its malformed records, incompleteness or
evidence."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest

from activities.reread import write_window
from shared import names
from shared.audit.filter_check import FilterCheck
from shared.audit.ports import AuditFilters, MalformedRecord, RecordPage
from shared.models import ChunkSummary
from shared.sinks.memory import MemorySink
from tests.collector.fakes import T0, record
from tests.collector.test_reread import CHUNK, OBJECT, TENANT, read, records


def write(sink: MemorySink, pages: list[RecordPage] | Iterator[RecordPage], **kwargs: object) -> ChunkSummary:
    return write_window(sink, tenant_id=TENANT, collection_id="c1", chunk=CHUNK, pages=pages, attempt=1, **kwargs)  # type: ignore[arg-type]


def broken(i: int) -> MalformedRecord:
    moment = T0 + timedelta(minutes=i)
    return MalformedRecord(f'{{"id": "rec-{i:06d}", "auditData": "{{trunc', "auditData is not JSON", f"rec-{i:06d}",
                           moment)  # fmt: skip


def ids(sink: MemorySink) -> list[str]:
    return [json.loads(line)["id"] for line in (sink.objects[OBJECT]).splitlines()]


def test_a_read_returning_fewer_records_counts_none_late_and_takes_none_back() -> None:
    sink = MemorySink()
    read(sink, 5)
    assert read(sink, 8).late == 3
    assert read(sink, 7).late == 3, "a record gone from the window is no late record taken back"


def test_the_requests_filters_trim_the_first_read_and_every_read_again() -> None:
    """A record the service returned although it cannot match the request's filters is trimmed, whichever read it
    comes in (``shared.audit.filter_check``)."""
    sink = MemorySink()
    check = FilterCheck.of(AuditFilters(operations=("MailItemsAccessed",)))
    other = {**record(9, T0 + timedelta(minutes=9)), "operation": "FileDeleted"}
    first = write(sink, [RecordPage([*records(3)[0].records, other])], check=check)
    assert first.records == 3 and ids(sink) == [f"rec-{i:06d}" for i in range(3)]
    later = {**record(10, T0 + timedelta(minutes=10)), "operation": "FileDeleted"}
    again = write(sink, [RecordPage([*records(4)[0].records, other, later])], check=check)
    assert again.records == 4 and ids(sink) == [f"rec-{i:06d}" for i in range(4)] and again.late == 1


def test_a_read_again_that_fails_midway_leaves_nothing_staged_and_the_earlier_read_standing() -> None:
    sink = MemorySink()
    first = read(sink, 5)
    before = sink.objects[OBJECT]

    def pages() -> Iterator[RecordPage]:
        yield records(8)[0]
        raise ConnectionError("the service went away")

    with pytest.raises(ConnectionError):
        write(sink, pages())
    assert sink.parts == {}, "the staged pages of the failed read are discarded"
    assert sink.objects[OBJECT] == before
    summary = ChunkSummary.from_json(json.loads(sink.read_bytes(names.summary_object_name(OBJECT)) or b""))
    assert summary == first


def test_a_read_again_that_replaced_the_object_leaves_nothing_staged() -> None:
    sink = MemorySink()
    read(sink, 5)
    assert read(sink, 8).records == 8 and ids(sink)[-1] == "rec-000007"
    assert sink.parts == {}


def test_a_malformed_record_gone_from_the_window_is_a_change_though_the_good_records_are_the_same() -> None:
    sink = MemorySink()
    first = write(sink, [RecordPage(records(4)[0].records, [broken(4)])])
    assert first.malformed == 1 and first.quarantine_blob is not None
    again = read(sink, 4)
    assert again.malformed == 0 and again.quarantine_blob is None
    assert sink.read_bytes(first.quarantine_blob) is None


def test_a_record_still_malformed_keeps_its_quarantine_when_the_window_gained_records() -> None:
    sink = MemorySink()
    first = write(sink, [RecordPage(records(4)[0].records, [broken(4)])])
    again = write(sink, [RecordPage([*records(4)[0].records, record(5, T0 + timedelta(minutes=5))], [broken(4)])])
    assert again.records == 5 and again.malformed == 1 and again.quarantine_blob is not None
    quarantined = sink.read_bytes(again.quarantine_blob)
    assert quarantined is not None and b"rec-000004" in quarantined, "the record is still quarantined, not lost"
    assert first.quarantine_blob == again.quarantine_blob or sink.read_bytes(first.quarantine_blob) is None


def test_a_read_again_known_incomplete_only_once_its_pages_are_read_replaces_the_summary() -> None:
    """``incomplete`` may be a callable read after the pages (an Exchange session's verdict): its answer counts."""
    sink = MemorySink()
    read(sink, 5)
    again = write(sink, records(5), incomplete=lambda: True)
    assert again.incomplete is True
    sidecar = json.loads(sink.read_bytes(names.summary_object_name(OBJECT)) or b"")
    assert sidecar["incomplete"] is True


def test_a_read_again_that_changed_carries_its_own_evidence() -> None:
    sink = MemorySink()
    read(sink, 5)
    proof = ({"kind": "confirmedEmpty", "session": "s-2"},)
    again = write(sink, records(8), evidence=lambda: proof)
    assert again.evidence == proof
    sidecar = json.loads(sink.read_bytes(names.summary_object_name(OBJECT)) or b"")
    assert sidecar["evidence"] == [proof[0]]
