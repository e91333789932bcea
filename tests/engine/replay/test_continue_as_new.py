"""Continue-as-new: the next execution starts in the same episode; old executions' late messages are dropped."""

from __future__ import annotations

import json
from datetime import timedelta

import azure.durable_functions as df

from durable_local.history import event_type
from durable_local.model import EventType, RuntimeStatus, SchedulingMode
from tests.engine.replay import orchestrations as o
from tests.engine.replay.driver import Driver


def kinds(history: list[dict]) -> list[EventType]:
    return [event_type(e) for e in history]


def complete_activity(driver: Driver, text: str) -> None:
    driver.run_activity(next(m for m in driver.work_items if m.event["Input"] == json.dumps(text)))


def test_three_generations_with_a_loser_left_behind_in_ideal_mode() -> None:
    driver = Driver({"gens": o.handle(o.generations)}, o.ACTIVITIES, mode=SchedulingMode.IDEAL)
    driver.start("gens", "g1")
    driver.episode("g1")
    first_execution = driver.instances["g1"].execution_id
    for generation in range(3):
        complete_activity(driver, f"quick{generation}")
        result = driver.episode("g1")
        if generation < 2:
            assert result.continued_as_new and result.committed_count == 0
            assert result.generation == generation + 1
            assert result.status is RuntimeStatus.RUNNING
            assert kinds(result.history)[:4] == [
                EventType.ORCHESTRATOR_STARTED,
                EventType.EXECUTION_STARTED,
                EventType.ORCHESTRATOR_COMPLETED,
                EventType.TASK_SCHEDULED,
            ]
            assert json.loads(json.loads(result.history[1]["Input"]))["gen"] == generation + 1
            assert result.execution_id != first_execution
    assert result.status is RuntimeStatus.COMPLETED
    assert json.loads(result.output or "") == {"gen": 3, "seen": ["quick0", "quick1", "quick2"]}
    # The slow losers now complete; the first two belong to replaced executions.
    for generation in range(3):
        complete_activity(driver, f"slow{generation}")
    late = driver.episode("g1")
    assert [reason for _, reason in late.discarded] == ["Instance is in a terminal state"] * 3
    assert late.history == result.history


def test_loser_of_an_old_execution_is_discarded_while_the_new_one_runs() -> None:
    driver = Driver({"gens": o.handle(o.generations)}, o.ACTIVITIES, mode=SchedulingMode.IDEAL)
    driver.start("gens", "g1")
    driver.episode("g1")
    old_execution = driver.instances["g1"].execution_id
    complete_activity(driver, "quick0")
    driver.episode("g1")
    complete_activity(driver, "slow0")
    late = driver.episode("g1")
    ((message, reason),) = late.discarded
    assert message.execution_id == old_execution
    assert reason == f"ExecutionId of event ({old_execution}) does not match current executionId"
    assert late.status is RuntimeStatus.RUNNING and late.generation == 1


def test_shim_mode_keeps_the_execution_open_until_the_loser_finishes() -> None:
    driver = Driver({"gens": o.handle(o.generations)}, o.ACTIVITIES)
    driver.start("gens", "g1")
    driver.episode("g1")
    complete_activity(driver, "quick0")
    gated = driver.episode("g1")
    assert not gated.continued_as_new and gated.status is RuntimeStatus.RUNNING
    complete_activity(driver, "slow0")
    moved_on = driver.episode("g1")
    assert moved_on.continued_as_new and moved_on.generation == 1 and moved_on.discarded == []
    result = driver.run("g1")
    assert result.status is RuntimeStatus.COMPLETED and result.generation == 2


def test_cancelled_timer_loser_does_not_block_and_fires_into_a_replaced_execution() -> None:
    driver = Driver({"race": o.handle(o.timeout_race)}, o.ACTIVITIES)
    driver.start("race", "t1")
    driver.episode("t1")
    first_execution = driver.instances["t1"].execution_id
    driver.run_activity(driver.work_items[0])
    moved_on = driver.episode("t1")
    assert moved_on.continued_as_new  # the cancelled timer is no longer an open task
    driver.advance(timedelta(hours=1))  # the first execution's timer fires into the second execution
    late = driver.episode("t1")
    dropped = [(m.execution_id, m.event["EventType"], reason) for m, reason in late.discarded]
    reason = f"ExecutionId of event ({first_execution}) does not match current executionId"
    assert dropped == [(first_execution, EventType.TIMER_FIRED, reason)]
    result = driver.run("t1")
    assert result.status is RuntimeStatus.COMPLETED
    assert json.loads(result.output or "") == {"gen": 2}


def test_custom_status_is_carried_over_to_the_next_generation() -> None:
    driver = Driver({"status": o.handle(o.status_then_continue)}, o.ACTIVITIES)
    driver.start("status", "s1")
    first = driver.episode("s1")
    assert json.loads(first.custom_status or "") == {"set_in": 0}
    driver.run_activity(driver.work_items[0])
    second = driver.episode("s1")
    assert second.continued_as_new
    assert json.loads(second.custom_status or "") == {"set_in": 0}
    final = driver.run("s1")
    assert final.status is RuntimeStatus.COMPLETED and json.loads(final.output or "") == 2


def _work_then_wait(context: df.DurableOrchestrationContext) -> o.Gen:
    """Generation 0 runs one activity and continues as new; generation 1 waits for the event "late"."""
    generation = context.get_input() or 0
    if generation == 0:
        yield context.call_activity("echo", "work")
        context.continue_as_new(1)
        return None
    value = yield context.wait_for_external_event("late")
    return {"generation": generation, "late": value}


def test_event_raised_after_continue_as_new_in_the_same_episode_reaches_the_next_generation() -> None:
    # DTFx (TaskOrchestrationContext.HandleEventRaisedEvent with BehaviorOnContinueAsNew.Carryover): an event
    # processed after ContinueAsNew was called is added to the next execution's history, not dropped.
    driver = Driver({"w": o.handle(_work_then_wait)}, o.ACTIVITIES)
    driver.start("w", "c1")
    driver.episode("c1")
    driver.run_activity(driver.work_items[0])  # the completion that reaches continue_as_new ...
    driver.raise_event("c1", "late", {"n": 7})  # ... and an event behind it, in the same work item
    result = driver.episode("c1")
    assert result.continued_as_new and result.generation == 1
    carried = [e for e in result.history if event_type(e) is EventType.EVENT_RAISED]
    assert [(e["Name"], json.loads(e["Input"])) for e in carried] == [("late", {"n": 7})]
    assert result.status is RuntimeStatus.COMPLETED
    assert json.loads(result.output or "") == {"generation": 1, "late": {"n": 7}}


def test_event_processed_before_continue_as_new_is_not_carried_over() -> None:
    # The shim reaches ContinueAsNew only when the activity completes: an event processed earlier in the same
    # work item has no waiter and is not carried (the extension's shim calls ContinueAsNew without
    # preserveUnprocessedEvents), so the next generation keeps waiting.
    driver = Driver({"w": o.handle(_work_then_wait)}, o.ACTIVITIES)
    driver.start("w", "c2")
    driver.episode("c2")
    driver.raise_event("c2", "late", {"n": 8})
    driver.run_activity(driver.work_items[0])
    result = driver.episode("c2")
    assert result.continued_as_new and result.generation == 1
    assert not [e for e in result.history if event_type(e) is EventType.EVENT_RAISED]
    assert result.status is RuntimeStatus.RUNNING
