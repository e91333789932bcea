"""Golden histories: what the replay layer records, checked against the DTFx layout and replayed.

Regenerate after a deliberate change with ``REGENERATE_GOLDEN=1 .venv/bin/pytest tests/golden`` and review
the diff like code.
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest

from durable_local.history import event_type
from durable_local.model import EventType, RuntimeStatus, TaskMessage
from durable_local.replay.api import EpisodeInput
from durable_local.replay.episode import run_episode
from tests.engine.replay import orchestrations as o
from tests.engine.replay.driver import T0, Driver

GOLDEN = Path(__file__).parent / "three_step_chain.json"


def record_three_step_chain() -> list[dict]:
    """Fixed clock (one second per step) and fixed execution ids, so the output is byte-stable."""
    driver = Driver({"chain": o.handle(o.chain)}, o.ACTIVITIES)
    driver.start("chain", "golden-chain", "go")
    driver.episode("golden-chain")
    while driver.work_items:
        driver.advance(timedelta(seconds=1))
        driver.run_activity(driver.work_items[0])
        driver.episode("golden-chain")
    result = driver.instances["golden-chain"].result
    assert result is not None and result.status is RuntimeStatus.COMPLETED
    return result.history


def test_three_step_chain_matches_the_golden_file() -> None:
    history = record_three_step_chain()
    if os.environ.get("REGENERATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(history, indent=1) + "\n", encoding="utf-8")
    if not GOLDEN.exists():
        pytest.fail(f"{GOLDEN.name} is missing; run with REGENERATE_GOLDEN=1 to record it")
    assert history == json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_golden_file_has_the_dtfx_episode_layout() -> None:
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    os_, oc = EventType.ORCHESTRATOR_STARTED, EventType.ORCHESTRATOR_COMPLETED
    es, ts, tc, done = (
        EventType.EXECUTION_STARTED,
        EventType.TASK_SCHEDULED,
        EventType.TASK_COMPLETED,
        EventType.EXECUTION_COMPLETED,
    )
    assert [event_type(e) for e in golden] == [
        *(os_, es, ts, oc),
        *(os_, tc, ts, oc),
        *(os_, tc, ts, oc),
        *(os_, tc, done, oc),
    ]
    # Decision events carry the sequence number; message and framing events carry -1.
    assert [e["EventId"] for e in golden] == [-1, -1, 0, -1, -1, -1, 1, -1, -1, -1, 2, -1, -1, -1, 3, -1]
    assert [e["TaskScheduledId"] for e in golden if event_type(e) == tc] == [0, 1, 2]
    assert golden[1]["Version"] == "" and all("Result" in e for e in golden if event_type(e) == tc)
    assert golden[-2]["OrchestrationStatus"] == RuntimeStatus.COMPLETED.value
    assert json.loads(golden[-2]["Result"]) == "go!!!"
    assert golden[4]["Timestamp"] == "2024-01-01T00:00:01.0000000Z"


def test_golden_history_replays_deterministically() -> None:
    """Replay the last episode of the golden history with today's orchestrator code."""
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    last_start = max(i for i, e in enumerate(golden) if event_type(e) == EventType.ORCHESTRATOR_STARTED)
    past, last = golden[:last_start], golden[last_start:]
    execution_id = golden[1]["OrchestrationInstance"]["ExecutionId"]
    new_event = {**last[1], "IsPlayed": False}
    driver = Driver({"chain": o.handle(o.chain)}, o.ACTIVITIES)
    result = run_episode(
        EpisodeInput(
            instance_id="golden-chain",
            past_events=past,
            new_messages=[TaskMessage("golden-chain", execution_id, new_event)],
            now=T0 + timedelta(seconds=3),
            registry=driver.registry,
        )
    )
    assert result.status is RuntimeStatus.COMPLETED
    assert result.history == golden
