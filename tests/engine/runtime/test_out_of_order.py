"""DTFx's out-of-order rule (``OrchestrationSession.IsOutOfOrderMessage``, DurableTask.AzureStorage) and what the
dispatcher does with such messages.

The rule's unit tests build a session from a prefetched batch (history + the sentinel's checkpoint time); the
scenario tests run the engine over a manual clock and replay the collector's case: a timer left behind by an
execution that continued as new.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import pytest

from durable_local import history
from durable_local.faults import CrashPoint, FaultInjector
from durable_local.history import format_timestamp
from durable_local.model import EventType, HistoryEvent, RuntimeStatus, TaskMessage
from durable_local.ports import QueueMessage
from durable_local.sessions.state import OrchestrationSession, PendingMessageBatch

from .conftest import T0, Queues
from .world import World

INSTANCE = "inst"
EXECUTION = "e2"


def _decision(kind: EventType, event_id: int, **fields: object) -> HistoryEvent:
    return {"EventType": int(kind), "EventId": event_id, "IsPlayed": False, "Timestamp": format_timestamp(T0), **fields}


def _history() -> list[HistoryEvent]:
    """A running execution that scheduled activity 0 and timer 1."""
    return [
        history.orchestrator_started(timestamp=T0),
        history.execution_started(
            timestamp=T0, name="orch", instance_id=INSTANCE, execution_id=EXECUTION, input=None, generation=1
        ),
        _decision(EventType.TASK_SCHEDULED, 0, Name="echo", Version="", Input=None),
        _decision(EventType.TIMER_CREATED, 1, FireAt=format_timestamp(T0 + timedelta(minutes=1))),
        history.orchestrator_completed(timestamp=T0),
    ]


def _session(
    queues: Queues, events: list[HistoryEvent], *, checkpoint: datetime | None, execution_id: str = EXECUTION
) -> OrchestrationSession:
    batch = PendingMessageBatch(queues.control, INSTANCE, execution_id)
    batch.history = events
    batch.last_checkpoint_time = checkpoint
    return OrchestrationSession(batch)


def _message(event: HistoryEvent, *, dequeue_count: int = 1, execution_id: str | None = EXECUTION) -> QueueMessage:
    return _sent(TaskMessage(INSTANCE, execution_id, event), dequeue_count=dequeue_count)


def _sent(body: TaskMessage, *, dequeue_count: int = 1) -> QueueMessage:
    return QueueMessage(
        message_id="m1",
        pop_receipt="p1",
        dequeue_count=dequeue_count,
        inserted_on=T0,
        next_visible_on=T0 + timedelta(minutes=5),
        body=body,
    )


def _timer_fired(timer_id: int, at: datetime) -> HistoryEvent:
    return history.timer_fired(timestamp=at, timer_id=timer_id, fire_at=at + timedelta(minutes=1))


LATER = T0 + timedelta(seconds=40)


def test_a_response_whose_task_is_in_history_is_in_order(queues: Queues) -> None:
    session = _session(queues, _history(), checkpoint=T0)
    done = history.task_completed(timestamp=LATER, task_scheduled_id=0, result=None)
    assert not session.is_out_of_order(_message(done))
    assert not session.is_out_of_order(_message(_timer_fired(1, LATER)))


def test_a_response_newer_than_the_checkpoint_whose_task_is_missing_is_out_of_order(queues: Queues) -> None:
    # The lease-move race: the activity answered before the episode that scheduled task 7 checkpointed.
    session = _session(queues, _history(), checkpoint=T0)
    for event in (
        history.task_completed(timestamp=LATER, task_scheduled_id=7, result=None),
        history.task_failed(timestamp=LATER, task_scheduled_id=7, reason="r"),
        history.sub_orchestration_completed(timestamp=LATER, task_scheduled_id=7, result=None),
        history.sub_orchestration_failed(timestamp=LATER, task_scheduled_id=7, reason="r"),
        _timer_fired(7, LATER),
    ):
        assert session.is_out_of_order(_message(event)), event


def test_a_message_older_than_the_last_checkpoint_is_never_out_of_order(queues: Queues) -> None:
    # The checkpoint writes history only after it sent its messages: a message created before the last checkpoint
    # completed cannot be waiting for that history. This is the leftover timer of an execution that continued as
    # new: its history is gone (no rows for its execution id), the sentinel's checkpoint time is the newer one.
    old_generation = _session(queues, [], checkpoint=LATER, execution_id="e1")
    assert not old_generation.is_out_of_order(_message(_timer_fired(1, T0), execution_id="e1"))
    current = _session(queues, _history(), checkpoint=LATER)
    assert not current.is_out_of_order(_message(_timer_fired(7, T0)))


def test_the_checkpoint_rule_is_strict_and_needs_a_checkpoint(queues: Queues) -> None:
    same_moment = _session(queues, _history(), checkpoint=LATER)
    assert same_moment.is_out_of_order(_message(_timer_fired(7, LATER)))
    never_checkpointed = _session(queues, [], checkpoint=None)
    assert never_checkpointed.is_out_of_order(_message(_timer_fired(7, T0)))


@pytest.mark.parametrize(
    "kind",
    [
        k
        for k in EventType
        if k
        not in (
            EventType.TASK_COMPLETED,
            EventType.TASK_FAILED,
            EventType.SUB_ORCHESTRATION_INSTANCE_COMPLETED,
            EventType.SUB_ORCHESTRATION_INSTANCE_FAILED,
            EventType.TIMER_FIRED,
        )
    ],
)
def test_only_responses_can_be_out_of_order(queues: Queues, kind: EventType) -> None:
    # Whatever its EventId, a message of another type (a start, a raised event from a client, a terminate...) is
    # never held back: DTFx filters on the event type first.
    session = _session(queues, _history(), checkpoint=T0)
    event: HistoryEvent = {
        "EventType": int(kind),
        "EventId": 42,
        "IsPlayed": False,
        "Timestamp": format_timestamp(LATER),
    }
    assert not session.is_out_of_order(_message(event))


def test_an_entity_answer_waits_for_its_event_sent(queues: Queues) -> None:
    request = "6c1f5a3e-0d7b-4b8e-9f51-2a4c7d9e0b13"
    raised = history.event_raised(timestamp=LATER, name=request, input="{}")
    answer = TaskMessage(INSTANCE, EXECUTION, raised, sender="@budget@tenant")
    session = _session(queues, _history(), checkpoint=T0)
    assert session.is_out_of_order(_sent(answer))
    sent = _decision(
        EventType.EVENT_SENT, 2, InstanceId="@budget@tenant", Name="op", Input=f'{{"id": "{request}", "op": "x"}}'
    )
    assert not _session(queues, [*_history(), sent], checkpoint=T0).is_out_of_order(_sent(answer))
    # Older than the last checkpoint: in order, like any response.
    assert not _session(queues, _history(), checkpoint=LATER + timedelta(seconds=1)).is_out_of_order(_sent(answer))


def test_a_response_for_an_instance_without_history_is_a_zombie_after_five_dequeues(queues: Queues) -> None:
    session = _session(queues, [], checkpoint=None)
    response = history.task_completed(timestamp=LATER, task_scheduled_id=0, result=None)
    assert [session.is_out_of_order(_message(response, dequeue_count=n)) for n in range(1, 8)] == [
        True,
        True,
        True,
        True,
        True,
        False,
        False,
    ]


# Scenarios -------------------------------------------------------------------------------------------------------


def test_a_timer_left_by_a_continued_execution_is_discarded_without_abandoning(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    # run-local (10 days, 60-minute chunks, K=5) printed 46 "out-of-order TIMER_FIRED ... abandoning" lines: each
    # timer of a finished execution was abandoned five times (2, 4, 8, 16, 32 s) before being discarded. Its
    # discard is the normal end of such a timer (the seed says so): nothing to warn the user about either.
    caplog.set_level(logging.INFO, logger="durable_local")
    faults = FaultInjector()
    engine = world.engine(faults)
    instance_id = engine.start_new("outlives_its_timer")

    def second_checkpoint_of_the_new_execution() -> bool:
        status = engine.get_status(instance_id, show_history=True)
        events = (status.history if status else None) or []
        return sum(1 for e in events if e["EventType"] == EventType.TIMER_CREATED) == 2

    assert world.pump_until(second_checkpoint_of_the_new_execution)
    assert world.clock.now() < T0 + timedelta(seconds=600)  # the first execution's timer is still hidden
    assert world.finish(engine, instance_id) == (RuntimeStatus.COMPLETED, "done")
    assert faults.hits(CrashPoint.C7_OUT_OF_ORDER_MESSAGE) == 0
    assert engine.stats()["out_of_order_abandoned"] == 0
    assert faults.hits(CrashPoint.C13_STALE_GENERATION_DISCARDED) == 1  # the first execution's timer
    assert engine.control_queue_for(instance_id).approximate_count() == 0
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert any("discarding 1 message(s) (TIMER_FIRED)" in r.getMessage() for r in caplog.records)


def test_an_out_of_order_abandonment_is_counted_and_logged_at_debug_level(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    # A response to a task this execution has not checkpointed (yet): abandoned with back-off, every time. It is a
    # routine race on Azure (a lease move), not something to print on the user's console.
    caplog.set_level(logging.DEBUG, logger="durable_local")
    faults = FaultInjector()
    engine = world.engine(faults)
    instance_id = engine.start_new("wait_event")
    world.pump_until(lambda: engine.get_status(instance_id).runtime_status is RuntimeStatus.RUNNING)  # type: ignore[union-attr]
    execution_id = engine.get_status(instance_id).execution_id  # type: ignore[union-attr]
    early = history.task_completed(timestamp=world.clock.now() + timedelta(seconds=1), task_scheduled_id=9, result=None)
    engine.control_queue_for(instance_id).add(TaskMessage(instance_id, execution_id, early))
    assert world.pump_until(lambda: faults.hits(CrashPoint.C7_OUT_OF_ORDER_MESSAGE) >= 2, step=5)
    assert engine.stats()["out_of_order_abandoned"] == faults.hits(CrashPoint.C7_OUT_OF_ORDER_MESSAGE)
    about_it = [r for r in caplog.records if "out-of-order" in r.getMessage()]
    assert about_it, "the abandonment is logged"
    assert {r.levelno for r in about_it} == {logging.DEBUG}
