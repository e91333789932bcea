"""Activity bodies over in-memory fakes of the audit ports and a real sink."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from pathlib import Path

import pytest

from activities import bodies
from shared.errors import AuthenticationError, TransientApiError
from shared.models import ActivityResult, Chunk, ChunkSummary
from shared.sinks.base import ChunkSink
from shared.sinks.local import LocalFolderSink
from shared.sinks.memory import MemorySink
from tests.collector.fakes import T0, FakeQueryApi, FakeSearchApi, synthetic

TENANT = "contoso.onmicrosoft.com"


def payload(chunk: Chunk, **extra: object) -> dict[str, object]:
    return {"collectionId": "c1", "tenantId": TENANT, "chunk": chunk.to_json(), "filters": {}, "attempt": 1, **extra}


def lines(data: bytes | None) -> list[dict[str, object]]:
    assert data is not None
    return [json.loads(line) for line in data.splitlines()]


def run_graph_chunk(api: FakeQueryApi, sink: MemorySink, chunk: Chunk) -> ActivityResult:
    """Submit, a check that finds the query running, a check that finds it done and exports it, delete."""
    submitted = ActivityResult.from_json(bodies.graph_submit(api, sink, payload(chunk)))
    query_id = submitted.data["queryId"]
    result = ActivityResult.from_json(bodies.graph_collect(api, sink, payload(chunk, queryId=query_id)))
    if result.data["outcome"] == "pending":  # a rerun reuses the finished query its first run recorded
        assert result.ok and result.data == {
            "outcome": "pending",
            "rawStatus": "running",
            "limitExceeded": False,
            "approximateCount": None,
        }
        assert not chunk_objects(sink) or chunk_written_before(sink)  # a running query writes nothing
        result = ActivityResult.from_json(bodies.graph_collect(api, sink, payload(chunk, queryId=query_id)))
    assert result.ok and result.data["outcome"] == "export"
    bodies.graph_delete(api, payload(chunk, queryId=query_id))
    return ActivityResult.success(result.data["summary"])


def chunk_written_before(sink: MemorySink) -> bool:
    return any(name.endswith(".summary.json") for name in sink.objects)


def chunk_objects(sink: MemorySink) -> list[str]:
    return [name for name in sink.objects if "/chunks/" in name]


def test_a_finished_query_over_the_cap_asks_for_a_split_and_writes_nothing() -> None:
    api, sink = FakeQueryApi(synthetic(T0, 1, 40), limit=20, polls_until_done=1), MemorySink()
    chunk = Chunk(T0, T0 + timedelta(hours=1))
    query_id = ActivityResult.from_json(bodies.graph_submit(api, sink, payload(chunk))).data["queryId"]
    split = ActivityResult.from_json(bodies.graph_collect(api, sink, payload(chunk, queryId=query_id)))
    assert split.needs_split and split.data["outcome"] == "split" and chunk_objects(sink) == []
    # told that the window cannot be split, the same check exports what the query holds, reported incomplete
    told = payload(chunk, queryId=query_id, allowIncomplete=True)
    result = ActivityResult.from_json(bodies.graph_collect(api, sink, told))
    assert result.ok and result.data["outcome"] == "export_incomplete"
    summary = ChunkSummary.from_json(result.data["summary"])
    assert summary.incomplete and summary.records == 20


def test_graph_export_trims_dedupes_and_returns_only_a_claim_check() -> None:
    records = synthetic(T0, 2, 30)
    api, sink = FakeQueryApi(records), MemorySink()
    chunk = Chunk(T0, T0 + timedelta(hours=1))
    result = run_graph_chunk(api, sink, chunk)
    summary = ChunkSummary.from_json(result.data)
    assert (summary.records, summary.trimmed, summary.duplicates) == (30, 1, 1)
    written = sink.read_bytes(summary.blob)
    assert [r["id"] for r in lines(written)] == [r["id"] for r in records[:30]]
    assert summary.sha256 == hashlib.sha256(written or b"").hexdigest()
    assert "records" not in json.dumps(result.data).replace('"records":', "")  # no record content in the result
    assert len(json.dumps(result.to_json())) < 1000
    assert api.deleted == ["q1"]
    sidecar = json.loads(sink.read_bytes(summary.blob.replace(".jsonl", ".summary.json")) or b"")
    assert sidecar["records"] == 30


def test_rerun_of_an_export_gives_identical_output() -> None:
    api, sink = FakeQueryApi(synthetic(T0, 1, 40)), MemorySink()
    chunk = Chunk(T0, T0 + timedelta(hours=1))
    first = ChunkSummary.from_json(run_graph_chunk(api, sink, chunk).data)
    before = dict(sink.objects)
    second = ChunkSummary.from_json(run_graph_chunk(api, sink, chunk).data)  # at-least-once: ran twice
    assert first.sha256 == second.sha256
    outputs = {name: data for name, data in sink.objects.items() if "/parts/" not in name}
    assert outputs == {name: data for name, data in before.items() if "/parts/" not in name}
    # The window had a summary when the second run submitted: a read again, which asks the service anew (a stale
    # query would miss late records) and replaced nothing, the content being the same. Within one pass a lane never
    # submits again once its chunk is written: a lost submit result finds the id its first run recorded.
    assert api.created == 2


def test_expected_errors_come_back_as_results_with_kind() -> None:
    chunk = Chunk(T0, T0 + timedelta(hours=1))
    api = FakeQueryApi([], errors={"create": [TransientApiError("429", status=429, retry_after=12.0)]})
    result = ActivityResult.from_json(bodies.graph_submit(api, MemorySink(), payload(chunk)))
    assert not result.ok and result.error is not None
    assert (result.error.kind, result.error.retry_after, result.error.dooms_collection) == ("transient", 12.0, False)
    api.errors["create"] = [AuthenticationError("invalid client secret (AUDIT_CLIENT_SECRET)")]
    doomed = ActivityResult.from_json(bodies.graph_submit(api, MemorySink(), payload(chunk)))
    assert doomed.error is not None and doomed.error.kind == "authentication" and doomed.error.dooms_collection


def test_failed_delete_does_not_fail_the_chunk() -> None:
    api = FakeQueryApi([], errors={"delete": [TransientApiError("503")]})
    result = ActivityResult.from_json(bodies.graph_delete(api, {"queryId": "q9"}))
    assert result.ok and result.data == {
        "deleted": False,
        "disposition": "deleteFailed",
        "kind": "transient",
        "reason": "503",
    }


def run_exchange_chunk(api: FakeSearchApi, sink: ChunkSink, base: dict[str, object]) -> ActivityResult:
    """The lane's calls, one activity each, each carrying the cursor the previous one returned; the last result."""
    cursor = None
    for call in range(1000):
        result = ActivityResult.from_json(bodies.exchange_collect(api, sink, {**base, "cursor": cursor, "call": call}))
        if not result.ok or "summary" in result.data:
            return ActivityResult(result.ok, result.data.get("summary", result.data), result.error, result.needs_split)
        cursor = result.data["cursor"]
    raise AssertionError("the chunk never finished")


