"""One entity work item at a time, driving the real SDK entity handle (``df.Entity.create``)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from durable_local.entities.batch import EntityBatchError
from durable_local.entities.dotnet import format_datetime, ticks_of, to_ticks
from durable_local.entities.ids import EntityId
from durable_local.entities.messages import RequestMessage
from durable_local.history import event_raised, event_type, execution_terminated
from durable_local.model import EventType, RuntimeStatus, TaskMessage

from .helpers import T0, Caller, client_signal, episode, registry, state_of

ENTITY = "@counter@k"


def test_first_message_starts_the_entity_and_the_batch_ends_with_continue_as_new() -> None:
    result = episode(ENTITY, [client_signal(ENTITY, "add", 5)])
    assert result.continued_as_new and result.committed_count == 0
    assert [event_type(e) for e in result.history] == [
        EventType.ORCHESTRATOR_STARTED,
        EventType.EXECUTION_STARTED,
        EventType.ORCHESTRATOR_COMPLETED,
    ]
    started = result.history[1]
    assert started["Name"] == ENTITY and started["Generation"] == 1  # auto-start was generation 0
    assert started["OrchestrationInstance"] == {"InstanceId": ENTITY, "ExecutionId": "x1"}
    assert result.execution_id == "x1" and result.status is RuntimeStatus.RUNNING
    assert state_of(result) == {"exists": True, "state": "5", "sorter": {}}
    assert started["Input"] == result.input  # the state lives in the new execution's input
    assert json.loads(result.custom_status or "") == {"entityExists": True}
    assert result.orchestrator_messages == []  # a signal gets no response


def test_the_next_batch_starts_from_the_persisted_state() -> None:
    first = episode(ENTITY, [client_signal(ENTITY, "add", 5)])
    second = episode(ENTITY, [client_signal(ENTITY, "add", 2)], past=first.history)
    assert state_of(second)["state"] == "7"
    assert second.history[1]["Generation"] == 2


def test_calls_are_answered_to_the_calling_execution_in_batch_order() -> None:
    caller = Caller()
    messages = [
        caller.request(ENTITY, "add", 4),
        caller.request(ENTITY, "fail"),
        caller.request(ENTITY, "add", 1, signal=True),
        caller.request(ENTITY, "get"),
    ]
    result = episode(ENTITY, messages)
    responses = [
        (m.instance_id, m.execution_id, m.event["Name"], json.loads(m.event["Input"]))
        for m in result.orchestrator_messages
    ]
    assert responses == [
        ("orch", "exec-1", "orch-1", {"result": "null"}),
        ("orch", "exec-1", "orch-2", {"result": '"no such luck"', "exceptionType": "Error"}),
        ("orch", "exec-1", "orch-4", {"result": "5"}),
    ]
    assert all(
        m.sender == ENTITY and event_type(m.event) is EventType.EVENT_RAISED for m in result.orchestrator_messages
    )
    assert state_of(result)["state"] == "5"  # a failed operation does not undo the batch (Python SDK)


def test_a_request_delivered_twice_runs_once() -> None:
    caller = Caller()
    add = caller.request(ENTITY, "add", 3, signal=True)
    first = episode(ENTITY, [add])
    again = episode(ENTITY, [TaskMessage(add.instance_id, None, dict(add.event), sender="orch")], past=first.history)
    assert state_of(again)["state"] == "3"


def test_out_of_order_requests_wait_for_their_predecessor() -> None:
    caller = Caller()
    first, second = caller.request(ENTITY, "add", 1), caller.request(ENTITY, "get")
    held = episode(ENTITY, [second])
    assert held.orchestrator_messages == []
    assert state_of(held)["sorter"]["ReceivedFromInstance"]["orch"]["Buffered"]  # persisted while waiting
    released = episode(ENTITY, [first], past=held.history)
    assert [m.event["Name"] for m in released.orchestrator_messages] == ["orch-1", "orch-2"]
    assert json.loads(released.orchestrator_messages[1].event["Input"]) == {"result": "1"}


def test_a_full_batch_suspends_the_entity_and_continues_with_a_message_to_itself() -> None:
    signals = [client_signal(ENTITY, "add", 1) for _ in range(3)]
    first = episode(ENTITY, signals, batch_size=2)
    state = state_of(first)
    assert state["state"] == "2" and state["suspended"] is True and len(state["queue"]) == 1
    assert json.loads(first.custom_status or "") == {"entityExists": True, "queueSize": 1}
    (resume,) = first.orchestrator_messages
    assert (resume.instance_id, resume.event["Name"], resume.execution_id) == (ENTITY, "continue", None)
    while_suspended = episode(ENTITY, [client_signal(ENTITY, "add", 10)], past=first.history, batch_size=2)
    assert state_of(while_suspended)["state"] == "2"  # queued, not run: the entity waits for its continue
    resumed = episode(ENTITY, [resume], past=while_suspended.history, batch_size=2)
    assert state_of(resumed)["state"] == "13" and "suspended" not in state_of(resumed)


def test_a_suspended_entity_resumes_by_itself_after_ten_seconds() -> None:
    first = episode(ENTITY, [client_signal(ENTITY, "add", 1) for _ in range(3)], batch_size=2)
    later = T0 + timedelta(seconds=11)
    result = episode(ENTITY, [client_signal(ENTITY, "add", 10, at=later)], past=first.history, now=later)
    assert state_of(result)["state"] == "13"


def test_terminating_an_entity_ends_it_for_good() -> None:
    first = episode(ENTITY, [client_signal(ENTITY, "add", 1)])
    stop = TaskMessage(ENTITY, None, execution_terminated(timestamp=T0, reason="stop"))
    terminated = episode(ENTITY, [stop], past=first.history)
    assert terminated.status is RuntimeStatus.TERMINATED
    after = episode(ENTITY, [client_signal(ENTITY, "add", 1)], past=terminated.history)
    assert after.status is RuntimeStatus.TERMINATED and len(after.discarded) == 1


def test_only_an_event_for_no_particular_execution_starts_an_entity() -> None:
    stray = client_signal(ENTITY, "add", 1)
    result = episode(ENTITY, [TaskMessage(ENTITY, "some-execution", stray.event)])
    assert result.status is RuntimeStatus.PENDING and result.history == [] and len(result.discarded) == 1


def test_a_missing_entity_function_or_a_failing_function_aborts_the_batch() -> None:
    with pytest.raises(EntityBatchError, match="'counter' doesn't exist"):
        episode(ENTITY, [client_signal(ENTITY, "add", 1)], functions=registry(other=lambda _: "{}"))

    def broken(_: str) -> str:
        raise RuntimeError("worker crashed")

    with pytest.raises(EntityBatchError, match="worker crashed"):
        episode(ENTITY, [client_signal(ENTITY, "add", 1)], functions=registry(counter=broken))


def test_lock_requests_from_other_sdks_lock_forward_and_release() -> None:
    # Python 1.x cannot send lock requests, but the scheduler handles them as the extension does: the lock
    # request ends the batch, locks the entity for its sender and travels on to the next entity of its lock set.
    holder = Caller("holder", "hx")
    other = Caller("other", "ox")
    lockset = [EntityId.of("counter", "k"), EntityId.of("counter", "m")]
    lock = RequestMessage(id="lock-1", parent_instance_id="holder", parent_execution_id="hx", lockset=lockset)
    locked = episode(ENTITY, [_labelled(holder, lock), other.request(ENTITY, "add", 5, signal=True)])
    assert state_of(locked)["lockedBy"] == "holder" and len(state_of(locked)["queue"]) == 1
    (forwarded,) = locked.orchestrator_messages
    assert forwarded.instance_id == "@counter@m" and json.loads(forwarded.event["Input"])["pos"] == 1
    # Only the holder's requests run while it holds the lock; the release lets the others through.
    mine = episode(ENTITY, [holder.request(ENTITY, "add", 1, signal=True)], past=locked.history)
    assert state_of(mine)["state"] == "1" and len(state_of(mine)["queue"]) == 1
    release = event_raised(timestamp=T0, name="release", input=json.dumps({"parent": "holder", "id": "lock-1"}))
    released = episode(ENTITY, [TaskMessage(ENTITY, None, release)], past=mine.history)
    assert state_of(released)["state"] == "6" and "lockedBy" not in state_of(released)


def test_the_last_entity_of_a_lock_set_answers_the_holder() -> None:
    lock = RequestMessage(id="lock-2", parent_instance_id="holder", parent_execution_id="hx")
    lock.lockset = [EntityId.of("counter", "k")]
    result = episode(ENTITY, [_labelled(Caller("holder", "hx"), lock)])
    (answer,) = result.orchestrator_messages
    assert (answer.instance_id, answer.execution_id, answer.event["Name"]) == ("holder", "hx", "lock-2")
    assert json.loads(answer.event["Input"]) == {"result": "Lock Acquisition Completed"}


def _labelled(sender: Caller, request: RequestMessage) -> TaskMessage:
    """A lock request as an orchestration sends it: labelled by its sorter like any request."""
    sender.sorter.label_outgoing(request, ENTITY, to_ticks(T0) + 1000, ticks_of(timedelta(minutes=30)))
    event = event_raised(timestamp=T0, name="op", input=request.to_text())
    return TaskMessage(ENTITY, None, event, sender=sender.instance_id)


def test_a_request_due_later_is_sent_back_to_the_entity_until_it_is_due() -> None:
    due = T0 + timedelta(hours=1)
    request = RequestMessage(id="later", operation="add", is_signal=True, input=json.dumps(json.dumps(2)))
    request.scheduled_time = to_ticks(due)
    early = episode(ENTITY, [TaskMessage(ENTITY, None, event_raised(timestamp=T0, name="op", input=request.to_text()))])
    assert "state" not in state_of(early) and early.orchestrator_messages == []
    (again,) = early.timer_messages  # back to itself, hidden until it is due
    assert again.visible_at == due and again.message.event["Name"] == "op@" + format_datetime(to_ticks(due))
    on_time = episode(ENTITY, [again.message], past=early.history, now=due)
    assert state_of(on_time)["state"] == "2"
