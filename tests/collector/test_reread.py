"""Reading a window again (a settle pass, a follower's re-read): the object is replaced only when its content
changed, and the summary counts the records the earlier read did not return (``late``), for Graph (streamed) and
Exchange (parts) chunks alike."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

from activities.chunk_parts import ChunkParts, part_key
from activities.reread import write_window
from shared import names
from shared.audit.ports import RecordPage
from shared.models import Chunk, ChunkSummary
from shared.sinks.local import LocalFolderSink
from shared.sinks.memory import MemorySink
from tests.collector.fakes import T0, record

TENANT = "contoso.onmicrosoft.com"
CHUNK = Chunk(T0, T0 + timedelta(hours=1))
OBJECT = names.chunk_object_name(TENANT, "c1", CHUNK.start, CHUNK.end)


def records(count: int) -> list[RecordPage]:
    return [RecordPage([record(i, T0 + timedelta(minutes=i)) for i in range(count)])]


def read(sink: LocalFolderSink | MemorySink, count: int) -> ChunkSummary:
    return write_window(sink, tenant_id=TENANT, collection_id="c1", chunk=CHUNK, pages=records(count), attempt=1)


def identity(path: Path) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_ino, info.st_mtime_ns


def test_a_first_read_is_written_whole_with_nothing_late(tmp_path: Path) -> None:
    summary = read(LocalFolderSink(tmp_path), 5)
    assert (summary.records, summary.late) == (5, 0)


def test_a_read_that_finds_the_same_records_leaves_the_object_alone(tmp_path: Path) -> None:
    sink = LocalFolderSink(tmp_path)
    first = read(sink, 5)
    before = identity(tmp_path / OBJECT)
    again = read(sink, 5)
    assert identity(tmp_path / OBJECT) == before, "the object was not written again"
    assert (again.sha256, again.records, again.late) == (first.sha256, 5, 0)
    assert not [p for p in (tmp_path / ".parts").rglob("*") if p.is_file()], "nothing left staged"


def test_a_read_that_finds_late_records_replaces_the_object_and_counts_them(tmp_path: Path) -> None:
    sink = LocalFolderSink(tmp_path)
    read(sink, 5)
    before = identity(tmp_path / OBJECT)
    again = read(sink, 8)
    assert identity(tmp_path / OBJECT) != before
    lines = (tmp_path / OBJECT).read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [f"rec-{i:06d}" for i in range(8)], "each record once"
    assert (again.records, again.late) == (8, 3)
    sidecar = json.loads((tmp_path / names.summary_object_name(OBJECT)).read_text())
    assert sidecar["late"] == 3 and sidecar["sha256"] == again.sha256
    assert read(sink, 9).late == 4, "late counts every record the first read did not return"


def test_an_exchange_window_read_again_commits_the_new_read(tmp_path: Path) -> None:
    """A second pass's calls reuse the first pass's part keys; its commit must not be mistaken for the first's."""
    sink = MemorySink()

    def one_pass(count: int) -> ChunkSummary:
        parts = ChunkParts(sink, tenant_id=TENANT, collection_id="c1", chunk=CHUNK)
        parts.write(part_key(0), records(count), [], lambda repeats: {"done": True})
        return parts.commit([part_key(0)], attempt=1, incomplete=False)

    first = one_pass(5)
    for name in sink.list_names(names.parts_prefix(TENANT, "c1")):  # what finalize does after each pass
        sink.delete(name)
    second = one_pass(8)
    assert (first.records, second.records, second.late) == (5, 8, 3)
    stored = sink.read_bytes(OBJECT) or b""
    assert len(stored.splitlines()) == 8
    assert one_pass(8).late == 3, "the same records again: nothing more is late"


def test_a_reread_whose_submit_died_after_its_intent_never_finds_the_first_reads_query() -> None:
    """The first read's query has the window's plain name; a read again names its query after the content it reads
    over, so a re-run submit that looks its query up by name (its worker died between recording the intent and the
    query id) cannot pick up the first read's query and its stale records (a follower killed mid-settle did)."""
    from activities import bodies
    from shared.models import ActivityResult
    from tests.collector.fakes import FakeQueryApi

    class NamedQueries(FakeQueryApi):
        def __init__(self) -> None:
            super().__init__([record(i, T0 + timedelta(minutes=i)) for i in range(5)], polls_until_done=1)
            self.names: dict[str, str] = {}

        def create_query(self, window, filters, *, display_name):  # type: ignore[no-untyped-def]
            query = super().create_query(window, filters, display_name=display_name)
            self.names[query] = display_name
            return query

        def find_query(self, window, *, display_name):  # type: ignore[no-untyped-def]
            return next((q for q, name in self.names.items() if name == display_name), None)

    api, sink = NamedQueries(), MemorySink()
    payload = {"collectionId": "c1", "tenantId": TENANT, "chunk": CHUNK.to_json(), "filters": {}, "attempt": 1}
    first = ActivityResult.from_json(bodies.graph_submit(api, sink, payload)).data["queryId"]
    collected = ActivityResult.from_json(bodies.graph_collect(api, sink, {**payload, "queryId": first}))
    assert collected.ok and collected.data["summary"]["records"] == 5
    for name in sink.list_names(names.parts_prefix(TENANT, "c1")):  # finalize after the first pass
        sink.delete(name)
    # the second pass's submit: its intent is recorded, then its worker dies before the query id is
    again = ActivityResult.from_json(bodies.graph_submit(api, sink, payload)).data["queryId"]
    record_name = names.query_record_name(OBJECT)
    intent = json.loads(sink.read_bytes(record_name) or b"")
    sink.write_stream(record_name, [json.dumps({k: v for k, v in intent.items() if k != "queryId"}).encode()])
    rerun = ActivityResult.from_json(bodies.graph_submit(api, sink, payload)).data["queryId"]
    assert again != first and rerun == again, "the re-run found this read's query, not the first read's"
    assert api.names[again].startswith(api.names[first] + "-")