def test_exchange_collect_writes_chunk_and_quarantines_malformed(tmp_path: Path) -> None:
    api = FakeSearchApi(synthetic(T0, 1, 20), malformed_every=10, block_size=15)
    sink = LocalFolderSink(tmp_path)
    result = run_exchange_chunk(api, sink, payload(Chunk(T0, T0 + timedelta(hours=1))))
    summary = ChunkSummary.from_json(result.data)
    assert summary.records == 20 and summary.malformed == 2 and not summary.incomplete
    assert summary.quarantine_blob is not None
    quarantined = lines(sink.read_bytes(summary.quarantine_blob))
    assert [q["reason"] for q in quarantined] == ["auditData does not parse"] * 2


def test_exchange_over_cap_asks_for_split_and_writes_nothing() -> None:
    api, sink = FakeSearchApi(synthetic(T0, 1, 60), cap=50), MemorySink()
    result = run_exchange_chunk(api, sink, payload(Chunk(T0, T0 + timedelta(hours=1))))
    assert result.needs_split and not result.ok
    assert sink.objects == {} and sink.parts == {}


def test_exchange_minimum_window_over_cap_is_reported_incomplete() -> None:
    api, sink = FakeSearchApi(synthetic(T0, 1, 60), cap=40), MemorySink()
    chunk = Chunk(T0, T0 + timedelta(hours=1))
    result = run_exchange_chunk(api, sink, payload(chunk, allowIncomplete=True))
    assert result.ok and ChunkSummary.from_json(result.data).incomplete


def test_unusable_records_are_quarantined_not_dropped() -> None:
    records = synthetic(T0, 1, 4)
    records[1] = {"id": "no-time"}
    records[2] = {**records[2], "createdDateTime": "not a time"}
    api, sink = FakeSearchApi(records), MemorySink()
    result = run_exchange_chunk(api, sink, payload(Chunk(T0, T0 + timedelta(hours=1))))
    summary = ChunkSummary.from_json(result.data)
    assert summary.records == 2 and summary.malformed == 2


