"""The real orchestrator, replayed by ``durable_local.replay`` in SHIM mode, with the real activity bodies on fakes."""

from __future__ import annotations

import json
from collections.abc import Generator
from datetime import timedelta
from typing import Any

import azure.durable_functions as df
import pytest

from activities import bodies
from durable_local.model import RuntimeStatus, SchedulingMode
from shared import names
from shared.errors import AuthenticationError, TransientApiError
from shared.models import ActivityResult, Chunk, iso
from shared.sinks.memory import MemorySink
from shared.sources.registry import window_for
from shared.timeline.planning import ChunkPlan
from shared.window.machine import CollectionSpec
from shared.window.state import CallActivity, Carried, RunOptions
from tests.collector.fakes import FakeQueryApi, FakeSearchApi, synthetic
from tests.collector.replay_driver import NOW, ReplayDriver, orchestrator_handle

START = NOW - timedelta(days=1)
TENANT = "contoso.onmicrosoft.com"


def payload(source: str, hours: int, k: int, m: int = 1000, **options: Any) -> dict[str, Any]:
    spec = CollectionSpec(
        collection_id="c1",
        tenant_id=TENANT,
        source=source,
        filters={},
        options=RunOptions(max_concurrency=k, chunks_per_execution=m, **options),
        plan=ChunkPlan(START, START + timedelta(hours=hours), timedelta(hours=1)),
    )
    return {"spec": spec.to_json(), "state": None, "request": {"tenantId": TENANT}, "startedAt": "x"}


def exchange_activities(api: FakeSearchApi, sink: MemorySink) -> dict[str, Any]:
    return {
        names.ACTIVITY_EXCHANGE_COLLECT: lambda p: bodies.exchange_collect(api, sink, p),
        names.ACTIVITY_FINALIZE: lambda p: bodies.finalize(sink, p),
    }


def graph_activities(api: FakeQueryApi, sink: MemorySink) -> dict[str, Any]:
    return {
        names.ACTIVITY_GRAPH_SUBMIT: lambda p: bodies.graph_submit(api, sink, p),
        names.ACTIVITY_GRAPH_COLLECT: lambda p: bodies.graph_collect(api, sink, p),
        names.ACTIVITY_GRAPH_DELETE: lambda p: bodies.graph_delete(api, p),
        names.ACTIVITY_FINALIZE: lambda p: bodies.finalize(sink, p),
    }


def collected_ids(sink: MemorySink) -> list[str]:
    ids: list[str] = []
    for name, data in sink.objects.items():
        if name.endswith(".jsonl") and ".quarantine" not in name:
            ids += [json.loads(line)["id"] for line in data.splitlines()]
    return ids


def naive_collect(context: df.DurableOrchestrationContext) -> Generator[Any, Any, Any]:
    """The same window without the nudge: what the seed's orchestrator does."""
    data = context.get_input()
    window = window_for(CollectionSpec.from_json(data["spec"]), Carried.from_json(data.get("state")))
    waiting: list[tuple[Any, int]] = []
    steps = window.fill()
    while True:
        for step in steps:
            assert isinstance(step, CallActivity)
            waiting.append((context.call_activity(step.name, step.input), step.lane))
        if not window.lanes:
            return window.output(None)
        winner = yield context.task_any([t for t, _ in waiting])
        index = next(i for i, (t, _) in enumerate(waiting) if t is winner)
        _, lane = waiting.pop(index)
        steps = window.on_result(lane, ActivityResult.from_json(winner.result)) + window.fill()


def head_mean(samples: list[int], n: int, k: int) -> float:
    head = samples[: n - k]  # before the tail, when fewer than K chunks are left
    return sum(head) / len(head)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_window_holds_k_under_the_shim_where_a_naive_window_collapses(seed: int) -> None:
    n, k = 24, 4
    records = synthetic(START, n, 6)
    sink = MemorySink()
    driver = ReplayDriver(orchestrator_handle(), exchange_activities(FakeSearchApi(records), sink), seed=seed)
    driver.start(payload("exchange", n, k))
    result = driver.run()
    assert result.status is RuntimeStatus.COMPLETED
    held = driver.activities_in_flight[: n - k]
    assert max(driver.activities_in_flight) <= k
    assert head_mean(driver.activities_in_flight, n, k) >= 0.9 * k, held

    naive = ReplayDriver(
        df.Orchestrator.create(naive_collect),
        exchange_activities(FakeSearchApi(records), MemorySink()),
        seed=seed,
    )
    naive.start(payload("exchange", n, k))
    assert naive.run().status is RuntimeStatus.COMPLETED
    assert head_mean(naive.activities_in_flight, n, k) < 0.6 * k  # the hazard is real in SHIM mode
    print(f"seed {seed}: nudge {held} vs naive {naive.activities_in_flight[: n - k]}")