def test_an_exchange_lane_reading_a_window_again_is_not_taken_for_a_rerun_of_the_earlier_commit() -> None:
    """The lane's first call of a second pass has the key the earlier read's only call had: before the commit record,
    it found the earlier read's sidecar, took it for its own commit run again and returned the old summary (the
    settle e2e over Exchange kept every window as first read)."""
    from tests.collector.fakes import FakeSearchApi
    from tests.collector.test_chain_manifest import collect

    api, sink = FakeSearchApi([record(i, T0 + timedelta(minutes=i)) for i in range(5)], block_size=20), MemorySink()
    collect(api, sink, "c1", CHUNK)
    for name in sink.list_names(names.parts_prefix(TENANT, "c1")):  # finalize at the end of the pass
        sink.delete(name)
    api.records = [record(i, T0 + timedelta(minutes=i)) for i in range(8)]  # three arrived late
    collect(api, sink, "c1", CHUNK)
    summary = ChunkSummary.from_json(json.loads(sink.read_bytes(names.summary_object_name(OBJECT)) or b""))
    assert (summary.records, summary.late) == (8, 3)
    assert len((sink.read_bytes(OBJECT) or b"").splitlines()) == 8


def test_a_worker_that_cached_the_earlier_reads_ids_does_not_use_them_for_the_read_again() -> None:
    """The ids of a lane's parts are cached per process, keyed by the part keys; a later pass writes parts under the
    same keys. A worker still holding the earlier read's ids of part 0 must not dedupe this read's part 1 against them
    (with late records early in the window, this read's part 1 starts with records of the earlier part 0)."""
    from activities import bodies
    from activities.chunk_parts import ID_CACHE
    from shared.models import ActivityResult
    from shared.records.id_set import IdSet
    from tests.collector.fakes import FakeSearchApi

    def calls(api: FakeSearchApi, sink: MemorySink, stale: IdSet | None = None) -> ChunkSummary:
        cursor = None
        base = {"collectionId": "c1", "tenantId": TENANT, "chunk": CHUNK.to_json(), "filters": {}, "attempt": 1}
        for number in range(50):
            result = ActivityResult.from_json(
                bodies.exchange_collect(api, sink, {**base, "cursor": cursor, "call": number})
            )
            assert result.ok, result
            if "summary" in result.data:
                return ChunkSummary.from_json(result.data["summary"])
            cursor = result.data["cursor"]
            if stale is not None and number == 0:  # the next call runs in a worker that ran the earlier read's call 0
                ID_CACHE.put(OBJECT, [part_key(0)], stale)
        raise AssertionError("never committed")

    ID_CACHE.clear()
    # 7 records in blocks of 4: the first read ends in a short call (4, 3), the evidence that closes the window.
    api, sink = FakeSearchApi([record(i, T0 + timedelta(minutes=i)) for i in range(7)], block_size=4), MemorySink()
    calls(api, sink)
    for name in sink.list_names(names.parts_prefix(TENANT, "c1")):  # finalize at the end of the pass
        sink.delete(name)
    earlier_part = IdSet()
    for i in range(4):
        earlier_part.add(f"rec-{i:06d}")
    late = [record(100 + i, T0 + timedelta(seconds=10 + i)) for i in range(3)]
    api.records = sorted([*api.records, *late], key=lambda r: str(r["createdDateTime"]))
    summary = calls(api, sink, stale=earlier_part)
    assert (summary.records, summary.late) == (10, 3)


def test_a_complete_read_of_a_window_first_read_incomplete_replaces_its_summary() -> None:
    """The same records, but this read is complete: the summary must stop saying "incomplete" (the manifest would
    list the window as incomplete for good)."""
    sink = MemorySink()
    first = write_window(
        sink, tenant_id=TENANT, collection_id="c1", chunk=CHUNK, pages=records(5), attempt=1, incomplete=True
    )
    assert first.incomplete
    again = read(sink, 5)
    assert not again.incomplete and again.records == 5 and again.late == 0
    sidecar = json.loads(sink.read_bytes(names.summary_object_name(OBJECT)) or b"")
    assert sidecar["incomplete"] is False


def test_a_read_again_whose_records_all_read_well_removes_the_earlier_quarantine() -> None:
    """The earlier read quarantined a malformed record that now arrives intact: its quarantine object goes, else the
    output would hold the record twice (once quarantined, once in the chunk)."""
    from shared.audit.ports import MalformedRecord

    sink = MemorySink()
    good = [record(i, T0 + timedelta(minutes=i)) for i in range(4)]
    bad = MalformedRecord('{"id": "rec-000004", "auditData": "{trunc', "auditData is not JSON", "rec-000004",
                          T0 + timedelta(minutes=4))  # fmt: skip
    first = write_window(
        sink, tenant_id=TENANT, collection_id="c1", chunk=CHUNK, pages=[RecordPage(good, [bad])], attempt=1
    )
    assert first.malformed == 1 and first.quarantine_blob is not None
    assert sink.read_bytes(first.quarantine_blob) is not None
    again = read(sink, 5)  # rec-000004 arrives intact
    assert again.malformed == 0 and again.quarantine_blob is None and again.records == 5
    assert sink.read_bytes(first.quarantine_blob) is None, "no stale quarantine object beside the chunk"