def test_finalize_manifest_covers_the_range_and_reports_gaps() -> None:
    api, sink = FakeSearchApi(synthetic(T0, 3, 10)), MemorySink()
    for hour in (0, 2):
        chunk = Chunk(T0 + timedelta(hours=hour), T0 + timedelta(hours=hour + 1))
        bodies.exchange_collect(api, sink, payload(chunk))
    failure = {"chunk": Chunk(T0 + timedelta(hours=1), T0 + timedelta(minutes=90)).to_json(), "kind": "transient",
               "message": "503", "attempts": 4}  # fmt: skip
    final = {
        "collectionId": "c1",
        "tenantId": TENANT,
        "source": "exchange",
        "ranges": [{"start": "2024-11-17T10:00:00Z", "end": "2024-11-17T13:00:00Z"}],
        "failures": [failure],
        "status": "CompletedWithFailures",
    }
    result = ActivityResult.from_json(bodies.finalize(sink, final))
    assert result.ok
    manifest = json.loads(sink.read_bytes(result.data["manifest"]) or b"")
    assert manifest["totals"]["records"] == 20 and manifest["totals"]["chunks"] == 2
    assert manifest["gaps"] == [{"start": "2024-11-17T11:30:00Z", "end": "2024-11-17T12:00:00Z", "depth": 0}]
    assert [c["records"] for c in manifest["chunks"]] == [10, 10]
    assert manifest["failures"] == [failure]


def test_manifest_lists_a_split_window_once_when_its_parent_object_was_also_written() -> None:
    # Attempt 1 wrote the 2-hour chunk, then its result was lost; the retry found the window over the cap, so the
    # orchestrator split it and both halves were written. The manifest must count those records once.
    api, sink = FakeSearchApi(synthetic(T0, 2, 10), block_size=25), MemorySink()
    parent = Chunk(T0, T0 + timedelta(hours=2))
    run_exchange_chunk(api, sink, payload(parent))
    for half in parent.halves():
        run_exchange_chunk(api, sink, payload(half))
    final = {
        "collectionId": "c1",
        "tenantId": TENANT,
        "source": "exchange",
        "ranges": [{"start": "2024-11-17T10:00:00Z", "end": "2024-11-17T12:00:00Z"}],
        "failures": [],
        "status": "Completed",
    }
    result = ActivityResult.from_json(bodies.finalize(sink, final))
    manifest = json.loads(sink.read_bytes(result.data["manifest"]) or b"")
    assert [(c["chunk"]["start"], c["chunk"]["end"]) for c in manifest["chunks"]] == [
        (half.to_json()["start"], half.to_json()["end"]) for half in parent.halves()
    ]
    assert manifest["totals"]["records"] == 20 and manifest["totals"]["chunks"] == 2 and manifest["gaps"] == []
    assert manifest["superseded"] == ["contoso.onmicrosoft.com/c1/chunks/20241117T100000Z_20241117T120000Z.jsonl"]


def test_drop_superseded_handles_no_summaries_and_disjoint_ones() -> None:
    from activities.manifest_windows import drop_superseded

    assert drop_superseded([]) == ([], [])
    a, b = (
        ChunkSummary(c, 1, 0, 0, 0, f"b{i}", "h", 1) for i, c in enumerate(Chunk(T0, T0 + timedelta(hours=2)).halves())
    )
    assert drop_superseded([b, a]) == ([a, b], [])


def test_manifest_reports_a_gap_at_the_end_of_the_range() -> None:
    """A stopped collection: the first two hours ran, the third failed, the last two never started."""
    api, sink = FakeSearchApi(synthetic(T0, 5, 10)), MemorySink()
    for hour in (0, 1):
        bodies.exchange_collect(api, sink, payload(Chunk(T0 + timedelta(hours=hour), T0 + timedelta(hours=hour + 1))))
    failure = {"chunk": Chunk(T0 + timedelta(hours=2), T0 + timedelta(hours=3)).to_json(), "kind": "permission",
               "message": "denied", "attempts": 1}  # fmt: skip
    final = {
        "collectionId": "c1",
        "tenantId": TENANT,
        "ranges": [{"start": "2024-11-17T10:00:00Z", "end": "2024-11-17T15:00:00Z"}],
        "failures": [failure],
        "status": "Failed",
    }
    result = ActivityResult.from_json(bodies.finalize(sink, final))
    manifest = json.loads(sink.read_bytes(result.data["manifest"]) or b"")
    tail = [{"start": "2024-11-17T13:00:00Z", "end": "2024-11-17T15:00:00Z", "depth": 0}]
    assert manifest["gaps"] == result.data["gaps"] == tail


