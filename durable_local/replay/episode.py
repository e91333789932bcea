"""``run_episode``: one orchestration work item, pure (DTFx ``TaskOrchestrationDispatcher.OnProcessWorkItemAsync``).

Layout of an episode, exactly as DTFx writes it::

    [OrchestratorStarted] + [new message events, ExecutionStarted first]
        + [decision events, or ExecutionCompleted] + [OrchestratorCompleted]

The worker is called once per execution (while DTFx replays ExecutionStarted); the shim emulation
(``shim.py``) then replays its actions against the emulated DTFx context (``dtfx.py``) event by event.
Continue-as-new starts the next execution inside the same episode, like the dispatcher's
``do { ... } while (continuedAsNew)`` loop.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from durable_local.history import ParentInstance, event_type, execution_started, orchestrator_completed
from durable_local.history import orchestrator_started as orchestrator_started_event
from durable_local.model import EventType, FailureDetails, HistoryEvent, RuntimeStatus, SchedulingMode, TaskMessage
from durable_local.replay.actions import OrchestratorOutcome, invoke_orchestrator
from durable_local.replay.api import EpisodeInput, EpisodeResult
from durable_local.replay.context_json import context_json_from_past
from durable_local.replay.decisions import (
    ExecutionInfo,
    Outbound,
    decision_event,
    decision_message,
    parent_notification,
    recorded_event,
    sub_orchestration_input,
)
from durable_local.replay.dtfx import Decision, DtfxContext, NonDeterminismError
from durable_local.replay.execution_cache import ExecutionCache, past_texts
from durable_local.replay.payload_limits import custom_status_error
from durable_local.replay.reconcile import execution_id_of, reconcile
from durable_local.replay.shim import Shim

logger = logging.getLogger(__name__)

_MAX_GENERATIONS_PER_EPISODE = 1000
_NON_DETERMINISM_TYPE = "DurableTask.Core.Exceptions.NonDeterministicOrchestrationException"
_FAILURE_TYPE = "OrchestrationFailureException"


@dataclass(slots=True)
class _ExecutionRun:
    """The result of running one execution's episode."""

    history: list[HistoryEvent]
    status: RuntimeStatus
    custom_status: str | None
    completion: Decision | None = None
    carryover: list[HistoryEvent] = field(default_factory=list)
    cache: ExecutionCache | None = None


def run_episode(episode: EpisodeInput) -> EpisodeResult:
    new_execution_id: Callable[[], str] = episode.new_execution_id or (lambda: uuid.uuid4().hex)
    past = [dict(event) for event in episode.past_events]
    reconciled = reconcile(past, episode.new_messages)
    started = reconciled.started
    if started is None or (not reconciled.accepted and _is_terminal(past)):
        return _unchanged(episode, past, started, reconciled.discarded)
    started.setdefault("Version", "")

    outbound = Outbound()
    current = [orchestrator_started_event(timestamp=episode.now), *reconciled.accepted]
    info = _info(episode.instance_id, started)
    cache = episode.cache if episode.cache and episode.cache.applies_to(info.instance_id, info.execution_id) else None
    run = _run_execution(
        episode,
        info=info,
        past=past,
        current=current,
        outbound=outbound,
        new_execution_id=new_execution_id,
        cache=cache,
    )
    reused = (run.cache.reused_events, run.cache.reused_actions) if run.cache is not None else (0, 0)
    committed = len(past)
    continued = False
    custom_status = run.custom_status
    generations = 0
    while run.completion is not None and run.completion.kind == EventType.CONTINUE_AS_NEW:
        generations += 1
        if generations > _MAX_GENERATIONS_PER_EPISODE:
            raise RuntimeError(f"{episode.instance_id} continued as new {generations} times in one episode")
        next_started = execution_started(
            timestamp=episode.now,
            name=info.name,
            instance_id=info.instance_id,
            execution_id=new_execution_id(),
            input=sub_orchestration_input(run.completion.result),  # DTFx serialises the shim's input again
            parent=info.parent,
            generation=info.generation + 1,
            version=info.version,
            tags=info.tags,
        )
        info = _info(episode.instance_id, next_started)
        current = [
            orchestrator_started_event(timestamp=episode.now),
            next_started,
            *run.carryover,
            orchestrator_completed(timestamp=episode.now),
        ]
        run = _run_execution(
            episode, info=info, past=[], current=current, outbound=outbound, new_execution_id=new_execution_id
        )
        # DTFx carries the custom status over when the new generation does not set one.
        custom_status = run.custom_status if run.custom_status is not None else custom_status
        committed = 0
        continued = True

    output, failure = _output(run.completion)
    if run.completion is not None:
        notification = parent_notification(run.completion, info, episode.now)
        if notification is not None:
            outbound.orchestrator_messages.append(notification)
    return EpisodeResult(
        execution_id=info.execution_id,
        history=run.history,
        committed_count=committed,
        status=run.status,
        output=output,
        custom_status=custom_status,
        failure=failure,
        activity_messages=outbound.activity_messages,
        timer_messages=outbound.timer_messages,
        orchestrator_messages=outbound.orchestrator_messages,
        discarded=reconciled.discarded,
        generation=info.generation,
        parent_instance_id=info.parent.instance_id if info.parent else None,
        name=info.name,
        input=info.input,
        continued_as_new=continued,
        cache=run.cache if run.status in (RuntimeStatus.RUNNING, RuntimeStatus.SUSPENDED) else None,
        reused_events=reused[0],
        reused_actions=reused[1],
    )


