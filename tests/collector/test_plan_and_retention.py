"""The plan says how many Graph queries it submits (and warns above a plausible daily quota); windows older than the
tenant's guaranteed retention are flagged possibly partial in the answer, the summary and the manifest (issue 17)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from activities import bodies
from activities.chunk_writer import write_chunk
from http_api import retry_chain, service
from shared.models import ActivityResult, Chunk, JsonDict, iso
from shared.settings import Settings
from shared.sinks.memory import MemorySink
from shared.timeline.retention import possibly_partial
from tests.collector.test_http_service import FakeClient, call, resolve

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)
TENANT = "contoso.onmicrosoft.com"


def start(body: dict[str, Any], settings: Settings | None = None) -> tuple[service.ApiResponse, FakeClient]:
    client = FakeClient()
    raw = json.dumps({"tenantId": TENANT, **body}).encode()
    response = call(
        service.start_collection(
            client, raw, settings or Settings(), NOW, lambda: "plan0001", sink=MemorySink(), resolve=resolve
        )
    )
    return response, client


def test_the_answer_says_how_many_graph_queries_the_plan_submits() -> None:
    response, client = start({"startDate": "2026-11-01T00:00:00Z", "endDate": "2026-12-01T00:00:00Z"})
    assert response.status == 202, response.body
    plan = response.body["plan"]
    assert plan == {
        "source": "graph", "chunks": 30, "graphQueries": 30, "intervalMinutes": 1440, "intervalDefault": True,
        "dailyQueryQuota": 200, "warnings": [],
        "submissions": {"needed": 30, "rereads": 0, "allowedPerDay": 150, "reserve": 50, "leftNow": 150,
                        "nextFreeAt": None, "kept": True, "waits": False},
    }  # fmt: skip
    summary = call(service.collection_summary(client, "plan0001")).body
    assert summary["plan"] == plan


def test_a_plan_above_the_daily_quota_is_started_with_a_warning_naming_the_interval_that_fits() -> None:
    body = {"startDate": "2026-11-01T00:00:00Z", "endDate": "2026-12-01T00:00:00Z", "intervalMinutes": 60}
    response, _ = start(body)
    assert response.status == 202
    (warning,) = response.body["plan"]["warnings"]
    assert response.body["plan"]["graphQueries"] == 720
    assert response.body["plan"]["submissions"]["waits"] is True
    assert "720 Graph audit queries" in warning and "150 per rolling 24 hours" in warning
    assert "150 of them are left now" in warning and "at least 4 more days" in warning  # (720 - 150) / 150
    assert "intervalMinutes >= 288" in warning  # 43,200 min / 150
    exchange, _ = start({**body, "tenantId": TENANT, "source": "exchange"})
    assert exchange.body["plan"]["graphQueries"] is None and exchange.body["plan"]["warnings"] == []


def test_a_start_older_than_the_guaranteed_retention_is_accepted_and_flagged() -> None:
    old = NOW - timedelta(days=200)
    body = {"startDate": iso(old), "endDate": iso(old + timedelta(days=2))}
    response, client = start(body)
    assert response.status == 202, response.body
    (warning,) = response.body["plan"]["warnings"]
    assert "180-day retention" in warning and "possibly partial" in warning
    status = client.instances["plan0001"]
    status.last_updated_time = NOW + timedelta(hours=1)
    retention = call(service.collection_summary(client, "plan0001")).body["retention"]
    assert retention["guaranteedDays"] == 180
    assert retention["possiblyPartial"] == [{"start": iso(old), "end": iso(old + timedelta(days=2))}]
    assert "E5" in retention["reason"]


def test_a_window_straddling_the_cutoff_is_flagged_up_to_the_cutoff_only() -> None:
    chunk = Chunk(NOW - timedelta(days=181), NOW - timedelta(days=179))
    assert possibly_partial([chunk], NOW, 180) == [Chunk(chunk.start, NOW - timedelta(days=180))]
    assert possibly_partial([chunk], NOW, 0) == []  # unknown retention (an older collection): nothing flagged


def finalize(sink: MemorySink, windows: list[Chunk], **extra: Any) -> JsonDict:
    for chunk in windows:  # a collected chunk: its object and summary, as the Graph export writes them
        write_chunk(sink, tenant_id=TENANT, collection_id="old", chunk=chunk, pages=[], attempt=1)
    span = Chunk(windows[0].start, windows[-1].end)
    payload = {"collectionId": "old", "tenantId": TENANT, "source": "graph", "status": "Completed",
               "ranges": [span.span_json()], "failures": [], **extra}  # fmt: skip
    result = ActivityResult.from_json(bodies.finalize(sink, payload))
    assert result.ok, result
    manifest: JsonDict = json.loads(sink.read_bytes(result.data["manifest"]) or b"")
    return manifest


def test_the_manifest_flags_chunks_older_than_the_retention_when_the_collection_finished() -> None:
    day = timedelta(days=1)
    first = NOW - timedelta(days=200)
    windows = [Chunk(first + day * i, first + day * (i + 1)) for i in range(30)]  # 200 .. 170 days old
    finished = NOW + timedelta(hours=2)
    manifest = finalize(MemorySink(), windows, retentionDays=180, startedAt=iso(NOW), finishedAt=iso(finished))
    flagged = [c["chunk"]["start"] for c in manifest["chunks"] if c["possiblyPartial"]]
    assert len(flagged) == 21 and manifest["totals"]["possiblyPartialChunks"] == 21  # starts before NOW + 2 h - 180 d
    retention = manifest["retention"]
    assert retention["cutoff"] == iso(finished - timedelta(days=180))
    assert retention["possiblyPartial"] == [{"start": iso(first), "end": iso(finished - timedelta(days=180))}]
    assert retention["reason"] and "COLLECTOR_RETENTION_DAYS" in retention["reason"]
    unknown = finalize(MemorySink(), windows, startedAt=iso(NOW), finishedAt=iso(finished))  # an older input
    assert unknown["retention"] is None and unknown["totals"]["possiblyPartialChunks"] == 0


def test_retry_failed_retries_what_a_start_accepts_and_expires_only_past_the_lookback() -> None:
    client = FakeClient()
    old = NOW - timedelta(days=300)
    body = {"tenantId": TENANT, "startDate": iso(old), "endDate": iso(old + timedelta(days=2)), "collectionId": "e5"}
    raw = json.dumps(body).encode()
    assert (
        call(service.start_collection(client, raw, Settings(), NOW, str, sink=MemorySink(), resolve=resolve)).status
        == 202
    )
    failed = {"chunk": Chunk(old, old + timedelta(days=1)).to_json(), "kind": "transient", "message": "m",
              "attempts": 4}  # fmt: skip
    client.instances["e5"].runtime_status = SimpleNamespace(value="Completed")
    client.instances["e5"].output = {
        "status": "CompletedWithFailures",
        "failures": [failed],
        "remaining": {"cursor": 2},
    }
    retried = call(retry_chain.retry_failed(client, "e5", NOW, MemorySink(), settings=Settings(), resolve=resolve))
    assert retried.status == 202, retried.body
    assert retried.body["expired"] == [] and retried.body["plan"]["graphQueries"] == 1
    assert any("possibly partial" in w for w in retried.body["plan"]["warnings"])
