"""An Exchange chunk written in parts, one InvokeCommand call per activity: exact output, and exactly once when an
activity runs twice (crash points C2/C8/C9) or its result is lost, against a fake service whose sessions advance
server-side (a call the lane never heard of still moves the session on)."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from activities import bodies
from activities.chunk_parts import ID_CACHE, ChunkParts, part_key
from activities.chunk_writer import write_chunk
from shared import names
from shared.audit.exchange_paging import SessionBrokenError
from shared.audit.ports import RecordPage
from shared.errors import SinkError
from shared.models import ActivityResult, Chunk, ChunkSummary
from shared.sinks.base import ChunkSink, StoredObject
from shared.sinks.local import LocalFolderSink
from shared.sinks.memory import MemorySink
from tests.collector.fakes import T0, FakeSearchApi, synthetic

TENANT = "contoso.onmicrosoft.com"
CHUNK = Chunk(T0, T0 + timedelta(hours=1))
NAME = names.chunk_object_name(TENANT, "c1", CHUNK.start, CHUNK.end)


def payload(**extra: Any) -> dict[str, Any]:
    return {"collectionId": "c1", "tenantId": TENANT, "chunk": CHUNK.to_json(), "filters": {}, "attempt": 1, **extra}


def call(api: FakeSearchApi, sink: ChunkSink, cursor: Any, number: int, **extra: Any) -> ActivityResult:
    return ActivityResult.from_json(bodies.exchange_collect(api, sink, payload(cursor=cursor, call=number, **extra)))


def whole(api: FakeSearchApi, sink: ChunkSink, **extra: Any) -> tuple[ChunkSummary, int]:
    """Every call of the chunk; (its summary, calls made)."""
    cursor = None
    for number in range(100):
        result = call(api, sink, cursor, number, **extra)
        assert result.ok, result
        if "summary" in result.data:
            return ChunkSummary.from_json(result.data["summary"]), number + 1
        cursor = result.data["cursor"]
    raise AssertionError("never finished")


def ids_of(sink: ChunkSink, summary: ChunkSummary) -> list[str]:
    return [json.loads(line)["id"] for line in (sink.read_bytes(summary.blob) or b"").splitlines()]


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    ID_CACHE.clear()


class Recording(FakeSearchApi):
    """Keeps every page it served, to write the same pages in one pass for comparison."""

    served_pages: list[RecordPage] | None = None

    def read_block(self, *args: Any, **kwargs: Any) -> Any:
        if self.served_pages is None:
            self.served_pages = []
        for page in super().read_block(*args, **kwargs):
            self.served_pages.append(page)
            yield page


def test_parts_join_into_the_object_a_single_pass_writes_byte_for_byte(tmp_path: Path) -> None:
    records = synthetic(T0, 1, 95)
    records.insert(40, records[3])  # a repeat in a later block
    records.insert(70, {**records[60], "createdDateTime": "not a time"})  # unusable: quarantined
    api = Recording(records, cap=500, block_size=20, page_size=7, malformed_every=30)
    sink = LocalFolderSink(tmp_path / "parts")
    summary, calls = whole(api, sink)
    assert calls == 5 and api.calls == 5  # 97 rows in blocks of 20: one activity per call
    single = MemorySink()
    pages = api.served_pages or []
    expected = write_chunk(single, tenant_id=TENANT, collection_id="c1", chunk=CHUNK, pages=pages, attempt=1)
    assert sink.read_bytes(summary.blob) == single.read_bytes(expected.blob)
    assert summary == expected  # every count, the hash, the size, the quarantine
    # the repeat, and the unusable copy of a record that also arrived intact; two broken rows quarantined
    assert (summary.records, summary.duplicates, summary.malformed) == (95, 2, 2)
    assert summary.sha256 == hashlib.sha256(sink.read_bytes(summary.blob) or b"").hexdigest()
    assert sink.read_bytes(summary.quarantine_blob or "") == single.read_bytes(expected.quarantine_blob or "")
    sidecar = json.loads(sink.read_bytes(names.summary_object_name(summary.blob)) or b"")
    assert sidecar["parts"] == [part_key(i) for i in range(5)]
    # nothing of the parts is left: no staged data, no part records; only the record of this commit, which tells a
    # re-run of it from a later pass reading the window again, until finalize removes parts/ at the pass's end
    assert not [p for p in (tmp_path / "parts" / ".parts").rglob("*") if p.is_file()]
    (commit,) = sink.list_names(names.parts_prefix(TENANT, "c1"))
    assert commit.endswith("/commit.json")


def test_a_call_run_twice_returns_its_outcome_and_does_not_read_the_session_again() -> None:
    api, sink = FakeSearchApi(synthetic(T0, 1, 50), cap=1000, block_size=20), MemorySink()
    first = call(api, sink, None, 0)
    again = call(api, sink, None, 0)  # the same activity message, delivered again (C2/C9) or rerun (C8)
    assert again == first and api.calls == 1
    second = call(api, sink, first.data["cursor"], 1)
    third = call(api, sink, second.data["cursor"], 2)
    assert "summary" in third.data
    assert call(api, sink, second.data["cursor"], 2) == third  # the committing call run twice: the same summary
    summary = ChunkSummary.from_json(third.data["summary"])
    assert ids_of(sink, summary) == [r["id"] for r in synthetic(T0, 1, 50)]
    assert api.calls == 3


def test_a_lost_result_is_retried_as_a_new_call_and_the_output_stays_exact() -> None:
    records = synthetic(T0, 1, 70)
    api, sink = FakeSearchApi(records, cap=1000, block_size=20), MemorySink()
    first = call(api, sink, None, 0)
    call(api, sink, first.data["cursor"], 1)  # ran (the session moved on) but its result never reached the lane
    # The lane retries with the cursor it has and a new call number: the session is past it, so the activity
    # starts a new session; what it reads again is removed by id against the parts the lane lists.
    retried = call(api, sink, first.data["cursor"], 2)
    cursor = retried.data["cursor"]
    number = 3
    while "summary" not in (result := call(api, sink, cursor, number)).data:
        cursor, number = result.data["cursor"], number + 1
    summary = ChunkSummary.from_json(result.data["summary"])
    assert ids_of(sink, summary) == [r["id"] for r in records]
    assert summary.records == 70 and summary.duplicates == 20  # block one came twice
    assert part_key(1) not in json.loads(sink.read_bytes(names.summary_object_name(NAME)) or b"")["parts"]


def test_ids_of_earlier_parts_come_back_from_storage_in_another_process() -> None:
    records = synthetic(T0, 1, 60)
    records[45] = records[5]  # the repeat sits two blocks later
    api, sink = FakeSearchApi(records, cap=1000, block_size=20), MemorySink()
    cursor = None
    for number in range(3):
        ID_CACHE.clear()  # each call in a fresh worker process
        result = call(api, sink, cursor, number)
        cursor = result.data.get("cursor")
    summary = ChunkSummary.from_json(result.data["summary"])
    assert summary.records == 59 and summary.duplicates == 1
    assert len(set(ids_of(sink, summary))) == 59


def test_a_commit_that_crashed_before_its_summary_commits_again_identically() -> None:
    class LosesOneSummary(MemorySink):
        def __init__(self) -> None:
            super().__init__()
            self.fail = True

        def write_stream(self, name: str, parts: Any) -> StoredObject:
            if name.endswith(".summary.json") and self.fail:
                self.fail = False
                raise SinkError("worker died")
            return super().write_stream(name, parts)

    api, sink = FakeSearchApi(synthetic(T0, 1, 30), cap=1000, block_size=20), LosesOneSummary()
    first = call(api, sink, None, 0)
    crashed = call(api, sink, first.data["cursor"], 1)
    assert not crashed.ok and crashed.error is not None and crashed.error.kind == "sink"
    done = call(api, sink, first.data["cursor"], 1)  # the same call again: its part is recorded, the commit reruns
    summary = ChunkSummary.from_json(done.data["summary"])
    assert api.calls == 2 and ids_of(sink, summary) == [r["id"] for r in synthetic(T0, 1, 30)]


def test_a_stale_call_after_the_commit_changes_nothing() -> None:
    api, sink = FakeSearchApi(synthetic(T0, 1, 30), cap=1000, block_size=20), MemorySink()
    first = call(api, sink, None, 0)
    last = call(api, sink, first.data["cursor"], 1)
    before = dict(sink.objects)
    # call 1 delivered again after the chunk committed: its part record is gone with the commit
    stale = call(api, sink, first.data["cursor"], 1)
    assert stale.ok and stale.data == last.data  # the commit is recorded: the same summary, nothing rewritten
    assert sink.objects == before
    # a stale copy of call 0 (under a later number) reads a new session into a part that no commit will list
    late = call(api, sink, None, 5)
    assert late.ok and "cursor" in late.data
    assert {k: v for k, v in sink.objects.items() if "/chunks/" in k} == {
        k: v for k, v in before.items() if "/chunks/" in k
    }


def test_a_split_forgets_the_parts_already_written() -> None:
    records = synthetic(T0, 1, 10) + [{**r, "id": f"o-{r['id']}"} for r in synthetic(T0, 1, 80)]
    api, sink = FakeSearchApi(records, cap=50, block_size=20), MemorySink()
    # Two record types, two sessions: the fake serves the same rows to each, over the cap for the second.
    api.cap = 10**6
    first = call(api, sink, None, 0, filters={"record_types": ["exchangeItem", "sharePoint"]})
    assert sink.parts and any("/parts/" in n for n in sink.objects)
    api.cap = 50
    cursor = {**first.data["cursor"], "typeIndex": 1, "sessionId": None, "nextIndex": 1, "resultCount": None}
    split = call(api, sink, cursor, 1, filters={"record_types": ["exchangeItem", "sharePoint"]})
    assert split.needs_split
    assert sink.parts == {} and not any("/parts/" in n for n in sink.objects)


def test_parts_write_against_every_earlier_part() -> None:
    sink = MemorySink()
    parts = ChunkParts(sink, tenant_id=TENANT, collection_id="c1", chunk=CHUNK)
    rows = synthetic(T0, 1, 6)
    first = parts.write("00000", [RecordPage(rows[:4])], [], lambda: {"n": 0})
    second = parts.write("00001", [RecordPage(rows[2:])], ["00000"], lambda: {"n": 1})
    assert (first.records, second.records, second.duplicates) == (4, 2, 2)
    assert parts.load("00001") == second and parts.load("00009") is None
    summary = parts.commit(["00000", "00001"], attempt=2, incomplete=False)
    assert summary.records == 6 and summary.duplicates == 2 and summary.attempts == 2
    assert [json.loads(x)["id"] for x in (sink.read_bytes(summary.blob) or b"").splitlines()] == [r["id"] for r in rows]


class SessionsBreakAtTheirSecondCall(FakeSearchApi):
    """A service on which every session breaks after its first block (each new session reads block one again)."""

    def read_block(self, *args: Any, **kwargs: Any) -> Any:
        session = args[2]
        if session.next_index > 1:
            self.calls += 1
            raise SessionBrokenError(f"session {session.session_id}: ResultIndex not contiguous")
        yield from super().read_block(*args, **kwargs)


def test_sessions_that_keep_breaking_fail_the_chunk_instead_of_calling_for_ever() -> None:
    # Each call's new session succeeds once, so a bound that counted only within one call never ran out: the lane
    # called on and on, writing the first block again and again. The bound holds across the chunk's calls.
    api, sink = SessionsBreakAtTheirSecondCall(synthetic(T0, 1, 50), cap=1000, block_size=20), MemorySink()
    cursor = None
    for number in range(12):
        result = call(api, sink, cursor, number)
        if not result.ok:
            break
        cursor = result.data["cursor"]
    assert not result.ok and result.error is not None, "the lane kept calling a session that always breaks"
    assert result.error.retryable and "new session(s) did not help" in result.error.message
    assert number == 3 and api.calls == 6  # a first block, then 2 new sessions (each read block one again), then out


@pytest.mark.parametrize("cached", [True, False])
def test_ids_of_any_spelling_are_exact_across_parts(cached: bool) -> None:
    """GUIDs in canonical form are kept as numbers, any other spelling as text: an upper-case GUID is another id."""
    sink = MemorySink()
    parts = ChunkParts(sink, tenant_id=TENANT, collection_id="c1", chunk=CHUNK)
    guid = "3c9e1f2a-5b6d-4e7f-8a90-1b2c3d4e5f60"
    spellings = [guid, guid.upper(), "rec-1", "", "00000000-0000-0000-0000-000000000000"]
    rows = synthetic(T0, 1, len(spellings))
    for row, record_id in zip(rows, spellings, strict=True):
        row["id"] = record_id
    first = parts.write("00000", [RecordPage(rows)], [], lambda: {})
    if not cached:
        ID_CACHE.clear()  # the next call runs in another worker process: the ids are read back from the part
    again = [{**row, "id": record_id} for row, record_id in zip(rows, [*spellings[1:], guid], strict=True)]
    second = parts.write("00001", [RecordPage([*again, {**rows[0], "id": guid[:-1] + "1"}])], ["00000"], lambda: {})
    assert (first.records, second.records, second.duplicates) == (5, 1, 5)
    summary = parts.commit(["00000", "00001"], attempt=1, incomplete=False)
    assert ids_of(sink, summary) == [*spellings, guid[:-1] + "1"]