def _run_execution(
    episode: EpisodeInput,
    *,
    info: ExecutionInfo,
    past: list[HistoryEvent],
    current: list[HistoryEvent],
    outbound: Outbound,
    new_execution_id: Callable[[], str],
    cache: ExecutionCache | None = None,
) -> _ExecutionRun:
    outcome, next_cache = _call_worker(episode, info, past, current, cache)
    context = DtfxContext(execution_id=info.execution_id, now=episode.now)
    shim = Shim(
        context,
        outcome,
        registry=episode.registry,
        mode=episode.mode,
        max_actions=episode.settings.max_orchestration_actions,
        instance_id=info.instance_id,
        parent_instance_id=info.parent.instance_id if info.parent else None,
        entity_reorder_window=episode.settings.entity_message_reorder_window,
    )
    non_determinism: NonDeterminismError | None = None
    try:
        for event in [*past, *current]:
            context.process(event, shim.start)
    except NonDeterminismError as exc:
        non_determinism = exc

    if non_determinism is not None:
        # Only the failure is kept: re-emitting the half-replayed schedule decisions would re-run work.
        context.actions.clear()
        reason = str(non_determinism)
        details = f"Unhandled exception while executing orchestration: {_NON_DETERMINISM_TYPE}: {reason}"
        context.complete(3, reason, details)
    elif not context.completed_or_terminated and not context.suspended:
        if episode.mode is SchedulingMode.IDEAL:
            shim.flush()
        _complete_if_done(context, shim, outcome, info, episode.mode)

    decisions = sorted(context.actions.values(), key=lambda item: item.id)
    history = list(past)
    for event in current:
        if event_type(event) not in (EventType.ORCHESTRATOR_STARTED, EventType.ORCHESTRATOR_COMPLETED):
            event["IsPlayed"] = True  # DTFx marks each processed event as played
        history.append(event)
    completion: Decision | None = None
    for decision in decisions:
        event = decision_event(decision, episode.now)
        history.append(recorded_event(event, episode.settings.include_parameters))
        if decision.kind in (EventType.EXECUTION_COMPLETED, EventType.CONTINUE_AS_NEW):
            completion = decision
        else:
            decision_message(
                decision, event=event, info=info, now=episode.now, new_execution_id=new_execution_id, outbound=outbound
            )
    if (completion is None or completion.kind != EventType.CONTINUE_AS_NEW) and event_type(
        history[-1]
    ) != EventType.ORCHESTRATOR_COMPLETED:
        history.append(orchestrator_completed(timestamp=episode.now))
    return _ExecutionRun(
        history=history,
        status=_status(completion, context),
        custom_status=outcome.custom_status,
        completion=completion,
        carryover=context.carryover,
        cache=next_cache,
    )


def _call_worker(
    episode: EpisodeInput,
    info: ExecutionInfo,
    past: list[HistoryEvent],
    current: list[HistoryEvent],
    cache: ExecutionCache | None,
) -> tuple[OrchestratorOutcome, ExecutionCache | None]:
    """The worker's answer, and what this episode leaves for the execution's next one."""
    handle = episode.registry.orchestrator(info.name)
    if handle is None:
        known = "', '".join(episode.registry.orchestrators)
        listing = (
            f"The following are the known orchestrator functions: '{known}'."
            if known
            else "No orchestrator functions are currently registered!"
        )
        message = f"The function '{info.name}' doesn't exist, is disabled, or is not an orchestrator function. "
        return OrchestratorOutcome(is_done=False, actions=[], crash=message + "Additional info: " + listing), None
    texts, reused, chars = past_texts(past, cache)
    context_json = context_json_from_past(
        instance_id=info.instance_id,
        past_json=texts,
        current_events=current,
        input=info.input,
        parent_instance_id=info.parent.instance_id if info.parent else None,
        settings=episode.settings,
    )
    try:
        outcome = invoke_orchestrator(handle, context_json, cache.actions if cache is not None else None)
    except (ValueError, KeyError, TypeError) as exc:  # an unreadable answer fails the orchestration, as in the host
        outcome = OrchestratorOutcome(is_done=False, actions=[], crash=f"invalid orchestrator output: {exc}")
    next_cache = ExecutionCache(info.instance_id, info.execution_id, past, texts, outcome.parsed, chars, reused)
    too_big = custom_status_error(outcome.custom_status)
    if too_big is not None:
        # SetCustomStatus throws before the shim replays any action: the orchestration fails with no new decision.
        outcome = OrchestratorOutcome(is_done=False, actions=[], schema_version=outcome.schema_version, crash=too_big)
    return outcome, next_cache