def test_naive_window_is_fine_in_ideal_mode_so_the_difference_is_the_shim() -> None:
    n, k = 16, 4
    naive = ReplayDriver(
        df.Orchestrator.create(naive_collect),
        exchange_activities(FakeSearchApi(synthetic(START, n, 2)), MemorySink()),
        seed=5,
        mode=SchedulingMode.IDEAL,
    )
    naive.start(payload("exchange", n, k))
    naive.run()
    assert head_mean(naive.activities_in_flight, n, k) >= 0.9 * k


@pytest.mark.parametrize("delete_queries", [False, True])
def test_graph_collection_output_is_exact_with_splits_retries_and_continue_as_new(delete_queries: bool) -> None:
    n = 10
    records = synthetic(START, n, 30)
    api = FakeQueryApi(
        records, limit=20, errors={"pages": [TransientApiError("503")], "create": [TransientApiError("429")]}
    )
    sink = MemorySink()
    driver = ReplayDriver(orchestrator_handle(), graph_activities(api, sink), seed=7)
    options: dict[str, Any] = {"poll_interval_seconds": 5, "retry_base_seconds": 1, "min_split_seconds": 600}
    driver.start(payload("graph", n, 3, m=4, delete_queries=delete_queries, **options))
    result = driver.run()
    assert result.status is RuntimeStatus.COMPLETED
    output = json.loads(result.output or "null")
    assert output["status"] == "Completed", output
    ids = collected_ids(sink)
    assert sorted(ids) == sorted(r["id"] for r in records)  # every record once, nothing outside the range
    assert output["records"] == len(records) and output["splits"] == n  # 30/h over a 20 cap: each hour halved once
    assert driver.executions >= 4  # continue-as-new every M=4 chunks
    # one query per hour (over the cap) and per half; the failed submit created none; the export retry reused its query
    assert api.created == 3 * n
    manifest = json.loads(sink.objects[output["manifest"].removeprefix("memory://")])
    assert manifest["gaps"] == [] and manifest["totals"]["records"] == len(records)
    if delete_queries:
        assert sorted(api.deleted) == sorted(api.queries)  # every query deleted, once
        assert output["queries"]["deleted"] == 3 * n and output["queries"]["leftOnService"] == 0
    else:
        assert api.deleted == []  # no DELETE sent: the service does not support it today
        assert output["queries"]["leftOnService"] == 3 * n and output["queries"]["deleted"] == 0
    assert manifest["queries"] == {**output["queries"], "deletion": "on" if delete_queries else "off"}
    statuses = driver.custom_statuses
    assert all(s and "percent" in s for s in statuses)
    assert max(s["inFlight"] for s in statuses) == 3


def test_history_per_execution_stays_bounded() -> None:
    def max_history(hours: int) -> int:
        driver = ReplayDriver(
            orchestrator_handle(), exchange_activities(FakeSearchApi(synthetic(START, hours, 1)), MemorySink()), seed=3
        )
        driver.start(payload("exchange", hours, 3, m=6))
        assert driver.run().status is RuntimeStatus.COMPLETED
        return driver.max_history

    assert max_history(48) <= max_history(12) + 10


def test_dooming_error_ends_the_collection_failed_with_the_reason() -> None:
    api = FakeQueryApi(
        synthetic(START, 6, 2), errors={"create": [AuthenticationError("bad secret (AUDIT_CLIENT_SECRET)")]}
    )
    driver = ReplayDriver(orchestrator_handle(), graph_activities(api, MemorySink()), seed=2)
    driver.start(payload("graph", 6, 2, poll_interval_seconds=5))
    result = driver.run()
    output = json.loads(result.output or "null")
    assert output["status"] == "Failed" and output["reason"]["kind"] == "authentication"
    assert output["completed"] + output["failed"] < 6  # it stopped scheduling
    assert output["completed"] == 1  # the other lane in flight finished


