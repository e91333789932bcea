"""The orchestrator logs each chunk's end once, as a structured event (docs/operations.md), however often it replays."""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Any

import pytest

from durable_local.model import RuntimeStatus
from shared import names
from shared.errors import TransientApiError
from shared.log_fields import parse_event
from shared.sinks.memory import MemorySink
from tests.collector.fakes import FakeQueryApi, FakeSearchApi, synthetic
from tests.collector.replay_driver import ReplayDriver, orchestrator_handle
from tests.collector.test_orchestrator_replay import START, TENANT, exchange_activities, graph_activities, payload


def _events(caplog: pytest.LogCaptureFixture, event: str) -> list[dict[str, Any]]:
    found = [parse_event(r.getMessage()) for r in caplog.records if r.name == "orchestrators.collect"]
    return [e for e in found if e is not None and e["event"] == event]


def test_each_chunk_end_is_logged_once_with_its_window_across_replays_and_executions(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="orchestrators.collect")
    n = 6
    api = FakeQueryApi(synthetic(START, n, 30), limit=20, errors={"create": [TransientApiError("429")]})
    driver = ReplayDriver(orchestrator_handle(), graph_activities(api, MemorySink()), seed=5)
    driver.start(payload("graph", n, 2, m=3, poll_interval_seconds=5, retry_base_seconds=1, min_split_seconds=600))
    output = json.loads(driver.run().output or "null")
    assert output["status"] == "Completed" and driver.executions >= 2
    ended = _events(caplog, "chunk.ended")
    outcomes = Counter(e["outcome"] for e in ended)
    assert outcomes == {"split": n, "done": 2 * n}  # each hour over the cap is halved once: every end, once
    windows = [(e["chunkStart"], e["chunkEnd"]) for e in ended]
    assert len(set(windows)) == len(windows)
    done = [e for e in ended if e["outcome"] == "done"]
    assert sum(e["records"] for e in done) == output["records"]
    for event in ended:
        assert (event["collectionId"], event["tenantId"], event["source"]) == ("c1", TENANT, "graph")
        assert event["seconds"] >= 0 and event["attempts"] >= 1


def test_a_failed_chunk_is_logged_with_its_error(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="orchestrators.collect")
    activities = exchange_activities(FakeSearchApi(synthetic(START, 4, 3)), MemorySink())
    collect = activities[names.ACTIVITY_EXCHANGE_COLLECT]

    def flaky(p: dict[str, Any]) -> dict[str, Any]:
        if p["chunk"]["start"].endswith("T13:00:00Z"):
            raise RuntimeError("bug in the activity")
        return collect(p)  # type: ignore[no-any-return]

    activities[names.ACTIVITY_EXCHANGE_COLLECT] = flaky
    driver = ReplayDriver(orchestrator_handle(), activities, seed=4)
    driver.start(payload("exchange", 4, 2))
    assert driver.run().status is RuntimeStatus.COMPLETED
    failed = [e for e in _events(caplog, "chunk.ended") if e["outcome"] == "failed"]
    assert len(failed) == 1 and failed[0]["chunkStart"].endswith("T13:00:00Z")
    assert failed[0]["errorKind"] == "activity_crashed" and "bug in the activity" in failed[0]["error"]
    assert failed[0]["source"] == "exchange"
