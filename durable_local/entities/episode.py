"""``run_entity_episode``: one work item of an entity instance, with the same contract as ``run_episode``.

An entity is an orchestration instance named ``@name@key`` that DTFx starts by itself: when the first message
of a work item for an entity without history is an ``EventRaised`` for no particular execution, an
``ExecutionStarted`` (name = the instance id, no input, a new execution id) is put in front
(``DurableTask.Core/Common/Entities.cs`` ``AutoStart``, called from ``IsExecutableInstanceAsync``).

Every batch ends with continue-as-new carrying the scheduler state, so after each work item the instance's
history is just ``[OrchestratorStarted, ExecutionStarted(input = state), OrchestratorCompleted]`` of a new
execution, and the Instances row shows that state as input and the ``EntityStatus`` as custom status. The
checkpoint is the orchestration dispatcher's: responses and signals first, then the history, then the row,
then the consumed messages are deleted.

A terminate (which should never be sent to an entity) ends it for good, as in the extension: later messages
for the terminated instance are discarded.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import datetime

from durable_local.entities.batch import EntityBatchError
from durable_local.entities.dotnet import from_ticks
from durable_local.entities.ids import EntityId
from durable_local.entities.messages import EntityMessageError, OutgoingMessage
from durable_local.entities.scheduler import EntityScheduler
from durable_local.entities.state import SchedulerState
from durable_local.history import (
    event_raised,
    event_type,
    execution_started,
    format_timestamp,
    orchestrator_completed,
    orchestrator_started,
)
from durable_local.model import EventType, HistoryEvent, RuntimeStatus, ScheduledMessage, TaskMessage
from durable_local.replay.api import EpisodeInput, EpisodeResult
from durable_local.replay.reconcile import INVALID_ORCHESTRATION, execution_id_of, find_started, reconcile


def auto_start_applies(has_history_start: bool, messages: list[TaskMessage]) -> bool:
    """``Entities.AutoStart``: no ExecutionStarted anywhere, and the first message is an EventRaised for no
    particular execution."""
    if has_history_start or any(event_type(m.event) is EventType.EXECUTION_STARTED for m in messages):
        return False
    return bool(messages) and event_type(messages[0].event) is EventType.EVENT_RAISED and not messages[0].execution_id


def run_entity_episode(episode: EpisodeInput) -> EpisodeResult:
    """Run one entity work item; raises ``EntityBatchError`` when the batch must be aborted (retried later)."""
    new_execution_id: Callable[[], str] = episode.new_execution_id or (lambda: uuid.uuid4().hex)
    past = [dict(event) for event in episode.past_events]
    messages = list(episode.new_messages)
    if auto_start_applies(find_started(past) is not None, messages):
        started = execution_started(
            timestamp=episode.now,
            name=episode.instance_id,
            instance_id=episode.instance_id,
            execution_id=new_execution_id(),
            input=None,
        )
        messages.insert(0, TaskMessage(episode.instance_id, execution_id_of(started), started))
    reconciled = reconcile(past, messages)
    if reconciled.started is None or not reconciled.accepted:
        return _unchanged(episode, past, reconciled.discarded)
    start = reconciled.started
    current = [orchestrator_started(timestamp=episode.now), *reconciled.accepted]
    terminated = next((e for e in current if event_type(e) is EventType.EXECUTION_TERMINATED), None)
    if terminated is not None:
        return _terminated(episode, past, current, start, terminated=terminated, discarded=reconciled.discarded)

    entity = EntityId.from_scheduler_id(episode.instance_id)
    scheduler = EntityScheduler(
        entity,
        now=episode.now,
        max_batch_size=episode.settings.max_entity_operation_batch_size,
        reorder_window=episode.settings.entity_message_reorder_window,
    )
    try:
        scheduler.receive([*past, *current])
        outcome = scheduler.run(episode.registry.entity(entity.name), entity.name)
    except EntityMessageError as exc:
        raise EntityBatchError(f"entity {entity}: {exc}") from exc

    state_text = outcome.state.to_text()
    next_start = execution_started(
        timestamp=episode.now,
        name=str(start.get("Name") or episode.instance_id),
        instance_id=episode.instance_id,
        execution_id=new_execution_id(),
        input=state_text,
        generation=int(start.get("Generation") or 0) + 1,
        version=str(start.get("Version") or ""),
    )
    next_start["IsPlayed"] = True
    history = [orchestrator_started(timestamp=episode.now), next_start, orchestrator_completed(timestamp=episode.now)]
    orchestrator_messages, timer_messages = _route(outcome.outbox, episode.instance_id, episode.now)
    return EpisodeResult(
        execution_id=execution_id_of(next_start) or "",
        history=history,
        committed_count=0,
        status=RuntimeStatus.RUNNING,
        custom_status=outcome.state.status_text(),
        orchestrator_messages=orchestrator_messages,
        timer_messages=timer_messages,
        discarded=reconciled.discarded,
        generation=int(next_start["Generation"]),
        name=str(next_start["Name"]),
        input=state_text,
        continued_as_new=True,
        entity_operations=len(outcome.operations),
    )


def _route(
    outbox: list[OutgoingMessage], sender: str, now: datetime
) -> tuple[list[TaskMessage], list[ScheduledMessage]]:
    """Each outgoing message becomes an EventRaised for its target; delayed ones (to itself) wait in its queue."""
    immediate: list[TaskMessage] = []
    delayed: list[ScheduledMessage] = []
    for item in outbox:
        event = event_raised(timestamp=now, name=item.event_name, input=item.payload)
        message = TaskMessage(item.target_instance_id, item.target_execution_id, event, sender=sender)
        if item.due is not None:
            delayed.append(ScheduledMessage(message, visible_at=from_ticks(item.due)))
        else:
            immediate.append(message)
    return immediate, delayed


def _terminated(
    episode: EpisodeInput,
    past: list[HistoryEvent],
    current: list[HistoryEvent],
    start: HistoryEvent,
    *,
    terminated: HistoryEvent,
    discarded: list[tuple[TaskMessage, str]],
) -> EpisodeResult:
    reason = terminated.get("Input")
    completed: HistoryEvent = {
        "EventType": int(EventType.EXECUTION_COMPLETED),
        "EventId": 0,
        "IsPlayed": False,
        "Timestamp": format_timestamp(episode.now),
        "OrchestrationStatus": RuntimeStatus.TERMINATED.value,
        "Result": reason,
        "FailureDetails": None,
    }
    for event in current:
        if event_type(event) is not EventType.ORCHESTRATOR_STARTED:
            event["IsPlayed"] = True
    history = [*past, *current, completed, orchestrator_completed(timestamp=episode.now)]
    return EpisodeResult(
        execution_id=execution_id_of(start) or "",
        history=history,
        committed_count=len(past),
        status=RuntimeStatus.TERMINATED,
        output=None if reason is None else json.dumps(reason),
        discarded=discarded,
        generation=int(start.get("Generation") or 0),
        name=str(start.get("Name") or episode.instance_id),
        input=start.get("Input"),
    )


def _unchanged(
    episode: EpisodeInput, past: list[HistoryEvent], discarded: list[tuple[TaskMessage, str]]
) -> EpisodeResult:
    started = find_started(past)
    status = RuntimeStatus.RUNNING if started is not None else RuntimeStatus.PENDING
    for event in past:
        if event_type(event) is EventType.EXECUTION_COMPLETED:
            status = RuntimeStatus(int(event["OrchestrationStatus"]))
    custom_status = None
    if started is not None and status is RuntimeStatus.RUNNING:
        try:
            custom_status = SchedulerState.from_text(started.get("Input")).status_text()
        except EntityMessageError:
            custom_status = None
    return EpisodeResult(
        execution_id=execution_id_of(started) or "",
        history=past,
        committed_count=len(past),
        status=status,
        custom_status=custom_status,
        discarded=discarded or [(m, INVALID_ORCHESTRATION) for m in episode.new_messages],
        generation=int(started.get("Generation") or 0) if started else 0,
        name=str(started.get("Name") or episode.instance_id) if started else episode.instance_id,
        input=started.get("Input") if started else None,
    )
