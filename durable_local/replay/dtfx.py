"""A small emulation of DTFx's in-proc orchestration context (``TaskOrchestrationContext``).

DTFx replays history by processing events one by one; completions finish .NET tasks whose
continuations run synchronously (a single-threaded scheduler). Here a ``SimTask`` is such a task with
callbacks, and ``DtfxContext`` holds DTFx's bookkeeping: the sequence counter (``idCounter``), the
pending decisions keyed by id (``orchestratorActionsMap``), the open tasks (``openTasks``, which gate
completion), suspension, and the non-determinism checks made when decision events are replayed.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from durable_local.history import event_type, parse_timestamp
from durable_local.model import EventType, HistoryEvent
from durable_local.replay.actions import RetryPolicy

logger = logging.getLogger(__name__)

NON_DETERMINISTIC = "Non-Deterministic workflow detected: "
_CHANGED = " Was a change made to the orchestrator code after this instance had already started running?"


class NonDeterminismError(Exception):
    """DTFx's ``NonDeterministicOrchestrationException``: replay disagrees with the recorded decisions."""

    def __init__(self, event_id: int, details: str) -> None:
        super().__init__(NON_DETERMINISTIC + details)
        self.event_id = event_id


class SimTask:
    """A .NET ``Task`` stand-in: completes once, runs its continuations synchronously."""

    __slots__ = ("_callbacks", "done", "failed")

    def __init__(self) -> None:
        self.done = False
        self.failed = False
        self._callbacks: list[Callable[[], None]] = []

    def finish(self, *, failed: bool = False) -> None:
        if self.done:
            return
        self.done = True
        self.failed = failed
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def then(self, callback: Callable[[], None]) -> None:
        if self.done:
            callback()
        else:
            self._callbacks.append(callback)


def completed_task() -> SimTask:
    task = SimTask()
    task.finish()
    return task


def when_all(children: list[SimTask]) -> SimTask:
    """``Task.WhenAll``: done when every child is done (faulted if any child faulted)."""
    result = SimTask()
    remaining = [len(children)]

    def child_done() -> None:
        remaining[0] -= 1
        if remaining[0] == 0:
            result.finish(failed=any(child.failed for child in children))

    if not children:
        result.finish()
    for child in children:
        child.then(child_done)
    return result


def when_any(children: list[SimTask]) -> SimTask:
    """``Task.WhenAny``: done when any child is done (never faults)."""
    result = SimTask()
    if not children:
        return result  # .NET throws for an empty list; the SDK never emits one
    for child in children:
        child.then(result.finish)
    return result


@dataclass(slots=True)
class Decision:
    """One ``OrchestratorAction`` waiting to be matched against history or turned into new events."""

    id: int
    kind: EventType
    """TASK_SCHEDULED, TIMER_CREATED, SUB_ORCHESTRATION_INSTANCE_CREATED or EXECUTION_COMPLETED."""
    name: str | None = None
    input: str | None = None
    fire_at: datetime | None = None
    instance_id: str | None = None
    status: int = 0
    result: str | None = None
    details: str | None = None