def _complete_if_done(
    context: DtfxContext, shim: Shim, outcome: OrchestratorOutcome, info: ExecutionInfo, mode: SchedulingMode
) -> None:
    """The orchestrator function's task is done once the shim got past every action and the worker said
    isDone (or failed). SHIM mode also applies DTFx's gating: no completion while tasks are open."""
    failure = shim.failure or outcome.crash
    function_done = shim.finished and (failure is not None or outcome.error is not None or outcome.is_done)
    if not function_done:
        return
    if mode is SchedulingMode.SHIM and context.open_tasks:
        return
    if failure is not None:
        reason = f"Orchestrator function '{info.name}' failed: {failure}"
        context.complete(3, reason, reason)
    elif outcome.error is not None:
        reason = f"Orchestrator function '{info.name}' failed: {outcome.error}"
        context.complete(3, reason, f"Message: {outcome.error}, StackTrace: ")
    else:
        context.complete(1, outcome.output)


def _status(completion: Decision | None, context: DtfxContext) -> RuntimeStatus:
    if completion is not None:
        return RuntimeStatus(completion.status)
    return RuntimeStatus.SUSPENDED if context.suspended else RuntimeStatus.RUNNING


def _output(completion: Decision | None) -> tuple[str | None, FailureDetails | None]:
    """Output as JSON text; failure and termination reasons become JSON strings (the HTTP API shows them so)."""
    if completion is None or completion.kind != EventType.EXECUTION_COMPLETED:
        return None, None
    if completion.status == RuntimeStatus.COMPLETED.value:
        return completion.result, None
    text = None if completion.result is None else json.dumps(completion.result)
    if completion.status == RuntimeStatus.FAILED.value:
        error_type = _NON_DETERMINISM_TYPE if "Non-Deterministic" in (completion.result or "") else _FAILURE_TYPE
        details = FailureDetails(error_type=error_type, message=completion.result or "", stack_trace=completion.details)
        return text, details
    return text, None


def _info(instance_id: str, started: HistoryEvent) -> ExecutionInfo:
    tags = started.get("Tags")
    return ExecutionInfo(
        instance_id=instance_id,
        execution_id=execution_id_of(started) or "",
        name=str(started.get("Name") or ""),
        version=str(started.get("Version") or ""),
        input=started.get("Input"),
        generation=int(started.get("Generation") or 0),
        parent=ParentInstance.from_json(started.get("ParentInstance")),
        tags=dict(tags) if isinstance(tags, dict) else None,
    )


def _is_terminal(events: list[HistoryEvent]) -> bool:
    return any(event_type(event) == EventType.EXECUTION_COMPLETED for event in events)


def _unchanged(
    episode: EpisodeInput,
    past: list[HistoryEvent],
    started: HistoryEvent | None,
    discarded: list[tuple[TaskMessage, str]],
) -> EpisodeResult:
    """Nothing to run: every message was discarded (never-started or already finished instance)."""
    status = RuntimeStatus.PENDING
    output: str | None = None
    for event in past:
        if event_type(event) == EventType.EXECUTION_COMPLETED:
            status = RuntimeStatus(int(event["OrchestrationStatus"]))
            result = event.get("Result")
            output = result if status is RuntimeStatus.COMPLETED or result is None else json.dumps(result)
    info = _info(episode.instance_id, started) if started is not None else None
    return EpisodeResult(
        execution_id=info.execution_id if info else "",
        history=past,
        committed_count=len(past),
        status=status,
        output=output,
        discarded=list(discarded),
        generation=info.generation if info else 0,
        parent_instance_id=info.parent.instance_id if info and info.parent else None,
        name=info.name if info else "",
        input=info.input if info else None,
    )