def test_manifest_flags_the_windows_that_may_still_gain_late_records() -> None:
    """Audit records can take up to a day to become searchable: the windows that ended less than that before the
    collection started are listed as provisional, with the time after which collecting them again is final."""
    api, sink = FakeSearchApi(synthetic(T0, 3, 10)), MemorySink()
    for hour in range(3):
        bodies.exchange_collect(api, sink, payload(Chunk(T0 + timedelta(hours=hour), T0 + timedelta(hours=hour + 1))))
    final = {
        "collectionId": "c1",
        "tenantId": TENANT,
        "ranges": [{"start": "2024-11-17T10:00:00Z", "end": "2024-11-17T13:00:00Z"}],
        "failures": [],
        "status": "Completed",
        "startedAt": "2024-11-18T11:00:00Z",  # 22 hours after the range ended: its last two hours are provisional
    }
    manifest = json.loads(
        sink.read_bytes(ActivityResult.from_json(bodies.finalize(sink, final)).data["manifest"]) or b""
    )
    assert manifest["latency"] == {
        "assumedHours": 24.0,
        "provisional": [{"start": "2024-11-17T11:00:00Z", "end": "2024-11-17T13:00:00Z"}],
        "settledAfter": "2024-11-18T13:00:00Z",
        "final": False,
    }
    assert manifest["totals"]["provisionalChunks"] == 2  # chunks that overlap a provisional part
    assert [c["provisional"] for c in manifest["chunks"]] == [False, True, True]


@pytest.mark.azurite
def test_finalize_returns_the_sha256_of_the_manifest_bytes_it_stored(azurite_connection_string: str) -> None:
    import uuid

    from azure.storage.blob import BlobServiceClient

    from shared.sinks.blob import BlobSink

    container = f"manifest-{uuid.uuid4().hex[:12]}"
    sink = BlobSink.from_connection_string(azurite_connection_string, container)
    api = FakeSearchApi(synthetic(T0, 2, 10), malformed_every=10)
    for hour in (0, 1):
        bodies.exchange_collect(api, sink, payload(Chunk(T0 + timedelta(hours=hour), T0 + timedelta(hours=hour + 1))))
    final = {"collectionId": "c1", "tenantId": TENANT, "status": "Completed", "failures": [],
             "ranges": [{"start": "2024-11-17T10:00:00Z", "end": "2024-11-17T12:00:00Z"}]}  # fmt: skip
    result = ActivityResult.from_json(bodies.finalize(sink, final))
    assert result.ok

    blob = BlobServiceClient.from_connection_string(azurite_connection_string).get_blob_client(
        container, result.data["manifest"]
    )
    stored = blob.download_blob().readall()
    assert result.data["sha256"] == hashlib.sha256(stored).hexdigest()
    manifest = json.loads(stored)
    assert manifest["totals"] == result.data["totals"] and manifest["totals"]["records"] == 20
    assert result.data["location"] == blob.url


def test_manifest_lists_summaries_outside_the_collections_windows_as_foreign_and_never_counts_them() -> None:
    """An earlier run under the same prefix left chunks outside this run's windows (review F2): listed, not counted."""
    api, sink = FakeSearchApi(synthetic(T0, 4, 10)), MemorySink()
    for hour in (0, 1, 3):
        bodies.exchange_collect(api, sink, payload(Chunk(T0 + timedelta(hours=hour), T0 + timedelta(hours=hour + 1))))
    straddling = Chunk(T0 + timedelta(minutes=30), T0 + timedelta(minutes=90))
    bodies.exchange_collect(api, sink, payload(straddling))
    final = {  # a retry of hour 1 only: hour 0, hour 3 and the straddling window are not its own
        "collectionId": "c1",
        "tenantId": TENANT,
        "ranges": [{"start": "2024-11-17T11:00:00Z", "end": "2024-11-17T12:00:00Z"}],
        "failures": [],
        "status": "Completed",
    }
    result = ActivityResult.from_json(bodies.finalize(sink, final))
    manifest = json.loads(sink.read_bytes(result.data["manifest"]) or b"")
    assert manifest["totals"]["records"] == 10 and manifest["totals"]["chunks"] == 1
    assert [c["chunk"]["start"] for c in manifest["chunks"]] == ["2024-11-17T11:00:00Z"]
    assert manifest["superseded"] == [] and manifest["gaps"] == []
    prefix = "contoso.onmicrosoft.com/c1/chunks/"
    assert manifest["foreign"] == [
        prefix + "20241117T100000Z_20241117T110000Z.jsonl",
        prefix + "20241117T103000Z_20241117T113000Z.jsonl",
        prefix + "20241117T130000Z_20241117T140000Z.jsonl",
    ]
