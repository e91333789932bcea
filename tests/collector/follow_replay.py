"""The real follower orchestrator replayed by ``durable_local.replay`` in SHIM mode (the extension's sequential-await
shim), its passes, timers and events delivered by the test (``Follower``)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from durable_local.history import (
    event_raised,
    event_type,
    sub_orchestration_completed,
    sub_orchestration_failed,
    task_completed,
)
from durable_local.history import execution_started as started_event
from durable_local.model import EventType, FunctionRegistry, RuntimeStatus, ScheduledMessage, TaskMessage
from durable_local.replay.api import EpisodeInput, EpisodeResult
from durable_local.replay.episode import run_episode
from shared import names
from shared.follow.state import FollowSpec, FollowState
from shared.models import iso
from shared.requests import admission
from shared.requests.run_options import RunOptions

NOW = datetime(2024, 11, 18, 12, 0, tzinfo=UTC)
FOLLOW = "follow-graph-0123456789ab"
HOUR = timedelta(hours=1)


@functools.cache
def follow_handle() -> Callable[[str], str]:
    """The follower orchestrator's handle, as its trigger builds it (``Orchestrator.create`` over the generator the
    trigger delegates to); not through ``function_app``: the SDK indexes an app's functions once per process, and
    ``tests.collector.replay_driver`` does."""
    import azure.durable_functions as df

    from orchestrators.follow import follow

    return df.Orchestrator.create(follow)  # type: ignore[no-any-return]


def payload(start: datetime, covered: datetime | None = None) -> dict[str, Any]:
    spec = FollowSpec(
        follow_id=FOLLOW,
        tenant_id="contoso.onmicrosoft.com",
        source="graph",
        filters={},
        options=RunOptions(max_concurrency=2),
        start=start,
        interval=HOUR,
        every=timedelta(minutes=15),
        delay=timedelta(minutes=90),
    )
    state = FollowState(covered_until=covered or start)
    return {"spec": spec.to_json(), "state": state.to_json(), "request": {}, "startedAt": iso(NOW)}


class Follower:
    """One follower instance; the test delivers its timers, its passes' outcomes and its events."""

    def __init__(self, start_payload: dict[str, Any], secret: str = "") -> None:
        self.registry = FunctionRegistry(
            orchestrators={names.ORCHESTRATOR_FOLLOW: follow_handle(), names.ORCHESTRATOR_COLLECT: lambda _: ""},
            activities={  # the real admission activities' bodies (no secret: every input is admitted)
                names.ACTIVITY_ADMIT: lambda text: json.dumps(admission.admit(secret, json.loads(text or "{}"))),
                names.ACTIVITY_SEAL: lambda text: json.dumps(admission.seal_answer(secret, json.loads(text or "{}"))),
            },
            entities={},
        )
        self.now = NOW
        self.history: list[dict[str, Any]] = []
        self.timers: list[ScheduledMessage] = []
        self.passes: list[tuple[str, int, dict[str, Any]]] = []
        """Every pass started: (instance id, its task id in the parent, its input)."""
        self.open_passes: list[tuple[str, int, str]] = []
        """Passes not answered yet: (instance id, task id, the parent's execution id)."""
        self.result: EpisodeResult | None = None
        self.executions = 1
        self.statuses: list[dict[str, Any]] = []
        self.deliver(
            [
                TaskMessage(
                    FOLLOW,
                    "e1",
                    started_event(
                        timestamp=NOW,
                        name=names.ORCHESTRATOR_FOLLOW,
                        instance_id=FOLLOW,
                        execution_id="e1",
                        input=json.dumps(start_payload),
                    ),
                )
            ]
        )

    @property
    def status(self) -> RuntimeStatus:
        assert self.result is not None
        return self.result.status

    @property
    def execution(self) -> str:
        assert self.result is not None
        return self.result.execution_id

    def deliver(self, messages: list[TaskMessage]) -> None:
        episode = EpisodeInput(FOLLOW, self.history, messages, self.now, self.registry)
        self.result = run_episode(episode)
        self.history = self.result.history
        self.executions += int(self.result.continued_as_new)
        self.timers.extend(self.result.timer_messages)
        if self.result.custom_status:
            self.statuses.append(json.loads(self.result.custom_status))
        for message in self.result.orchestrator_messages:
            event = message.event
            if event_type(event) == EventType.EXECUTION_STARTED and event.get("ParentInstance"):
                task_id = int(event["ParentInstance"]["TaskScheduleId"])
                data = json.loads(event["Input"])
                while isinstance(data, str):  # the extension encodes the SDK's JSON text once more
                    data = json.loads(data)
                self.passes.append((message.instance_id, task_id, data))
                execution = event["ParentInstance"]["OrchestrationInstance"]["ExecutionId"]
                self.open_passes.append((message.instance_id, task_id, execution))
        answers = [self._run_activity(message) for message in self.result.activity_messages]
        if answers:  # admission and sealing answer at once, in their own episode like on a host
            self.deliver(answers)

    def _run_activity(self, message: TaskMessage) -> TaskMessage:
        scheduled = message.event
        fn = self.registry.activity(scheduled["Name"])
        assert fn is not None, scheduled["Name"]
        result = fn(scheduled["Input"])
        event = task_completed(timestamp=self.now, task_scheduled_id=scheduled["EventId"], result=result)
        return TaskMessage(message.instance_id, message.execution_id, event)

    def fire_timers(self) -> bool:
        """Deliver the timers due by now (of the current execution); False when none was."""
        due = [t for t in self.timers if t.visible_at is None or t.visible_at <= self.now]
        for timer in due:
            self.timers.remove(timer)
        current = [t.message for t in due if t.message.execution_id == self.execution]
        if current:
            self.deliver(current)
        return bool(current)

    def stop_message(self) -> TaskMessage:
        return TaskMessage(FOLLOW, None, event_raised(timestamp=self.now, name="stop", input=None))

    def pass_answer(self, output: dict[str, Any] | None) -> TaskMessage:
        _, task_id, execution = self.open_passes.pop(0)
        if output is None:
            event = sub_orchestration_failed(timestamp=self.now, task_scheduled_id=task_id, reason="boom")
        else:
            result = json.dumps(output)
            event = sub_orchestration_completed(timestamp=self.now, task_scheduled_id=task_id, result=result)
        return TaskMessage(FOLLOW, execution, event)

    def run_until_pass(self, limit: int = 20) -> None:
        """Let time pass (15 minutes a step) until a pass is started."""
        for _ in range(limit):
            if self.open_passes or self.status is not RuntimeStatus.RUNNING:
                return
            if not self.fire_timers():
                self.now += timedelta(minutes=15)
        raise AssertionError("no pass started")

    def idle(self, steps: int = 12) -> None:
        """Let time pass with no pass answered: timers fire, new passes start (and stay open)."""
        for _ in range(steps):
            if self.status is not RuntimeStatus.RUNNING:
                return
            if not self.fire_timers():
                self.now += timedelta(minutes=15)


def written(pass_input: dict[str, Any]) -> dict[str, Any]:
    """A pass's output: every window it read collected, all still provisional (they closed less than a day ago)."""
    explicit = pass_input["spec"]["explicit"]
    return {"status": "Completed", "failures": [], "provisionalWindows": explicit}
