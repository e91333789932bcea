"""One entity work item at a time, driving the real SDK entity handle (``df.Entity.create``)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from durable_local.entities.batch import EntityBatchError
from durable_local.history import event_type, execution_terminated
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
