"""A collection asked to settle, replayed by ``durable_local.replay`` with the real activity bodies on a fake Graph
whose records arrive late: once the late-arrival band of its provisional windows has passed (a durable timer), it
reads exactly those windows again, and its manifest turns final with the late records counted."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from durable_local.model import RuntimeStatus
from shared.audit.ports import AuditFilters, AuditRecord, TimeWindow
from shared.models import iso, parse_iso
from shared.records.rules import parse_record_time
from shared.sinks.memory import MemorySink
from shared.timeline.latency import AUDIT_LATENCY
from shared.timeline.planning import ChunkPlan
from shared.window.machine import CollectionSpec
from shared.window.state import RunOptions
from tests.collector.fakes import FakeQueryApi, synthetic
from tests.collector.replay_driver import NOW, ReplayDriver, orchestrator_handle
from tests.collector.test_orchestrator_replay import TENANT, collected_ids, graph_activities

HOURS = 6


class LateQueryApi(FakeQueryApi):
    """A query returns the records that had arrived when it was created (``clock``: the orchestration's time)."""

    def __init__(self, records: list[AuditRecord], arrivals: dict[str, datetime], clock: Any) -> None:
        super().__init__(records, page_size=50, polls_until_done=1)
        self.arrivals = arrivals
        self.clock = clock
        self.as_of: dict[TimeWindow, datetime] = {}

    def create_query(self, window: TimeWindow, filters: AuditFilters, *, display_name: str) -> str:
        self.as_of[window] = self.clock()
        return super().create_query(window, filters, display_name=display_name)

    def _in(self, window: TimeWindow) -> list[AuditRecord]:
        seen = self.as_of[window]
        return [r for r in super()._in(window) if self.arrivals[str(r["id"])] <= seen]


def settle_payload(settle: bool) -> dict[str, Any]:
    start = NOW - timedelta(hours=HOURS)
    spec = CollectionSpec(
        collection_id="c1",
        tenant_id=TENANT,
        source="graph",
        filters={},
        options=RunOptions(max_concurrency=2, poll_interval_seconds=5),
        plan=ChunkPlan(start, NOW, timedelta(hours=1)),
    )
    request = {"tenantId": TENANT, "settle": settle}
    return {"spec": spec.to_json(), "state": None, "request": request, "startedAt": iso(NOW)}


def test_a_settle_collection_reads_its_provisional_windows_again_after_the_band() -> None:
    records = synthetic(NOW - timedelta(hours=HOURS), HOURS, 30)
    # an hour late for most, twenty hours late for every fifth record
    arrivals = {
        str(r["id"]): parse_record_time(r) + timedelta(hours=20 if i % 5 == 0 else 1) for i, r in enumerate(records)
    }
    sink = MemorySink()
    holder: dict[str, ReplayDriver] = {}
    api = LateQueryApi(records, arrivals, lambda: holder["driver"].now)
    driver = ReplayDriver(orchestrator_handle(), graph_activities(api, sink), seed=3)
    holder["driver"] = driver
    driver.start(settle_payload(settle=True))
    result = driver.run()

    assert result.status is RuntimeStatus.COMPLETED
    output = json.loads(result.output or "null")
    assert output["status"] == "Completed", output
    assert sorted(collected_ids(sink)) == sorted(str(r["id"]) for r in records), "every record once, late ones too"
    last_read = dict(api.as_of)  # each window's latest query
    late = sum(1 for r in records if arrivals[str(r["id"])] > NOW)  # missed by the first pass (it ran at NOW)
    assert late > 0
    manifest = json.loads(sink.objects[output["manifest"].removeprefix("memory://")])
    assert manifest["totals"]["late"] == late
    assert manifest["totals"]["records"] == len(records) == output["records"]
    assert manifest["latency"]["final"] is True and manifest["totals"]["provisionalChunks"] == 0
    assert manifest["ranges"] == [{"start": iso(NOW - timedelta(hours=HOURS)), "end": iso(NOW)}]
    assert manifest["gaps"] == [] and manifest["failures"] == []
    # the second pass ran once the band of the last window had passed, and read exactly the provisional windows
    assert min(last_read.values()) >= NOW + AUDIT_LATENCY
    assert len(last_read) == HOURS
    settling = [s["settling"] for s in driver.custom_statuses if s.get("settling")]
    assert settling and settling[0]["until"] == iso(NOW + AUDIT_LATENCY) and settling[0]["windows"] == HOURS
    assert output["settled"] == {
        "firstStartedAt": iso(NOW),
        "startedAt": output["settled"]["startedAt"],
        "windows": HOURS,
        "late": late,
    }
    assert parse_iso(output["settled"]["startedAt"]) >= NOW + AUDIT_LATENCY


def test_without_settle_the_collection_ends_provisional() -> None:
    records = synthetic(NOW - timedelta(hours=HOURS), HOURS, 30)
    arrivals = {str(r["id"]): parse_record_time(r) for r in records}
    sink = MemorySink()
    holder: dict[str, ReplayDriver] = {}
    api = LateQueryApi(records, arrivals, lambda: holder["driver"].now)
    driver = ReplayDriver(orchestrator_handle(), graph_activities(api, sink), seed=3)
    holder["driver"] = driver
    driver.start(settle_payload(settle=False))
    output = json.loads(driver.run().output or "null")
    manifest = json.loads(sink.objects[output["manifest"].removeprefix("memory://")])
    assert manifest["latency"]["final"] is False and output.get("settled") is None
    assert not any(s.get("settling") for s in driver.custom_statuses)
