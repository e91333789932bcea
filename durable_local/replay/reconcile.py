"""Reconcile a work item's messages with the instance's state, as DTFx does before running an episode.

``TaskOrchestrationDispatcher.EnsureExecutionStartedIsFirst`` and ``ReconcileMessagesWithState``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from durable_local.history import event_type
from durable_local.model import EventType, HistoryEvent, TaskMessage

DUPLICATE_START = "Duplicate start event"
INVALID_ORCHESTRATION = "Received work-item for an invalid orchestration"
ALREADY_COMPLETED = "Instance is in a terminal state"


@dataclass(slots=True)
class Reconciled:
    accepted: list[HistoryEvent] = field(default_factory=list)
    """Events to append, in order (copies; the caller's messages are left untouched)."""
    discarded: list[tuple[TaskMessage, str]] = field(default_factory=list)
    started: HistoryEvent | None = None
    """The ExecutionStarted event of the current execution (from history or from this batch)."""


def ensure_execution_started_first(messages: list[TaskMessage]) -> list[TaskMessage]:
    """Move the first top-level ExecutionStarted before the messages of its execution (a race can reorder them)."""
    ordered = list(messages)
    previous: str | None = ""
    target = 0
    found: int | None = None
    for index, message in enumerate(ordered):
        if message.execution_id != previous:
            if previous is not None:
                target = index
            previous = message.execution_id
        if event_type(message.event) == EventType.EXECUTION_STARTED:
            if not message.event.get("ParentInstance"):
                found = index
            break
    if found is not None and found != target:
        ordered.insert(target, ordered.pop(found))
    return ordered


def find_started(events: list[HistoryEvent]) -> HistoryEvent | None:
    for event in events:
        if event_type(event) == EventType.EXECUTION_STARTED:
            return event
    return None


def execution_id_of(started: HistoryEvent | None) -> str | None:
    if started is None:
        return None
    instance = started.get("OrchestrationInstance") or {}
    value = instance.get("ExecutionId")
    return str(value) if value else None


def reconcile(past_events: list[HistoryEvent], messages: list[TaskMessage]) -> Reconciled:
    """Split messages into events to append and discarded ones (with DTFx's reasons)."""
    result = Reconciled(started=find_started(past_events))
    ordered = ensure_execution_started_first(messages)
    if any(event_type(event) in _TERMINAL for event in past_events):
        result.discarded = [(message, ALREADY_COMPLETED) for message in ordered]
        return result
    for message in ordered:
        kind = event_type(message.event)
        if result.started is None and kind != EventType.EXECUTION_STARTED:
            # DTFx drops the whole work item: responses for deleted or never-started instances.
            result.accepted.clear()
            result.discarded = [(item, INVALID_ORCHESTRATION) for item in ordered]
            result.started = None
            return result
        if kind == EventType.EXECUTION_STARTED:
            if result.started is not None:
                result.discarded.append((message, DUPLICATE_START))
                continue
            result.started = dict(message.event)
            result.accepted.append(result.started)
            continue
        current = execution_id_of(result.started)
        if message.execution_id and message.execution_id.strip() and message.execution_id != current:
            reason = f"ExecutionId of event ({message.execution_id}) does not match current executionId"
            result.discarded.append((message, reason))
            continue
        result.accepted.append(dict(message.event))
    return result


_TERMINAL = (EventType.EXECUTION_COMPLETED, EventType.EXECUTION_FAILED)
