"""A collection asked to settle, replayed by ``durable_local.replay`` with the real activity bodies on a fake Graph
whose records arrive late: once the late-arrival band of its provisional windows has passed (a durable timer), it
reads exactly those windows again, and its manifest turns final with the late records counted."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

from durable_local.model import RuntimeStatus
from orchestrators import settle
from shared.audit.ports import AuditFilters, AuditRecord, TimeWindow
from shared.budget.token import is_run_id, run_of
from shared.models import Chunk, iso, parse_iso
from shared.records.rules import parse_record_time
from shared.requests import admission
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


def settle_payload(settle: bool, **options: Any) -> dict[str, Any]:
    start = NOW - timedelta(hours=HOURS)
    spec = CollectionSpec(
        collection_id="c1",
        tenant_id=TENANT,
        source="graph",
        filters={},
        options=RunOptions(max_concurrency=2, poll_interval_seconds=5, **options),
        plan=ChunkPlan(start, NOW, timedelta(hours=1)),
    )
    request = {"tenantId": TENANT, "settle": settle}
    return {"spec": spec.to_json(), "state": None, "request": request, "startedAt": iso(NOW)}


SECRET = "settle-replay-secret-" * 2
GUID = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
FIRST_RUN = "1f" * 16


def test_the_settle_pass_runs_under_the_secret_on_the_tenant_guids_budget_with_a_run_of_its_own() -> None:
    """Issue 29 items 1-3: the second pass keeps the first pass's spec (its tenant GUID, hence one budget per tenant,
    and its options), is sealed by the seal activity, and takes slots with a token of a new run: the first run's
    token was closed when it finalized, so a second pass that kept it would be refused every slot."""
    records = synthetic(NOW - timedelta(hours=HOURS), HOURS, 30)
    arrivals = {str(r["id"]): parse_record_time(r) + timedelta(hours=1) for r in records}
    sink = MemorySink()
    holder: dict[str, ReplayDriver] = {}
    api = LateQueryApi(records, arrivals, lambda: holder["driver"].now)
    driver = ReplayDriver(orchestrator_handle(), graph_activities(api, sink), seed=3, budget_capacity=2, secret=SECRET)
    holder["driver"] = driver
    payload = settle_payload(settle=True, budget_capacity=2, budget_lease_seconds=600.0, budget_poll_seconds=5.0)
    payload["spec"] = {**payload["spec"], "tenantId": "contoso.onmicrosoft.com", "tenantGuid": GUID}
    driver.start(admission.sealed(SECRET, "c1", {**payload, "run": FIRST_RUN}))
    result = driver.run()

    output = json.loads(result.output or "null")
    assert result.status is RuntimeStatus.COMPLETED and output["status"] == "Completed", output
    assert output["settled"]["windows"] == HOURS and sorted(collected_ids(sink)) == sorted(
        str(r["id"]) for r in records
    )
    assert driver.entity_targets == {f"@tenant_budget@{GUID}:graph"}  # both passes: the GUID's budget, not the domain's
    runs = [run_of(request.token) for request in driver.entity_requests]
    second = runs[-1]
    assert runs[0] == FIRST_RUN and is_run_id(second) and second != FIRST_RUN
    closes = [r for r in driver.entity_requests if r.op == "release_collection"]
    assert [(run_of(r.token), r.close) for r in closes] == [(FIRST_RUN, True), (second, True)]
    assert driver.budget.state.granted >= 2 * HOURS - 2 and driver.budget.state.closed == [FIRST_RUN[:16], second[:16]]


def test_a_settle_pass_input_is_the_first_spec_with_its_windows_replaced() -> None:
    """``settle_pass_input`` rebuilt the spec field by field and dropped ``tenant_guid``: the second pass took the
    budget of the tenant's domain spelling, a second budget for one tenant."""
    payload = settle_payload(settle=True, budget_capacity=2)
    payload["spec"] = {**payload["spec"], "tenantGuid": GUID, "parentCollectionId": "root"}
    context = SimpleNamespace(current_utc_datetime=NOW + AUDIT_LATENCY, new_uuid=lambda: "9" * 32)
    windows = [Chunk(NOW - timedelta(hours=1), NOW)]
    second = settle.settle_pass_input(payload, {"failures": []}, windows, context)  # type: ignore[arg-type]
    first_spec, second_spec = CollectionSpec.from_json(payload["spec"]), CollectionSpec.from_json(second["spec"])
    assert second_spec == replace(first_spec, plan=None, explicit=tuple(windows))
    assert second_spec.budget_tenant == GUID and second["run"] == "9" * 32 and "seal" not in second


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
