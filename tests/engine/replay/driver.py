"""A small pure backend for replay tests: it plays the queues, the activity workers and the timer clock.

Every step is explicit so tests decide the order things happen in: which activity finishes next,
when the fake clock moves, when a batch of control messages becomes an episode. Nothing sleeps.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from durable_local.history import (
    event_raised,
    event_type,
    execution_resumed,
    execution_started,
    execution_suspended,
    execution_terminated,
    task_completed,
    task_failed,
)
from durable_local.model import (
    EventType,
    FunctionRegistry,
    RuntimeStatus,
    ScheduledMessage,
    SchedulingMode,
    TaskMessage,
)
from durable_local.replay.api import EpisodeInput, EpisodeResult, ReplaySettings
from durable_local.replay.episode import run_episode

T0 = datetime(2024, 1, 1, tzinfo=UTC)


@dataclass
class Instance:
    instance_id: str
    history: list[dict[str, Any]] = field(default_factory=list)
    execution_id: str | None = None
    result: EpisodeResult | None = None
    inbox: list[TaskMessage] = field(default_factory=list)

    @property
    def status(self) -> RuntimeStatus:
        return self.result.status if self.result else RuntimeStatus.PENDING


class Driver:
    """Drives instances episode by episode over a fake clock."""

    def __init__(
        self,
        orchestrators: dict[str, Callable[[str], str]],
        activities: dict[str, Callable[[str | None], str | None]] | None = None,
        *,
        mode: SchedulingMode = SchedulingMode.SHIM,
        settings: ReplaySettings | None = None,
    ) -> None:
        self.registry = FunctionRegistry(orchestrators=orchestrators, activities=activities or {})
        self.mode = mode
        self.settings = settings or ReplaySettings()
        self.now = T0
        self.instances: dict[str, Instance] = {}
        self.work_items: list[TaskMessage] = []
        self.timers: list[ScheduledMessage] = []
        self.results: list[EpisodeResult] = []
        self.discarded: list[tuple[TaskMessage, str]] = []
        self.in_flight_at_delivery: list[int] = []
        """Activities scheduled but not completed, sampled whenever a completion is delivered."""
        self.scheduled_total = 0
        self.completed_total = 0
        self._exec_counter = 0

    # --- client operations -------------------------------------------------------------------------------
    def start(self, name: str, instance_id: str, input: Any = None) -> None:
        execution_id = self._new_execution_id()
        event = execution_started(
            timestamp=self.now,
            name=name,
            instance_id=instance_id,
            execution_id=execution_id,
            # What the Python SDK client's start_new stores through the extension: the JSON text as a JSON string.
            input=None if input is None else json.dumps(json.dumps(input)),
        )
        self._instance(instance_id).inbox.append(TaskMessage(instance_id, execution_id, event))

    def raise_event(self, instance_id: str, name: str, data: Any) -> None:
        event = event_raised(timestamp=self.now, name=name, input=json.dumps(data))
        self._instance(instance_id).inbox.append(TaskMessage(instance_id, None, event))

    def terminate(self, instance_id: str, reason: str) -> None:
        event = execution_terminated(timestamp=self.now, reason=reason)
        self._instance(instance_id).inbox.append(TaskMessage(instance_id, None, event))

    def suspend(self, instance_id: str, reason: str = "pause") -> None:
        event = execution_suspended(timestamp=self.now, reason=reason)
        self._instance(instance_id).inbox.append(TaskMessage(instance_id, None, event))

    def resume(self, instance_id: str, reason: str = "go") -> None:
        event = execution_resumed(timestamp=self.now, reason=reason)
        self._instance(instance_id).inbox.append(TaskMessage(instance_id, None, event))

    # --- the backend -----------------------------------------------------------------------------------
    def episode(self, instance_id: str) -> EpisodeResult:
        """Run one episode with every message waiting for the instance."""
        instance = self._instance(instance_id)
        messages, instance.inbox = instance.inbox, []
        completion_kinds = (EventType.TASK_COMPLETED, EventType.TASK_FAILED)
        completions = sum(1 for m in messages if event_type(m.event) in completion_kinds)
        if completions:
            self.in_flight_at_delivery.append(self.scheduled_total - self.completed_total)
            self.completed_total += completions
        result = run_episode(
            EpisodeInput(
                instance_id=instance_id,
                past_events=[dict(e) for e in instance.history],
                new_messages=messages,
                now=self.now,
                registry=self.registry,
                mode=self.mode,
                settings=self.settings,
                new_execution_id=self._new_execution_id,
            )
        )
        assert result.history[: result.committed_count] == instance.history[: result.committed_count]
        instance.history = result.history
        instance.execution_id = result.execution_id
        instance.result = result
        self.results.append(result)
        self.discarded.extend(result.discarded)
        self.work_items.extend(result.activity_messages)
        self.scheduled_total += len(result.activity_messages)
        self.timers.extend(result.timer_messages)
        for message in result.orchestrator_messages:
            self._instance(message.instance_id).inbox.append(message)
        return result

    def run_activity(self, message: TaskMessage) -> None:
        """Execute one activity work item and send its completion back."""
        self.work_items.remove(message)
        scheduled = message.event
        fn = self.registry.activity(scheduled["Name"])
        assert fn is not None, scheduled["Name"]
        try:
            result = fn(scheduled.get("Input"))
            event = task_completed(timestamp=self.now, task_scheduled_id=scheduled["EventId"], result=result)
        except Exception as exc:
            event = task_failed(
                timestamp=self.now, task_scheduled_id=scheduled["EventId"], reason=str(exc), details=type(exc).__name__
            )
        self._instance(message.instance_id).inbox.append(TaskMessage(message.instance_id, message.execution_id, event))

    def advance(self, delta: timedelta) -> None:
        self.now += delta
        self.fire_due_timers()

    def fire_due_timers(self) -> int:
        due = [t for t in self.timers if t.visible_at is None or t.visible_at <= self.now]
        for timer in due:
            self.timers.remove(timer)
            message = timer.message
            self._instance(message.instance_id).inbox.append(message)
        return len(due)

    def run(
        self,
        instance_id: str,
        *,
        pick: Callable[[list[TaskMessage]], TaskMessage] | None = None,
        batch: int = 1,
        max_steps: int = 10_000,
    ) -> EpisodeResult:
        """Run until the instance is terminal or nothing more can happen: one activity per step (chosen by
        ``pick``, oldest first by default; ``batch`` activities per step), episodes for every instance with
        mail, and due timers before anything else; the clock only moves when nothing else can happen."""
        for _ in range(max_steps):
            pending = [i for i in self.instances.values() if i.inbox]
            if pending:
                for instance in pending:
                    self.episode(instance.instance_id)
                continue
            if self.fire_due_timers():
                continue
            if self.work_items:
                for _ in range(min(batch, len(self.work_items))):
                    self.run_activity((pick or (lambda items: items[0]))(self.work_items))
                continue
            if self.timers:
                next_due = min(t.visible_at or self.now for t in self.timers)
                self.advance(max(next_due - self.now, timedelta(0)))
                continue
            break
        result = self._instance(instance_id).result
        assert result is not None
        return result

    def _instance(self, instance_id: str) -> Instance:
        return self.instances.setdefault(instance_id, Instance(instance_id))

    def _new_execution_id(self) -> str:
        self._exec_counter += 1
        return f"exec{self._exec_counter:04d}"