def test_an_activity_that_raises_fails_only_its_chunk() -> None:
    api, sink = FakeSearchApi(synthetic(START, 4, 3)), MemorySink()
    activities = exchange_activities(api, sink)
    collect = activities[names.ACTIVITY_EXCHANGE_COLLECT]

    def flaky(p: dict[str, Any]) -> dict[str, Any]:
        if p["chunk"]["start"].endswith("T13:00:00Z"):
            raise RuntimeError("bug in the activity")
        return collect(p)  # type: ignore[no-any-return]

    activities[names.ACTIVITY_EXCHANGE_COLLECT] = flaky
    driver = ReplayDriver(orchestrator_handle(), activities, seed=4)
    driver.start(payload("exchange", 4, 2))
    output = json.loads(driver.run().output or "null")
    assert output["status"] == "CompletedWithFailures"
    assert (output["completed"], output["failed"]) == (3, 1)
    assert (
        output["failures"][0]["kind"] == "activity_crashed"
        and "bug in the activity" in output["failures"][0]["message"]
    )


def test_a_retry_links_finalize_proves_the_chain_and_its_output_carries_the_headline() -> None:
    """The root's hour 13:00 crashed; the retry link (as retry-failed starts it) collects it. The orchestrator only
    hands the link's request to finalize, which reads both links' summaries."""
    records = synthetic(START, 4, 3)
    api, sink = FakeSearchApi(records), MemorySink()
    activities = exchange_activities(api, sink)
    collect = activities[names.ACTIVITY_EXCHANGE_COLLECT]

    def flaky(p: dict[str, Any]) -> dict[str, Any]:
        if p["collectionId"] == "c1" and p["chunk"]["start"].endswith("T13:00:00Z"):
            raise RuntimeError("bug in the activity")
        return collect(p)  # type: ignore[no-any-return]

    activities[names.ACTIVITY_EXCHANGE_COLLECT] = flaky
    root = ReplayDriver(orchestrator_handle(), activities, seed=4)
    root_input = payload("exchange", 4, 2)
    root.start(root_input)
    root_output = json.loads(root.run().output or "null")
    assert root_output["failed"] == 1 and "chain" not in root_output
    parent = CollectionSpec.from_json(root_input["spec"])
    failed = tuple(Chunk.from_json(f["chunk"]) for f in root_output["failures"])
    spec = CollectionSpec("c1-retry-1", TENANT, "exchange", {}, parent.options, explicit=failed,
                          parent_collection_id="c1")  # fmt: skip
    request = {"tenantId": TENANT, "collectionId": "c1-retry-1", "retryOf": "c1", "retryRoot": "c1",
               "retryGeneration": 1, "rootRanges": [{"start": iso(START), "end": iso(START + timedelta(hours=4))}],
               "expired": [], "chainExpired": []}  # fmt: skip
    retry = ReplayDriver(orchestrator_handle(), activities, seed=5)
    retry.start({"spec": spec.to_json(), "state": None, "request": request, "startedAt": "x"})
    output = json.loads(retry.run().output or "null")
    assert output["status"] == "Completed" and output["records"] == 3
    counts = {"gaps": 0, "failures": 0, "expired": 0, "superseded": 0}
    totals = {"chunks": 4, "records": len(records), "bytes": output["chain"]["totals"]["bytes"], "incompleteChunks": 0}
    assert output["chain"] == {"root": "c1", "links": 2, "totals": totals, "counts": counts}
    manifest = json.loads(sink.objects[output["manifest"].removeprefix("memory://")])
    assert manifest["chain"]["totals"] == totals and manifest["chain"]["gaps"] == []


def test_an_activity_that_raises_once_is_retried_and_its_chunk_completes() -> None:
    api, sink = FakeSearchApi(synthetic(START, 4, 3)), MemorySink()
    activities = exchange_activities(api, sink)
    collect = activities[names.ACTIVITY_EXCHANGE_COLLECT]
    raised: list[int] = []

    def crashes_once(p: dict[str, Any]) -> dict[str, Any]:
        if p["chunk"]["start"].endswith("T13:00:00Z") and not raised:
            raised.append(p["attempt"])
            raise RuntimeError("worker lost")
        return collect(p)  # type: ignore[no-any-return]

    activities[names.ACTIVITY_EXCHANGE_COLLECT] = crashes_once
    driver = ReplayDriver(orchestrator_handle(), activities, seed=4)
    driver.start(payload("exchange", 4, 2, retry_base_seconds=1))
    output = json.loads(driver.run().output or "null")
    assert raised == [1]
    assert (output["status"], output["completed"], output["failed"]) == ("Completed", 4, 0)


