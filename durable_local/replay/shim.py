"""The extension's out-of-proc orchestration shim, replayed over the emulated DTFx context.

``OutOfProcOrchestrationShim.ProcessAsyncActionsV2`` does ``foreach action: await InvokeAPIFromAction(action)``
(exceptions of awaited tasks are swallowed: the SDK handles them), so in SHIM mode a top-level action is
invoked only after every earlier one completed. IDEAL mode still awaits in order (that keeps sequence
ids in step with the SDK for retries and long timers) but never leaves an action unscheduled: when a
recorded decision refers to an id not yet produced, and at the end of the episode, it invokes the
remaining actions at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from durable_local.entities.ids import EntityId
from durable_local.instance_ids import sub_orchestration_id_error
from durable_local.model import FunctionRegistry, SchedulingMode
from durable_local.replay.actions import Action, ActionType, OrchestratorOutcome, RetryPolicy
from durable_local.replay.dtfx import DtfxContext, SimTask, completed_task, when_all, when_any
from durable_local.replay.entity_calls import EntityCalls

logger = logging.getLogger(__name__)


_QUOTED_SEP = "', '"


class ShimError(Exception):
    """``InvokeAPIFromAction`` threw: the orchestrator function fails with this message."""


class Shim:
    """Replays one ``OrchestratorOutcome`` against a ``DtfxContext``."""

    def __init__(
        self,
        context: DtfxContext,
        outcome: OrchestratorOutcome,
        *,
        registry: FunctionRegistry,
        mode: SchedulingMode,
        max_actions: int,
        instance_id: str = "",
        parent_instance_id: str | None = None,
        entity_reorder_window: timedelta = timedelta(minutes=30),
    ) -> None:
        self.context = context
        self.entity_calls = EntityCalls(context, instance_id, entity_reorder_window)
        self.instance_id = instance_id
        self.parent_instance_id = parent_instance_id
        self.outcome = outcome
        self.registry = registry
        self.mode = mode
        self.max_actions = max_actions
        self.action_count = 0
        self.schema = outcome.schema_version
        self.top_level: list[Action] = _flatten(outcome)
        self.next_index = 0
        self.waiting_on: SimTask | None = None
        self.finished = False
        """True once the shim got past every action (the orchestrator function's task completed)."""
        self.failure: str | None = None
        """Set when ``InvokeAPIFromAction`` threw (unsupported action, unknown function, too many actions)."""
        self.on_finished: Callable[[], None] | None = None
        if mode is SchedulingMode.IDEAL:
            context.on_missing_decision = self._schedule_up_to

    # --- driving -------------------------------------------------------------------------------------
    def start(self) -> None:
        """Called while DTFx processes ExecutionStarted (the extension calls the worker right there)."""
        self._advance()

    def flush(self) -> None:
        """IDEAL mode: invoke every action the SDK reported that is still unscheduled."""
        while self.next_index < len(self.top_level) and self.failure is None:
            self._invoke_next()
        self._maybe_finish()

    def _advance(self) -> None:
        self.waiting_on = None
        while self.next_index < len(self.top_level) and self.failure is None:
            task = self._invoke_next()
            if task is not None and not task.done:
                self.waiting_on = task
                task.then(self._resume_from(task))
                return
        self._maybe_finish()

    def _resume_from(self, task: SimTask) -> Callable[[], None]:
        def resume() -> None:
            if self.waiting_on is task:
                self._advance()

        return resume

    def _maybe_finish(self) -> None:
        if self.finished:
            return
        if self.failure is not None or self.next_index >= len(self.top_level):
            self.finished = True
            self.waiting_on = None

    def _schedule_up_to(self, task_id: int) -> None:
        while self.context.id_counter <= task_id and self.next_index < len(self.top_level) and self.failure is None:
            self._invoke_next()
        self._maybe_finish()

    def _invoke_next(self) -> SimTask | None:
        group_or_action = self.top_level[self.next_index]
        self.next_index += 1
        try:
            return self.invoke(group_or_action)
        except ShimError as exc:
            self.failure = str(exc)
            return None

    # --- InvokeAPIFromAction -------------------------------------------------------------------------
    def invoke(self, action: Action) -> SimTask:
        ctx = self.context
        kind = action.kind
        if kind == ActionType.CALL_ACTIVITY:
            self._check_function(action.function_name, activity=True)
            return ctx.schedule_task(action.function_name or "", action.input)
        if kind == ActionType.CALL_ACTIVITY_WITH_RETRY:
            self._check_function(action.function_name, activity=True)
            name = action.function_name or ""
            return ctx.with_retry(_policy(action), lambda: ctx.schedule_task(name, action.input))
        if kind == ActionType.CALL_SUB_ORCHESTRATOR:
            refused = self._check_sub_orchestration(action)
            if refused is not None:
                return refused
            return ctx.create_sub_orchestration(action.function_name or "", action.instance_id, action.input)
        if kind == ActionType.CALL_SUB_ORCHESTRATOR_WITH_RETRY:
            refused = self._check_sub_orchestration(action)
            if refused is not None:
                return refused
            name = action.function_name or ""
            return ctx.with_retry(
                _policy(action), lambda: ctx.create_sub_orchestration(name, action.instance_id, action.input)
            )
        if kind == ActionType.CREATE_TIMER:
            if action.fire_at is None:
                raise ShimError("CreateTimer action without fireAt")
            return ctx.create_timer(action.fire_at, canceled=action.is_canceled)
        if kind == ActionType.WAIT_FOR_EXTERNAL_EVENT:
            return ctx.wait_for_external_event(action.event_name or "")
        if kind == ActionType.CONTINUE_AS_NEW:
            ctx.set_continue_as_new(action.input)
            return completed_task()
        if kind == ActionType.WHEN_ALL:
            return when_all([self.invoke(child) for child in action.children])
        if kind == ActionType.WHEN_ANY:
            return when_any([self.invoke(child) for child in action.children])
        if kind in (ActionType.CALL_ENTITY, ActionType.SIGNAL_ENTITY):
            entity = self._check_entity(action.instance_id)
            signal = kind == ActionType.SIGNAL_ENTITY
            return self.entity_calls.send(entity, action.operation or "", action.input, signal=signal)
        if kind == ActionType.SCHEDULED_SIGNAL_ENTITY:
            raise ShimError("Scheduled entity signals (ScheduledSignalEntity) are not supported by durable_local.")
        if kind == ActionType.CALL_HTTP:
            raise ShimError("Durable HTTP (CallHttp) is not supported by durable_local; call HTTP from an activity.")
        raise ShimError(f"Received an unexpected action type from the out-of-proc function: '{kind}'.")

    def _check_sub_orchestration(self, action: Action) -> SimTask | None:
        """``CallDurableTaskFunctionAsync`` for an orchestrator: the function must exist, then the child id must
        differ from this instance's and its parent's and not start with ``@``, then the action is counted.

        The id checks throw inside that ``async`` method, so the exception faults the returned task instead of
        leaving ``InvokeAPIFromAction``, and ``ProcessAsyncActionsV2`` swallows faults of the tasks it awaits:
        on Azure nothing is scheduled, the orchestration does not fail, and the SDK's task never completes. The
        same happens here: a faulted task, no decision, and a warning (the extension logs nothing)."""
        self._check_function(action.function_name, activity=False, count=False)
        refused = sub_orchestration_id_error(
            action.instance_id, instance_id=self.instance_id, parent_instance_id=self.parent_instance_id
        )
        if refused is not None:
            logger.warning(
                "%s: sub-orchestration %s with instance id %r not scheduled (the extension drops it the same "
                "way: the call never completes): %s",
                self.instance_id,
                action.function_name,
                action.instance_id,
                refused,
            )
            task = SimTask()
            task.finish(failed=True)
            return task
        self._count_action()
        return None

    def _check_entity(self, instance_id: str | None) -> EntityId:
        """``ThrowIfFunctionDoesNotExist`` for the entity's name, then ``IncrementActionsOrThrowException``."""
        try:
            entity = EntityId.from_scheduler_id(instance_id or "")
        except ValueError as exc:
            raise ShimError(str(exc)) from exc
        if self.registry.entity(entity.name) is None:
            # The extension's message tests the orchestrator count before listing the entity functions.
            listing = (
                f"The following are the known entity functions: '{_QUOTED_SEP.join(self.registry.entities)}'."
                if self.registry.orchestrators
                else "No entity functions are currently registered!"
            )
            raise ShimError(
                f"The function '{entity.name}' doesn't exist, is disabled, or is not an entity function. "
                f"Additional info: {listing}"
            )
        self._count_action()
        return entity

    def _count_action(self) -> None:
        self.action_count += 1
        if self.action_count > self.max_actions:
            raise ShimError(
                f"Maximum amount of orchestration actions ({self.max_actions}) has been reached. "
                "This value can be configured in host.json file as MaxOrchestrationActions."
            )

    def _check_function(self, name: str | None, *, activity: bool, count: bool = True) -> None:
        if count:
            self._count_action()
        kind = "activity" if activity else "orchestrator"
        known = self.registry.activities if activity else self.registry.orchestrators
        found = self.registry.activity(name or "") if activity else self.registry.orchestrator(name or "")
        if found is None:
            listing = (
                f"The following are the known {kind} functions: '{_QUOTED_SEP.join(known)}'."
                if known
                else f"No {kind} functions are currently registered!"
            )
            raise ShimError(
                f"The function '{name}' doesn't exist, is disabled, or is not an {kind} function. "
                f"Additional info: {listing}"
            )


def _policy(action: Action) -> RetryPolicy:
    if action.retry is None:
        raise ShimError("Invalid JSON. Must contain field retryOptions")
    return action.retry


def _flatten(outcome: OrchestratorOutcome) -> list[Action]:
    """V2/V3: one list of top-level actions. V1 (Original): each yield's set becomes a WhenAny."""
    if outcome.schema_version >= 1:
        if len(outcome.actions) > 1:
            raise ValueError(
                "With OOProc schema ReplayPatchV1, expected actions array to be of length 1 in outer layer "
                f"but got size: {len(outcome.actions)}"
            )
        return list(outcome.actions[0]) if outcome.actions else []
    # ProcessAsyncActionsV1: invoke every action of a set, then await WhenAny of them.
    return [Action(kind=ActionType.WHEN_ANY, children=list(group)) for group in outcome.actions if group]
