"""Decision events and their outbound messages, as DTFx's dispatcher makes them.

``TaskOrchestrationDispatcher.ProcessScheduleTaskDecision`` / ``ProcessCreateTimerDecision`` /
``ProcessCreateSubOrchestrationInstanceDecision`` / ``ProcessSendEventDecision`` /
``ProcessWorkflowCompletedTaskDecision``: each
decision appends one history event carrying the decision's sequence number as ``EventId`` and may
produce one message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from durable_local.history import (
    ParentInstance,
    event_raised,
    execution_started,
    format_timestamp,
    sub_orchestration_completed,
    sub_orchestration_failed,
    timer_fired,
)
from durable_local.model import EventType, HistoryEvent, ScheduledMessage, TaskMessage
from durable_local.replay.dtfx import Decision


@dataclass(slots=True)
class Outbound:
    """Messages produced by an episode, grouped like ``EpisodeResult``."""

    activity_messages: list[TaskMessage] = field(default_factory=list)
    timer_messages: list[ScheduledMessage] = field(default_factory=list)
    orchestrator_messages: list[TaskMessage] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ExecutionInfo:
    """What the dispatcher knows about the running execution (from its ExecutionStarted)."""

    instance_id: str
    execution_id: str
    name: str
    version: str
    input: str | None
    generation: int
    parent: ParentInstance | None
    tags: dict[str, str] | None


def sub_orchestration_input(action_input: str | None) -> str | None:
    """DTFx serialises the shim's input object (the worker's JSON text, a string) once more when it creates a
    sub-orchestration, and the child's context gets it parsed once (``GetInputAsJson``): the SDK then decodes the
    JSON text to the original value."""
    return None if action_input is None else json.dumps(action_input)


def decision_event(decision: Decision, now: datetime) -> HistoryEvent:
    """The history event a decision appends (``EventId`` = its sequence number)."""
    event: HistoryEvent = {
        "EventType": int(decision.kind),
        "EventId": decision.id,
        "IsPlayed": False,
        "Timestamp": format_timestamp(now),
    }
    if decision.kind == EventType.TASK_SCHEDULED:
        event.update(
            {"Name": decision.name, "Version": "", "Input": decision.input, "Tags": None, "ParentTraceContext": None}
        )
    elif decision.kind == EventType.TIMER_CREATED:
        assert decision.fire_at is not None
        event["FireAt"] = format_timestamp(decision.fire_at)
    elif decision.kind == EventType.SUB_ORCHESTRATION_INSTANCE_CREATED:
        event.update(
            {
                "Name": decision.name,
                "Version": "",
                "InstanceId": decision.instance_id,
                "Input": sub_orchestration_input(decision.input),
                "Tags": None,
            }
        )
    elif decision.kind == EventType.EVENT_SENT:
        event.update({"InstanceId": decision.instance_id, "Name": decision.name, "Input": decision.input})
    else:  # ExecutionCompleted / ContinueAsNew
        event.update({"OrchestrationStatus": decision.status, "Result": decision.result, "FailureDetails": None})
    return event


def recorded_event(event: HistoryEvent, include_parameters: bool) -> HistoryEvent:
    """The copy of a decision event that history keeps: without ``include_parameters`` DTFx writes TaskScheduled
    and SubOrchestrationInstanceCreated without their input (``ProcessScheduleTaskDecision``,
    ``ProcessCreateSubOrchestrationInstanceDecision``); the messages built from ``event`` keep it."""
    if include_parameters or event.get("EventType") not in _EVENTS_WITH_PARAMETERS:
        return event
    return {**event, "Input": None}


_EVENTS_WITH_PARAMETERS = (int(EventType.TASK_SCHEDULED), int(EventType.SUB_ORCHESTRATION_INSTANCE_CREATED))


def decision_message(
    decision: Decision,
    *,
    event: HistoryEvent,
    info: ExecutionInfo,
    now: datetime,
    new_execution_id: Callable[[], str],
    outbound: Outbound,
) -> None:
    """Add the message a scheduling decision produces (completion messages are handled by the caller)."""
    if decision.kind == EventType.TASK_SCHEDULED:
        outbound.activity_messages.append(TaskMessage(info.instance_id, info.execution_id, event))
    elif decision.kind == EventType.TIMER_CREATED:
        assert decision.fire_at is not None
        fired = timer_fired(timestamp=now, timer_id=decision.id, fire_at=decision.fire_at)
        outbound.timer_messages.append(
            ScheduledMessage(TaskMessage(info.instance_id, info.execution_id, fired), visible_at=decision.fire_at)
        )
    elif decision.kind == EventType.SUB_ORCHESTRATION_INSTANCE_CREATED:
        child_instance = decision.instance_id or f"{info.execution_id}:{decision.id}"
        child_execution = new_execution_id()
        parent = ParentInstance(
            name=info.name,
            instance_id=info.instance_id,
            execution_id=info.execution_id,
            task_scheduled_id=decision.id,
            version=info.version,
        )
        started = execution_started(
            timestamp=now,
            name=decision.name or "",
            instance_id=child_instance,
            execution_id=child_execution,
            input=sub_orchestration_input(decision.input),
            parent=parent,
            tags=info.tags,
        )
        outbound.orchestrator_messages.append(TaskMessage(child_instance, child_execution, started))
    elif decision.kind == EventType.EVENT_SENT:
        # ProcessSendEventDecision: the target gets an EventRaised with the same name and data.
        raised = event_raised(timestamp=now, name=decision.name or "", input=decision.input)
        target = decision.instance_id or ""
        outbound.orchestrator_messages.append(TaskMessage(target, None, raised, sender=info.instance_id))


def parent_notification(decision: Decision, info: ExecutionInfo, now: datetime) -> TaskMessage | None:
    """SubOrchestrationInstanceCompleted/Failed for the parent when a sub-orchestration ends."""
    parent = info.parent
    if parent is None or decision.kind != EventType.EXECUTION_COMPLETED:
        return None
    if decision.status == 1:
        event = sub_orchestration_completed(
            timestamp=now, task_scheduled_id=parent.task_scheduled_id, result=decision.result
        )
    elif decision.status in (3, 5):
        event = sub_orchestration_failed(
            timestamp=now,
            task_scheduled_id=parent.task_scheduled_id,
            reason=decision.result or "",
            details=decision.details,
        )
    else:
        return None
    return TaskMessage(parent.instance_id, parent.execution_id, event)
