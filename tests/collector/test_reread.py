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
        parts.write(part_key(0), records(count), [], lambda: {"done": True})
        return parts.commit([part_key(0)], attempt=1, incomplete=False)

    first = one_pass(5)
    for name in sink.list_names(names.parts_prefix(TENANT, "c1")):  # what finalize does after each pass
        sink.delete(name)
    second = one_pass(8)
    assert (first.records, second.records, second.late) == (5, 8, 3)
    stored = sink.read_bytes(OBJECT) or b""
    assert len(stored.splitlines()) == 8
    assert one_pass(8).late == 3, "the same records again: nothing more is late"
