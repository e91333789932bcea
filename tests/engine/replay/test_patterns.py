"""Orchestration patterns run episode by episode through ``run_episode`` and the real SDK."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from durable_local.history import event_type, parse_timestamp
from durable_local.model import EventType, RuntimeStatus, SchedulingMode
from durable_local.replay.api import ReplaySettings
from tests.engine.replay import orchestrations as o
from tests.engine.replay.driver import T0, Driver


def events_of(history: list[dict], kind: EventType) -> list[dict]:
    return [e for e in history if event_type(e) == kind]


@pytest.mark.parametrize("mode", list(SchedulingMode))
def test_chain_runs_three_activities_in_order(mode: SchedulingMode) -> None:
    driver = Driver({"chain": o.handle(o.chain)}, o.ACTIVITIES, mode=mode)
    driver.start("chain", "c1", "go")
    result = driver.run("c1")
    assert result.status is RuntimeStatus.COMPLETED
    assert json.loads(result.output or "") == "go!!!"
    scheduled = events_of(result.history, EventType.TASK_SCHEDULED)
    assert [(e["EventId"], e["Name"]) for e in scheduled] == [(0, "exclaim"), (1, "exclaim"), (2, "exclaim")]
    assert events_of(result.history, EventType.EXECUTION_COMPLETED)[0]["EventId"] == 3


@pytest.mark.parametrize("include", [False, True])
def test_task_scheduled_keeps_its_input_in_history_only_with_include_parameters(include: bool) -> None:
    # DTFx ProcessScheduleTaskDecision: the activity message always carries the input; the TaskScheduled history
    # event only with IncludeParameters (the extension's storeInputsInOrchestrationHistory, off by default).
    driver = Driver({"chain": o.handle(o.chain)}, o.ACTIVITIES, settings=ReplaySettings(include_parameters=include))
    driver.start("chain", "c1", "go")
    first = driver.episode("c1")
    assert [m.event["Input"] for m in first.activity_messages] == ['"go"']
    result = driver.run("c1")
    assert json.loads(result.output or "") == "go!!!"
    recorded = [e["Input"] for e in events_of(result.history, EventType.TASK_SCHEDULED)]
    assert recorded == (['"go"', '"go!"', '"go!!"'] if include else [None, None, None])


def test_fan_out_200_schedules_everything_in_one_episode() -> None:
    driver = Driver({"fan": o.handle(o.fan_out)}, o.ACTIVITIES)
    driver.start("fan", "f1", 200)
    first = driver.episode("f1")
    assert len(first.activity_messages) == 200
    assert sorted(m.event["EventId"] for m in first.activity_messages) == list(range(200))
    # Completions in reverse order, delivered 32 per work item (the control-queue batch size).
    result = driver.run("f1", pick=lambda items: items[-1], batch=32)
    assert result.status is RuntimeStatus.COMPLETED
    assert json.loads(result.output or "") == sum(2 * i for i in range(200))


def test_task_any_returns_first_completion_and_completes_after_loser_in_shim_mode() -> None:
    driver = Driver({"any": o.handle(o.first_of_two)}, o.ACTIVITIES)
    driver.start("any", "a1")
    driver.episode("a1")
    fast = next(m for m in driver.work_items if m.event["Input"] == '"fast"')
    driver.run_activity(fast)
    after_winner = driver.episode("a1")
    # The SDK returned, but DTFx keeps the instance open while the loser is still an open task.
    assert after_winner.status is RuntimeStatus.RUNNING
    result = driver.run("a1")
    assert result.status is RuntimeStatus.COMPLETED
    assert json.loads(result.output or "") == "fast"


def test_task_any_completes_at_once_in_ideal_mode() -> None:
    driver = Driver({"any": o.handle(o.first_of_two)}, o.ACTIVITIES, mode=SchedulingMode.IDEAL)
    driver.start("any", "a1")
    driver.episode("a1")
    driver.run_activity(next(m for m in driver.work_items if m.event["Input"] == '"fast"'))
    assert driver.episode("a1").status is RuntimeStatus.COMPLETED


def test_timers_including_one_longer_than_six_days_are_split() -> None:
    driver = Driver({"timers": o.handle(o.timers)}, o.ACTIVITIES)
    driver.start("timers", "t1")
    result = driver.run("t1")
    assert result.status is RuntimeStatus.COMPLETED
    fire_ats = [parse_timestamp(e["FireAt"]) for e in events_of(result.history, EventType.TIMER_CREATED)]
    start = T0 + timedelta(hours=1)
    # 1 h timer, then 10 days in 3-day slices (the SDK's V3 long timer) ending exactly at +10 days.
    assert fire_ats == [
        T0 + timedelta(hours=1),
        start + timedelta(days=3),
        start + timedelta(days=6),
        T0 + timedelta(days=10),
    ]
    assert all(b - a <= timedelta(days=6) for a, b in zip([T0, *fire_ats], fire_ats))
    assert parse_timestamp(json.loads(result.output or "")) == T0 + timedelta(days=10)


def test_external_events_are_delivered_in_order() -> None:
    driver = Driver({"approval": o.handle(o.approval)})
    driver.start("approval", "e1")
    assert driver.episode("e1").status is RuntimeStatus.RUNNING
    driver.raise_event("e1", "Approve", "first")
    driver.raise_event("e1", "Approve", "second")
    result = driver.run("e1")
    assert result.status is RuntimeStatus.COMPLETED
    assert json.loads(result.output or "") == ["first", "second"]


def test_sub_orchestrations_success_and_failure_propagate_to_parent() -> None:
    driver = Driver({"parent": o.handle(o.parent), "child": o.handle(o.child)}, o.ACTIVITIES)
    driver.start("parent", "p1")
    first = driver.episode("p1")
    (start_message,) = first.orchestrator_messages
    assert start_message.instance_id == "kid-1"
    assert start_message.event["ParentInstance"]["TaskScheduleId"] == 0
    assert start_message.event["ParentInstance"]["OrchestrationInstance"]["InstanceId"] == "p1"
    result = driver.run("p1")
    assert result.status is RuntimeStatus.COMPLETED
    output = json.loads(result.output or "")
    assert output["ok"] == 42
    assert "Orchestrator function 'child' failed: child says no" in output["error"]
    failed_child = driver.instances["kid-2"].result
    assert failed_child is not None and failed_child.status is RuntimeStatus.FAILED
    sub_failed = events_of(result.history, EventType.SUB_ORCHESTRATION_INSTANCE_FAILED)
    assert sub_failed[0]["Reason"] == "Orchestrator function 'child' failed: child says no"


def test_caught_activity_failure_lets_the_orchestration_continue() -> None:
    driver = Driver({"caught": o.handle(o.caught_failure)}, o.ACTIVITIES)
    driver.start("caught", "x1")
    result = driver.run("x1")
    assert result.status is RuntimeStatus.COMPLETED
    output = json.loads(result.output or "")
    assert "boom 1" in output["caught"]
    assert output["then"] == "recovered"


def test_uncaught_failure_fails_with_the_extension_message() -> None:
    driver = Driver({"bad": o.handle(o.uncaught_failure)}, o.ACTIVITIES)
    driver.start("bad", "b1")
    result = driver.run("b1")
    assert result.status is RuntimeStatus.FAILED
    message = "Orchestrator function 'bad' failed: orchestrator gave up"
    assert result.output == json.dumps(message)
    assert result.failure is not None and result.failure.message == message
    completed = events_of(result.history, EventType.EXECUTION_COMPLETED)[0]
    assert completed["OrchestrationStatus"] == RuntimeStatus.FAILED.value
    assert completed["Result"] == message


def test_custom_status_follows_the_latest_episode() -> None:
    driver = Driver({"status": o.handle(o.with_status)}, o.ACTIVITIES)
    driver.start("status", "s1")
    assert json.loads(driver.episode("s1").custom_status or "") == {"stage": 1}
    driver.run_activity(driver.work_items[0])
    assert json.loads(driver.episode("s1").custom_status or "") == {"stage": 2}


def test_terminate_completes_with_the_reason() -> None:
    driver = Driver({"forever": o.handle(o.waits_forever)})
    driver.start("forever", "w1")
    driver.episode("w1")
    driver.terminate("w1", "operator said stop")
    result = driver.episode("w1")
    assert result.status is RuntimeStatus.TERMINATED
    assert result.output == json.dumps("operator said stop")
    completed = events_of(result.history, EventType.EXECUTION_COMPLETED)[0]
    assert completed["OrchestrationStatus"] == RuntimeStatus.TERMINATED.value
    # Later messages for a finished instance are discarded.
    driver.raise_event("w1", "never", 1)
    after = driver.episode("w1")
    assert after.status is RuntimeStatus.TERMINATED and len(after.discarded) == 1
    assert after.history == result.history


def test_suspend_holds_progress_until_resume() -> None:
    driver = Driver({"stepper": o.handle(o.stepper)}, o.ACTIVITIES)
    driver.start("stepper", "s1")
    driver.episode("s1")
    driver.suspend("s1")
    assert driver.episode("s1").status is RuntimeStatus.SUSPENDED
    driver.run_activity(driver.work_items[0])
    while_suspended = driver.episode("s1")
    assert while_suspended.status is RuntimeStatus.SUSPENDED
    assert while_suspended.activity_messages == []  # the completion is recorded but not acted on
    assert events_of(while_suspended.history, EventType.TASK_COMPLETED)
    driver.resume("s1")
    resumed = driver.episode("s1")
    assert resumed.status is RuntimeStatus.RUNNING
    assert [m.event["EventId"] for m in resumed.activity_messages] == [1]
    result = driver.run("s1")
    assert result.status is RuntimeStatus.COMPLETED and json.loads(result.output or "") == 6


def test_durable_http_fails_clearly() -> None:
    driver = Driver({"unsupported": o.handle(o.uses_http)})
    driver.start("unsupported", "u1")
    result = driver.episode("u1")
    assert result.status is RuntimeStatus.FAILED
    assert result.failure is not None
    assert "CallHttp" in result.failure.message and "not supported by durable_local" in result.failure.message


def test_calling_an_unknown_entity_fails_like_the_extension() -> None:
    # ThrowIfFunctionDoesNotExist: the app has no entity function named "counter".
    driver = Driver({"calls_entity": o.handle(o.uses_entity)})
    driver.start("calls_entity", "u2")
    result = driver.episode("u2")
    assert result.status is RuntimeStatus.FAILED
    assert result.failure is not None
    assert "The function 'counter' doesn't exist, is disabled, or is not an entity function" in result.failure.message
    assert result.orchestrator_messages == []  # nothing was sent to the entity


def test_unknown_activity_fails_like_the_extension() -> None:
    driver = Driver({"chain": o.handle(o.chain)}, {"echo": o.echo})
    driver.start("chain", "c1", "x")
    result = driver.episode("c1")
    assert result.status is RuntimeStatus.FAILED
    assert result.failure is not None
    assert "The function 'exclaim' doesn't exist" in result.failure.message
    assert result.activity_messages == []


def test_error_path_replays_actions_and_waits_for_open_tasks_in_shim_mode() -> None:
    driver = Driver({"f": o.handle(o.fails_after_first_of_two)}, o.ACTIVITIES)
    driver.start("f", "f1")
    driver.episode("f1")
    driver.run_activity(driver.work_items[0])
    after_error = driver.episode("f1")
    # The SDK raised (error path), but activity "b" is still an open DTFx task: no completion yet.
    assert after_error.status is RuntimeStatus.RUNNING
    driver.run_activity(driver.work_items[0])
    result = driver.episode("f1")
    assert result.status is RuntimeStatus.FAILED
    assert result.failure is not None
    assert result.failure.message == "Orchestrator function 'f' failed: failed with a task still running"


def test_error_path_fails_at_once_in_ideal_mode() -> None:
    driver = Driver({"f": o.handle(o.fails_after_first_of_two)}, o.ACTIVITIES, mode=SchedulingMode.IDEAL)
    driver.start("f", "f1")
    driver.episode("f1")
    driver.run_activity(driver.work_items[0])
    assert driver.episode("f1").status is RuntimeStatus.FAILED


def test_sub_orchestration_without_instance_id_gets_the_dtfx_default() -> None:
    driver = Driver({"p": o.handle(o.anonymous_child), "child": o.handle(o.child)}, o.ACTIVITIES)
    driver.start("p", "p1")
    first = driver.episode("p1")
    (message,) = first.orchestrator_messages
    assert message.instance_id == f"{first.execution_id}:0"
    result = driver.run("p1")
    assert result.status is RuntimeStatus.COMPLETED and json.loads(result.output or "") == 10
