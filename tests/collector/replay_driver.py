"""A tiny backend for replay-level tests of the collector orchestrator through ``durable_local.replay``.

It plays the queues and workers: runs episodes with ``run_episode`` (SHIM mode = the extension's sequential-await
shim), executes activity work items with the real activity bodies over fakes, and fires timers on a fake clock.
Activities finish in a seeded random order; timers that are due fire before any further activity finishes
(a due timer is delivered at once, while activities take time). With ``budget_capacity`` it also plays the tenant
budget entity: the orchestration's entity requests run on one ``shared.budget.machine.Budget`` in the order they were
sent, and the answers of calls come back as ``EventRaised`` messages before any further activity finishes (an entity
operation is short beside an activity's call to an audit API).
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from activities.graph_waits import Waiter, waiting_with
from durable_local.entities.messages import RequestMessage, ResponseMessage
from durable_local.history import event_raised, event_type, execution_started, task_completed, task_failed
from durable_local.model import (
    EventType,
    FunctionRegistry,
    RuntimeStatus,
    ScheduledMessage,
    SchedulingMode,
    TaskMessage,
)
from durable_local.replay.api import EpisodeInput, EpisodeResult
from durable_local.replay.episode import run_episode
from shared import names
from shared.budget.machine import Budget, Limits
from shared.budget.slot_deadline import activity_clock
from shared.budget.wire import BudgetRequest
from shared.requests import admission

NOW = datetime(2024, 11, 18, 12, 0, tzinfo=UTC)
Activity = Callable[[dict[str, Any]], dict[str, Any]]


@functools.cache  # the SDK refuses to index an app's functions twice
def orchestrator_handle() -> Callable[[str], str]:
    """The registered orchestrator handle of the real function app."""
    import function_app

    for function in function_app.app.get_functions():
        if function.get_trigger().type == "orchestrationTrigger":
            return function.get_user_function()  # type: ignore[no-any-return]
    raise AssertionError("no orchestrator registered")


def _json_activity(fn: Activity) -> Callable[[str | None], str | None]:
    def run(text: str | None) -> str | None:
        return json.dumps(fn(json.loads(text) if text else {}))

    return run


class ReplayDriver:
    def __init__(
        self,
        orchestrator: Callable[[str], str],
        activities: dict[str, Activity],
        *,
        seed: int = 0,
        mode: SchedulingMode = SchedulingMode.SHIM,
        budget_capacity: int = 0,
        budget_quota: int = 0,
        secret: str = "",
    ) -> None:
        admitting: dict[str, Activity] = {  # the real admission activities' bodies, under ``secret`` ("" = none)
            names.ACTIVITY_ADMIT: lambda request: admission.admit(secret, request),
            names.ACTIVITY_SEAL: lambda request: admission.seal_answer(secret, request),
        }
        self.registry = FunctionRegistry(
            orchestrators={"collect_orchestrator": orchestrator},
            activities={name: _json_activity(fn) for name, fn in {**admitting, **activities}.items()},
            entities={names.ENTITY_BUDGET: lambda _: None},  # the shim checks the name; the driver runs the budget
        )
        self.budget = Budget()
        self.budget_capacity = budget_capacity
        self.limits = Limits(budget_capacity, quota=budget_quota) if budget_quota else budget_capacity
        self.entity_operations: list[str] = []
        self.entity_requests: list[BudgetRequest] = []
        self.entity_targets: set[str] = set()
        """Instance ids of the entities the orchestration sent to (``@tenant_budget@<key>``)."""
        self.mode = mode
        self.rng = random.Random(seed)
        self.now = NOW
        self.history: list[dict[str, Any]] = []
        self.inbox: list[TaskMessage] = []
        self.work: list[TaskMessage] = []
        self.timers: list[ScheduledMessage] = []
        self.result: EpisodeResult | None = None
        self.episodes = 0
        self.executions = 1
        self.max_history = 0
        self.activities_in_flight: list[int] = []
        """Activities scheduled and not finished, sampled at each activity completion the backend delivers."""
        self.custom_statuses: list[dict[str, Any]] = []
        self.lose_result_every = 0
        """Every Nth activity run loses its result and runs again later (crash point C8)."""
        self.twice_every = 0
        """Every Nth activity run runs twice and both completions arrive (crash points C2/C9)."""
        self.activity_runs = 0
        self.reruns = 0
        self.waited = 0.0
        self._local = NOW
        self.finishing: list[tuple[datetime, TaskMessage]] = []
        """Completions of activities that waited, with the moment each one answers."""
        """Seconds activities spent waiting for their Graph queries (window version 2), on the driver's clock."""
        self.timer_delays: dict[int, timedelta] = {}
        """How far ahead each scheduled timer message was set (by ``id`` of its message), to tell its kind."""
        self.fired_delays: list[timedelta] = []
        """The delay of every timer delivered to its execution, in delivery order."""

    def start(self, payload: dict[str, Any]) -> None:
        event = execution_started(
            timestamp=self.now,
            name="collect_orchestrator",
            instance_id="c1",
            execution_id="e1",
            input=json.dumps(payload),
        )
        self.inbox.append(TaskMessage("c1", "e1", event))

    def _episode(self) -> None:
        messages, self.inbox = self.inbox, []
        self.result = run_episode(
            EpisodeInput(
                instance_id="c1",
                past_events=self.history,
                new_messages=messages,
                now=self.now,
                registry=self.registry,
                mode=self.mode,
            )
        )
        self.episodes += 1
        self.executions += int(self.result.continued_as_new)
        self.history = self.result.history
        self.max_history = max(self.max_history, len(self.history))
        self.work.extend(self.result.activity_messages)
        self.timers.extend(self.result.timer_messages)
        for timer in self.result.timer_messages:
            self.timer_delays[id(timer)] = (timer.visible_at or self.now) - self.now
        for message in self.result.orchestrator_messages:
            if message.instance_id.startswith(f"@{names.ENTITY_BUDGET}@"):
                self.entity_targets.add(message.instance_id)
                self._entity(RequestMessage.from_text(message.event["Input"]))
        if self.result.custom_status:
            self.custom_statuses.append(json.loads(self.result.custom_status))

    def _entity(self, request: RequestMessage) -> None:
        """Run one budget operation now (in send order); a call's answer waits among the work items."""
        data = json.loads(request.input) if request.input else None
        if isinstance(data, str):  # the extension encodes the SDK's JSON text once more
            data = json.loads(data)
        operation = str(request.operation)
        self.entity_operations.append(operation)
        self.entity_requests.append(BudgetRequest.parse(operation, data))
        answer = self.budget.handle(self.entity_requests[-1], self.now, self.limits)
        if not request.is_signal:
            text = ResponseMessage(json.dumps(answer)).to_text()
            event = event_raised(timestamp=self.now, name=request.id, input=text)
            self.inbox.append(TaskMessage(str(request.parent_instance_id), None, event))

    def _run_activity(self) -> None:
        message = self.work.pop(self.rng.randrange(len(self.work)))
        if message.execution_id is not None and self.result and message.execution_id != self.result.execution_id:
            pass  # a stale execution's work still runs (at-least-once); its completion is discarded by replay
        self.activities_in_flight.append(len(self.work) + 1)
        self.activity_runs += 1
        event = self._execute(message)
        if self.lose_result_every and self.activity_runs % self.lose_result_every == 0:
            # C8: the worker died after the work, before its response: the message comes back and runs again
            self.work.append(message)
            self.reruns += 1
            return
        if self._local > self.now:  # it waited: it answers when its own time is up, the others run meanwhile
            self.finishing.append((self._local, TaskMessage(message.instance_id, message.execution_id, event)))
            return
        self.inbox.append(TaskMessage(message.instance_id, message.execution_id, event))
        if self.twice_every and self.activity_runs % self.twice_every == 0:
            # C9 (or C2): the work item runs again and a second completion arrives; replay ignores it
            self.inbox.append(TaskMessage(message.instance_id, message.execution_id, self._execute(message)))
            self.reruns += 1

    def _execute(self, message: TaskMessage) -> dict[str, Any]:
        scheduled = message.event
        fn = self.registry.activity(scheduled["Name"])
        assert fn is not None
        # Activities check their slot's deadline on the driver's clock. A Graph check that waits for its query
        # (window version 2) moves a clock of its own from the driver's "now": it runs beside the other work and
        # its completion arrives when its time is up (``finishing``).
        self._local = self.now
        try:
            with activity_clock(lambda: self._local), waiting_with(Waiter(lambda: self._local, self._pass)):
                result = fn(scheduled["Input"])
            return task_completed(timestamp=self._local, task_scheduled_id=scheduled["EventId"], result=result)
        except Exception as exc:  # an activity bug surfaces as TaskFailed, as on Azure
            return task_failed(
                timestamp=self._local, task_scheduled_id=scheduled["EventId"], reason=str(exc), details=""
            )

    def activity_time(self) -> datetime:
        """The clock of the activity running now (the driver's, moved by a Graph check's wait): a fake service
        whose queries finish by time reads it."""
        return self._local

    def _pass(self, seconds: float) -> None:
        self._local += timedelta(seconds=seconds)
        self.waited += seconds

    def run(self, max_steps: int = 100_000) -> EpisodeResult:
        for _ in range(max_steps):
            if self.inbox:
                self._episode()
                continue
            due = [t for t in self.timers if t.visible_at is None or t.visible_at <= self.now]
            if due:
                for timer in due:
                    self.timers.remove(timer)
                    self.inbox.append(timer.message)
                    self.fired_delays.append(self.timer_delays[id(timer)])
                continue
            answered = [f for f in self.finishing if f[0] <= self.now]
            if answered:
                for item in answered:
                    self.finishing.remove(item)
                    self.inbox.append(item[1])
                continue
            if self.work:
                self._run_activity()
                self.now += timedelta(milliseconds=10)
                continue
            # Timers of an execution that ended (cancelled ones included) would only be discarded on delivery.
            current = self.result.execution_id if self.result else None
            self.timers = [t for t in self.timers if t.message.execution_id == current]
            if (self.timers or self.finishing) and not self.done:
                moments = [t.visible_at or self.now for t in self.timers] + [at for at, _ in self.finishing]
                self.now = min(moments)
                continue
            break
        assert self.result is not None
        return self.result

    @property
    def done(self) -> bool:
        return self.result is not None and self.result.status not in (RuntimeStatus.RUNNING, RuntimeStatus.PENDING)

    @staticmethod
    def completions(history: list[dict[str, Any]]) -> int:
        return sum(1 for e in history if event_type(e) == EventType.TASK_COMPLETED)