@pytest.mark.parametrize(("source", "seed"), [("exchange", 1), ("exchange", 2), ("graph", 3)])
def test_output_is_exact_when_activities_run_twice_or_lose_their_result_across_switches(source: str, seed: int) -> None:
    """Crash points C8 (an activity's result lost: it runs again) and C2/C9 (it runs twice, a second completion
    arrives) on every few activities, with multi-call Exchange chunks and executions switched every 3 chunks."""
    n = 9
    records = synthetic(START, n, 45)
    sink = MemorySink()
    if source == "exchange":
        activities = exchange_activities(FakeSearchApi(records, cap=1000, block_size=20, page_size=7), sink)
    else:
        activities = graph_activities(FakeQueryApi(records), sink)
    driver = ReplayDriver(orchestrator_handle(), activities, seed=seed)
    driver.lose_result_every, driver.twice_every = 5, 7
    driver.start(payload(source, n, 3, m=3, poll_interval_seconds=5, poll_min_interval_seconds=1))
    result = driver.run(max_steps=1_000_000)
    output = json.loads(result.output or "null")
    assert output["status"] == "Completed", output
    assert sorted(collected_ids(sink)) == sorted(r["id"] for r in records)  # every record once
    assert output["records"] == len(records) and driver.executions >= 3 and driver.reruns > 5
    manifest = json.loads(sink.objects[output["manifest"].removeprefix("memory://")])
    assert manifest["totals"]["records"] == len(records) and manifest["gaps"] == []
    assert not [name for name in sink.objects if "/parts/" in name] and sink.parts == {}


def test_an_exchange_lane_carries_its_session_across_continue_as_new() -> None:
    records = synthetic(START, 6, 70)  # 70 records per chunk in blocks of 20: four calls each
    api, sink = FakeSearchApi(records, cap=1000, block_size=20), MemorySink()
    driver = ReplayDriver(orchestrator_handle(), exchange_activities(api, sink), seed=4)
    driver.start(payload("exchange", 6, 3, m=1))  # a switch after every chunk start
    output = json.loads(driver.run(max_steps=1_000_000).output or "null")
    assert output["status"] == "Completed" and output["records"] == len(records)
    assert sorted(collected_ids(sink)) == sorted(r["id"] for r in records)
    assert api.calls == 6 * 4  # no call repeated: each lane resumed its session where it was
    carried = [s for s in driver.custom_statuses if s.get("inFlight")]
    assert max(s["inFlight"] for s in carried) == 3


@pytest.mark.parametrize("source", ["exchange", "graph"])
def test_nudges_that_fire_inside_their_execution_are_harmless(monkeypatch: pytest.MonkeyPatch, source: str) -> None:
    """A nudge whose execution outlives ``NUDGE_HORIZON`` fires: it wins its ``task_any`` (or completes an orphan
    task) and the window waits again. With a horizon shorter than one activity most nudges fire while their
    execution runs (and switches executions); the schedule of activities and the output are those of a run
    whose nudges never fire, at the price of an episode per firing."""
    import orchestrators.collect

    def run(horizon: timedelta) -> tuple[ReplayDriver, dict[str, Any], list[str]]:
        monkeypatch.setattr(orchestrators.collect, "NUDGE_HORIZON", horizon)
        records = synthetic(START, 12, 6)
        sink = MemorySink()
        if source == "exchange":
            activities = exchange_activities(FakeSearchApi(records), sink)
        else:
            activities = graph_activities(FakeQueryApi(records, limit=1000), sink)
        driver = ReplayDriver(orchestrator_handle(), activities, seed=3)
        driver.start(payload(source, 12, 3, m=5, poll_interval_seconds=0.001, poll_min_interval_seconds=0.001))
        result = driver.run()
        assert result.status is RuntimeStatus.COMPLETED
        output = json.loads(result.output or "null")
        assert output["status"] == "Completed" and output["records"] == len(records), output
        assert sorted(collected_ids(sink)) == sorted(r["id"] for r in records)
        return driver, output, collected_ids(sink)

    short = timedelta(milliseconds=7)  # no other timer of this run is set exactly that far ahead
    firing, fired_output, fired_ids = run(short)
    quiet, quiet_output, quiet_ids = run(timedelta(days=2))
    assert firing.fired_delays.count(short) > 0, firing.fired_delays  # the case under test happened
    assert firing.activities_in_flight == quiet.activities_in_flight  # the same schedule, K held as well
    assert (fired_output["records"], fired_ids) == (quiet_output["records"], quiet_ids)
    assert firing.executions == quiet.executions
    print(f"{source}: {firing.fired_delays.count(short)} nudges fired, {firing.episodes} vs {quiet.episodes} episodes")
