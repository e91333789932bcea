"""A scoped pass's manifest: a pass over some windows of a larger range (a settle pass, a follower's pass over a
day) proves the whole range, keeps the earlier passes' failures, and says which windows are still provisional."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from activities import bodies
from activities.reread import write_window
from shared.audit.ports import RecordPage
from shared.models import ActivityResult, Chunk, JsonDict, iso
from shared.sinks.memory import MemorySink
from tests.collector.fakes import T0, record

TENANT = "contoso.onmicrosoft.com"
DAY = timedelta(hours=24)


def hour(h: int) -> Chunk:
    return Chunk(T0 + timedelta(hours=h), T0 + timedelta(hours=h + 1))


def read(sink: MemorySink, chunk: Chunk, count: int) -> None:
    page = RecordPage(
        [record(int(chunk.start.timestamp()) + i, chunk.start + timedelta(minutes=i)) for i in range(count)]
    )
    write_window(sink, tenant_id=TENANT, collection_id="c1", chunk=chunk, pages=[page], attempt=1)


def span(chunk: Chunk) -> JsonDict:
    return chunk.span_json()


def failure(chunk: Chunk) -> JsonDict:
    return {"chunk": chunk.to_json(), "kind": "query_failed", "message": "failed", "attempts": 4}


def finalize(sink: MemorySink, passed: list[Chunk], **extra: Any) -> tuple[JsonDict, JsonDict]:
    payload = {
        "collectionId": "c1",
        "tenantId": TENANT,
        "source": "graph",
        "ranges": [span(c) for c in passed],
        "failures": [],
        "status": "Completed",
        **extra,
    }
    result = ActivityResult.from_json(bodies.finalize(sink, payload))
    assert result.ok, result
    return json.loads(sink.read_bytes(result.data["manifest"]) or b""), result.data


def test_a_scoped_pass_proves_the_whole_scope_with_the_earlier_failures() -> None:
    sink = MemorySink()
    for h in range(3):
        read(sink, hour(h), 3)
    scope = {"ranges": [span(Chunk(hour(0).start, hour(4).end))], "failures": [failure(hour(3))], "provisional": []}
    manifest, _ = finalize(sink, [hour(2)], scope=scope, startedAt=iso(T0 + 2 * DAY))
    assert manifest["ranges"] == scope["ranges"]
    assert [c["chunk"]["start"] for c in manifest["chunks"]] == [iso(hour(h).start) for h in range(3)]
    assert manifest["foreign"] == [], "the earlier passes' windows are the scope's own"
    assert manifest["failures"] == [failure(hour(3))]
    assert manifest["gaps"] == [hour(4).to_json()]
    assert manifest["totals"]["records"] == 9


def test_a_window_stays_provisional_until_a_pass_reads_it_after_its_band() -> None:
    sink = MemorySink()
    for h in range(4):
        read(sink, hour(h), 3)
    read(sink, hour(1), 5)  # the settle pass re-reads hour 1: two records arrived late
    started = T0 + 5 * timedelta(hours=1) + DAY  # every window ended a day or more before this pass
    scope = {
        "ranges": [span(Chunk(hour(0).start, hour(3).end))],
        "failures": [],
        "provisional": [span(hour(h)) for h in (1, 2, 3)],
    }
    manifest, written = finalize(
        sink, [hour(1), hour(3)], scope=scope, startedAt=iso(started), failures=[failure(hour(3))]
    )
    flags = {c["chunk"]["start"]: c["provisional"] for c in manifest["chunks"]}
    assert flags == {
        iso(hour(0).start): False,  # never provisional
        iso(hour(1).start): False,  # read again after its band: final
        iso(hour(2).start): True,  # not read again yet
        iso(hour(3).start): True,  # its re-read failed: the earlier read stands, still provisional
    }
    late = {c["chunk"]["start"]: c["late"] for c in manifest["chunks"]}
    assert late[iso(hour(1).start)] == 2 and manifest["totals"]["late"] == 2
    assert [w["start"] for w in written["provisionalWindows"]] == [iso(hour(2).start), iso(hour(3).start)]
    assert manifest["latency"]["provisional"] == [span(Chunk(hour(2).start, hour(3).end))]
    assert manifest["latency"]["settledAfter"] == iso(hour(3).end + DAY)
    assert manifest["latency"]["final"] is False


def test_a_doomed_pass_leaves_what_it_was_asked_to_read_as_it_was() -> None:
    sink = MemorySink()
    read(sink, hour(0), 3)
    scope = {"ranges": [span(hour(0))], "failures": [], "provisional": [span(hour(0))]}
    manifest, _ = finalize(sink, [hour(0)], scope=scope, startedAt=iso(T0 + 3 * DAY), status="Failed")
    assert [c["provisional"] for c in manifest["chunks"]] == [True]


def test_windows_read_by_a_pass_within_their_band_are_provisional_by_time() -> None:
    """A follower's first read of a window that just closed: provisional although no earlier pass flagged it."""
    sink = MemorySink()
    read(sink, hour(5), 3)
    scope = {"ranges": [span(Chunk(hour(0).start, hour(6).start))], "failures": [], "provisional": []}
    manifest, written = finalize(sink, [hour(5)], scope=scope, startedAt=iso(hour(5).end + timedelta(hours=2)))
    assert [c["provisional"] for c in manifest["chunks"]] == [True]
    assert written["provisionalWindows"] == [hour(5).to_json()]
    assert manifest["latency"]["final"] is False


def test_a_settled_manifest_is_final() -> None:
    sink = MemorySink()
    read(sink, hour(0), 3)
    scope = {"ranges": [span(hour(0))], "failures": [], "provisional": [span(hour(0))]}
    manifest, written = finalize(sink, [hour(0)], scope=scope, startedAt=iso(T0 + 3 * DAY))
    assert manifest["latency"] == {"assumedHours": 24.0, "provisional": [], "settledAfter": None, "final": True}
    assert written["provisionalWindows"] == []