@dataclass(slots=True)
class DtfxContext:
    """DTFx ``TaskOrchestrationContext`` state for one execution of one episode."""

    execution_id: str
    now: datetime
    id_counter: int = 0
    actions: dict[int, Decision] = field(default_factory=dict)
    open_tasks: dict[int, SimTask] = field(default_factory=dict)
    continue_as_new_input: str | None = None
    continue_as_new: bool = False
    completed_or_terminated: bool = False
    suspended: bool = False
    suspended_actions: dict[int, Decision] = field(default_factory=dict)
    events_while_suspended: deque[HistoryEvent] = field(default_factory=deque)
    carryover: list[HistoryEvent] = field(default_factory=list)
    waiters: dict[str, deque[SimTask]] = field(default_factory=dict)
    buffered_events: dict[str, int] = field(default_factory=dict)
    on_missing_decision: Callable[[int], None] | None = None
    """Called before a decision event's id is looked up (IDEAL mode schedules lazily)."""

    # --- scheduling APIs (each consumes a sequence number, like DTFx) -------------------------------
    def schedule_task(self, name: str, input: str | None) -> SimTask:
        task_id = self._next_id()
        self.actions[task_id] = Decision(task_id, EventType.TASK_SCHEDULED, name=name, input=input)
        return self._open(task_id)

    def create_timer(self, fire_at: datetime, *, canceled: bool = False) -> SimTask:
        task_id = self._next_id()
        self.actions[task_id] = Decision(task_id, EventType.TIMER_CREATED, fire_at=fire_at)
        task = self._open(task_id)
        if canceled:
            # CancellationTokenSource.Cancel: the timer is still created but no longer an open task.
            del self.open_tasks[task_id]
            task.finish(failed=True)
        return task

    def create_sub_orchestration(self, name: str, instance_id: str | None, input: str | None) -> SimTask:
        task_id = self._next_id()
        actual = instance_id if instance_id and instance_id.strip() else f"{self.execution_id}:{task_id}"
        self.actions[task_id] = Decision(
            task_id, EventType.SUB_ORCHESTRATION_INSTANCE_CREATED, name=name, input=input, instance_id=actual
        )
        return self._open(task_id)

    def wait_for_external_event(self, name: str) -> SimTask:
        key = name.lower()
        task = SimTask()
        if self.buffered_events.get(key, 0) > 0:
            self.buffered_events[key] -= 1
            task.finish()
        else:
            self.waiters.setdefault(key, deque()).append(task)
        return task

    def send_event(self, instance_id: str, name: str, data: str | None) -> None:
        """``SendEvent``: a fire-and-forget decision (EventSent) that consumes a sequence number."""
        task_id = self._next_id()
        self.actions[task_id] = Decision(task_id, EventType.EVENT_SENT, name=name, input=data, instance_id=instance_id)

    def set_continue_as_new(self, input: str | None) -> None:
        self.continue_as_new = True
        self.continue_as_new_input = input

    def with_retry(self, policy: RetryPolicy, attempt: Callable[[], SimTask]) -> SimTask:
        """DTFx ``RetryInterceptor``: attempt, back-off timer, ..., and the final "dummy" timer."""
        result = SimTask()
        first_attempt = self.now
        state = {"count": 0}

        def run_attempt() -> None:
            task = attempt()
            task.then(lambda: after_attempt(task))

        def after_attempt(task: SimTask) -> None:
            if not task.failed:
                result.finish()
                return
            retry_count = state["count"]
            state["count"] += 1
            if retry_count + 1 >= policy.max_number_of_attempts:
                # "Dummy timer for back-compat": fires at once, then the last failure surfaces.
                self.create_timer(self.now).then(lambda: result.finish(failed=True))
                return
            delay = self._retry_delay(policy, retry_count, first_attempt)
            if delay <= timedelta(0):
                result.finish(failed=True)
                return
            self.create_timer(self.now + delay).then(run_attempt)

        run_attempt()
        return result

    def _retry_delay(self, policy: RetryPolicy, retry_count: int, first_attempt: datetime) -> timedelta:
        if policy.retry_timeout_ms is not None and self.now >= first_attempt + timedelta(
            milliseconds=policy.retry_timeout_ms
        ):
            return timedelta(0)
        delay_ms = policy.first_retry_interval_ms * policy.backoff_coefficient**retry_count
        if policy.max_retry_interval_ms is not None and delay_ms >= policy.max_retry_interval_ms:
            delay_ms = policy.max_retry_interval_ms
        return timedelta(milliseconds=delay_ms)

    def complete(self, status: int, result: str | None, details: str | None = None) -> None:
        """DTFx ``CompleteOrchestration``: adds the completion decision (continue-as-new wins over Completed)."""
        task_id = self._next_id()
        if status == 1 and self.continue_as_new:
            self.actions[task_id] = Decision(
                task_id, EventType.CONTINUE_AS_NEW, result=self.continue_as_new_input, status=2
            )
            return
        if self.completed_or_terminated:
            return
        self.completed_or_terminated = True
        self.actions[task_id] = Decision(
            task_id, EventType.EXECUTION_COMPLETED, status=status, result=result, details=details
        )

    # --- replaying history ----------------------------------------------------------------------------
    def process(self, event: HistoryEvent, start: Callable[[], None]) -> None:
        """DTFx ``TaskOrchestrationExecutor.ProcessEvent``; ``start`` runs the orchestrator (ExecutionStarted)."""
        kind = event_type(event)
        if kind == EventType.ORCHESTRATOR_STARTED:
            self.now = parse_timestamp(event["Timestamp"])
            return
        if self.suspended and kind not in (EventType.EXECUTION_RESUMED, EventType.EXECUTION_TERMINATED):
            if kind != EventType.EXECUTION_SUSPENDED:
                self.events_while_suspended.append(event)
            return
        if kind == EventType.EXECUTION_STARTED:
            start()
        elif kind == EventType.EXECUTION_TERMINATED:
            self.complete(5, event.get("Input"))
        elif kind in _DECISION_KINDS:
            self._match_decision(event, kind)
        elif kind in (EventType.TASK_COMPLETED, EventType.SUB_ORCHESTRATION_INSTANCE_COMPLETED):
            self._resolve(int(event["TaskScheduledId"]), failed=False)
        elif kind in (EventType.TASK_FAILED, EventType.SUB_ORCHESTRATION_INSTANCE_FAILED):
            self._resolve(int(event["TaskScheduledId"]), failed=True)
        elif kind == EventType.TIMER_FIRED:
            self._resolve(int(event["TimerId"]), failed=False)
        elif kind == EventType.EVENT_RAISED:
            self._raise_event(event)
        elif kind == EventType.EXECUTION_SUSPENDED:
            self.suspended = True
            self.suspended_actions.update(self.actions)
            self.actions.clear()
        elif kind == EventType.EXECUTION_RESUMED:
            self.suspended = False
            self.actions.update(self.suspended_actions)
            self.suspended_actions.clear()
            while self.events_while_suspended:
                self.process(self.events_while_suspended.popleft(), start)

    def _raise_event(self, event: HistoryEvent) -> None:
        if self.continue_as_new:
            # BehaviorOnContinueAsNew.Carryover: unprocessed events go to the next generation.
            self.carryover.append(event)
            return
        key = str(event.get("Name") or "").lower()
        waiting = self.waiters.get(key)
        if waiting:
            waiting.popleft().finish()
        else:
            self.buffered_events[key] = self.buffered_events.get(key, 0) + 1

    def _resolve(self, task_id: int, *, failed: bool) -> None:
        task = self.open_tasks.pop(task_id, None)
        if task is None:
            logger.debug("duplicate completion for task %s ignored", task_id)
            return
        task.finish(failed=failed)

    def _match_decision(self, event: HistoryEvent, kind: EventType) -> None:
        task_id = int(event["EventId"])
        if task_id not in self.actions and self.on_missing_decision is not None:
            self.on_missing_decision(task_id)
        recorded = str(event.get("Name") or "")
        decision = self.actions.get(task_id)
        label = _LABELS[kind]
        if decision is None:
            named = f" and name '{recorded}'" if kind != EventType.TIMER_CREATED else ""
            raise NonDeterminismError(
                task_id,
                f"A previous execution of this orchestration scheduled {label} with sequence ID {task_id}{named}, "
                "but the current replay execution hasn't (yet?) scheduled this task." + _CHANGED,
            )
        if decision.kind != kind:
            produced = _LABELS.get(decision.kind, decision.kind.name)
            raise NonDeterminismError(
                task_id,
                f"A previous execution of this orchestration scheduled {label} with sequence number {task_id} "
                f"named '{recorded}', but the current orchestration replay instead produced {produced} "
                f"named '{decision.name or ''}' with this sequence number." + _CHANGED,
            )
        if kind != EventType.TIMER_CREATED and recorded.lower() != (decision.name or "").lower():
            raise NonDeterminismError(
                task_id,
                f"A previous execution of this orchestration scheduled {label} with sequence number {task_id} "
                f"named '{recorded}', but the current orchestration replay instead scheduled {label} "
                f"named '{decision.name}' with this sequence number." + _CHANGED,
            )
        del self.actions[task_id]

    def _next_id(self) -> int:
        task_id = self.id_counter
        self.id_counter += 1
        return task_id

    def _open(self, task_id: int) -> SimTask:
        task = SimTask()
        self.open_tasks[task_id] = task
        return task


_DECISION_KINDS = (
    EventType.TASK_SCHEDULED,
    EventType.TIMER_CREATED,
    EventType.SUB_ORCHESTRATION_INSTANCE_CREATED,
    EventType.EVENT_SENT,
)

_LABELS: dict[EventType, str] = {
    EventType.TASK_SCHEDULED: "an activity task",
    EventType.TIMER_CREATED: "a timer task",
    EventType.SUB_ORCHESTRATION_INSTANCE_CREATED: "a sub-orchestration task",
    EventType.EVENT_SENT: "a send event task",
    EventType.EXECUTION_COMPLETED: "an orchestration completion",
    EventType.CONTINUE_AS_NEW: "a continue-as-new",
}
