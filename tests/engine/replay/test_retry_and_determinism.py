"""Retries (DTFx RetryInterceptor sequence ids, back-off timers, the dummy timer) and non-determinism."""

from __future__ import annotations

import json
from collections.abc import Generator
from datetime import timedelta
from typing import Any

import azure.durable_functions as df
import pytest

from durable_local.history import event_type, parse_timestamp
from durable_local.model import EventType, RuntimeStatus, SchedulingMode
from tests.engine.replay import orchestrations as o
from tests.engine.replay.driver import T0, Driver


def decisions(history: list[dict]) -> list[tuple[int, str]]:
    """(sequence id, kind) of every decision event, in history order."""
    names = {EventType.TASK_SCHEDULED: "task", EventType.TIMER_CREATED: "timer", EventType.EXECUTION_COMPLETED: "done"}
    return [(e["EventId"], names[event_type(e)]) for e in history if event_type(e) in names]


@pytest.mark.parametrize("mode", list(SchedulingMode))
def test_retry_that_succeeds_on_the_third_attempt(mode: SchedulingMode) -> None:
    flaky = o.Flaky(failures=2)
    driver = Driver({"retrying": o.handle(o.retrying)}, {**o.ACTIVITIES, "flaky": flaky}, mode=mode)
    driver.start("retrying", "r1")
    result = driver.run("r1")
    assert result.status is RuntimeStatus.COMPLETED
    assert json.loads(result.output or "") == {"value": "ok after 3", "after": "after"}
    assert decisions(result.history) == [
        (0, "task"),
        (1, "timer"),
        (2, "task"),
        (3, "timer"),
        (4, "task"),
        (5, "task"),
        (6, "done"),
    ]
    timers = [parse_timestamp(e["FireAt"]) for e in result.history if event_type(e) == EventType.TIMER_CREATED]
    assert timers == [T0 + timedelta(seconds=5), T0 + timedelta(seconds=10)]
    assert flaky.calls == 3


def test_retry_exhausted_waits_for_the_dummy_timer_then_fails() -> None:
    flaky = o.Flaky(failures=10)
    driver = Driver({"retrying": o.handle(o.retrying)}, {**o.ACTIVITIES, "flaky": flaky})
    driver.start("retrying", "r1")
    result = driver.run("r1")
    assert result.status is RuntimeStatus.COMPLETED
    assert "flaky failure 3" in json.loads(result.output or "")["failed"]
    assert decisions(result.history) == [
        (0, "task"),
        (1, "timer"),
        (2, "task"),
        (3, "timer"),
        (4, "task"),
        (5, "timer"),
        (6, "done"),
    ]
    timers = [parse_timestamp(e["FireAt"]) for e in result.history if event_type(e) == EventType.TIMER_CREATED]
    # The third failure is processed at +10 s: the back-compat dummy timer fires at once.
    assert timers == [T0 + timedelta(seconds=5), T0 + timedelta(seconds=10), T0 + timedelta(seconds=10)]
    assert flaky.calls == 3


def test_retry_waits_for_the_dummy_timer_before_failing() -> None:
    flaky = o.Flaky(failures=10)
    driver = Driver({"retrying": o.handle(o.retrying)}, {**o.ACTIVITIES, "flaky": flaky})
    driver.start("retrying", "r1")
    driver.episode("r1")
    for _ in range(2):  # attempt fails -> back-off timer -> next attempt
        driver.run_activity(driver.work_items[0])
        driver.episode("r1")
        driver.advance(timedelta(seconds=5))
        driver.episode("r1")
    driver.run_activity(driver.work_items[0])  # the third and last attempt fails
    after_last = driver.episode("r1")
    assert after_last.status is RuntimeStatus.RUNNING
    (dummy,) = after_last.timer_messages
    assert dummy.message.event["TimerId"] == 5
    assert dummy.visible_at == driver.now  # fires at once
    driver.fire_due_timers()
    final = driver.episode("r1")
    assert final.status is RuntimeStatus.COMPLETED
    assert "flaky failure 3" in json.loads(final.output or "")["failed"]


def _version_one(context: df.DurableOrchestrationContext) -> Generator[Any, Any, Any]:
    yield context.call_activity("echo", 1)
    yield context.call_activity("echo", 2)
    return "v1"


def _version_two(context: df.DurableOrchestrationContext) -> Generator[Any, Any, Any]:
    yield context.call_activity("exclaim", "1")  # code changed while an instance was running
    yield context.call_activity("echo", 2)
    return "v2"


def _version_timer(context: df.DurableOrchestrationContext) -> Generator[Any, Any, Any]:
    yield context.create_timer(context.current_utc_datetime)
    return "v3"


def test_changed_activity_name_is_reported_as_non_determinism() -> None:
    handles = {"orch": o.handle(_version_one)}
    driver = Driver(handles, o.ACTIVITIES)
    driver.start("orch", "n1")
    driver.episode("n1")
    driver.run_activity(driver.work_items[0])
    handles["orch"] = o.handle(_version_two)  # deploy new code
    result = driver.episode("n1")
    assert result.status is RuntimeStatus.FAILED
    assert result.failure is not None
    message = result.failure.message
    assert message.startswith("Non-Deterministic workflow detected: ")
    assert "sequence number 0" in message and "'echo'" in message and "'exclaim'" in message
    assert result.activity_messages == []  # nothing new is scheduled by a failed replay
    completed = [e for e in result.history if event_type(e) == EventType.EXECUTION_COMPLETED]
    assert completed[0]["Result"] == message


def test_activity_replaced_by_timer_is_reported_as_non_determinism() -> None:
    handles = {"orch": o.handle(_version_one)}
    driver = Driver(handles, o.ACTIVITIES)
    driver.start("orch", "n2")
    driver.episode("n2")
    handles["orch"] = o.handle(_version_timer)
    driver.run_activity(driver.work_items[0])
    result = driver.episode("n2")
    assert result.status is RuntimeStatus.FAILED
    assert result.failure is not None
    assert "sequence number 0" in result.failure.message and "'echo'" in result.failure.message
    assert "timer" in result.failure.message
