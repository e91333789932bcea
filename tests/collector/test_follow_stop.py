"""A stop is honoured whenever it is sent: the real follower orchestrator replayed by ``durable_local.replay`` in SHIM
mode (the extension's sequential-await shim), its passes played by the test.

Today's extension drops the events an execution buffered when it continues as new (the shim calls ``ContinueAsNew``
without ``preserveUnprocessedEvents``), and the Python SDK holds an event that arrived before its waiter only until
then; DTFx carries into the next execution only the events processed *after* ``ContinueAsNew`` was reached
(docs/durable-protocol.md, "Continue-as-new"). These tests send the stop at each of those moments.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from durable_local.history import event_raised, event_type, sub_orchestration_completed, sub_orchestration_failed
from durable_local.history import execution_started as started_event
from durable_local.model import EventType, FunctionRegistry, RuntimeStatus, ScheduledMessage, TaskMessage
from durable_local.replay.api import EpisodeInput, EpisodeResult
from durable_local.replay.episode import run_episode
from shared import names
from shared.follow.state import FollowSpec, FollowState
from shared.models import iso
from shared.requests.run_options import RunOptions

NOW = datetime(2024, 11, 18, 12, 0, tzinfo=UTC)
FOLLOW = "follow-graph-0123456789ab"
HOUR = timedelta(hours=1)


@functools.cache
def follow_handle() -> Callable[[str], str]:
    import function_app

    for function in function_app.app.get_functions():
        if function.get_trigger().type == "orchestrationTrigger" and function.get_function_name() == (
            names.ORCHESTRATOR_FOLLOW
        ):
            return function.get_user_function()  # type: ignore[no-any-return]
    raise AssertionError("no follower orchestrator registered")


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

    def __init__(self, start_payload: dict[str, Any]) -> None:
        self.registry = FunctionRegistry(
            orchestrators={names.ORCHESTRATOR_FOLLOW: follow_handle(), names.ORCHESTRATOR_COLLECT: lambda _: ""},
            activities={},
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


def stopped_output(follower: Follower) -> dict[str, Any]:
    assert follower.result is not None
    assert follower.status is RuntimeStatus.COMPLETED, (
        f"the follower did not end: {follower.status.name}, passes {[p[0] for p in follower.passes]}, "
        f"executions {follower.executions}"
    )
    return json.loads(follower.result.output or "null")  # type: ignore[no-any-return]


def test_a_stop_sent_while_a_pass_runs_ends_the_follower_after_that_pass() -> None:
    follower = Follower(payload(NOW - 6 * HOUR))
    follower.run_until_pass()
    (first,) = follower.passes
    follower.deliver([follower.stop_message()])  # the stop arrives while the pass runs
    assert follower.status is RuntimeStatus.RUNNING, "the pass it runs is finished first"
    assert follower.statuses[-1]["status"] == "stopping" and follower.statuses[-1]["running"]
    follower.now += timedelta(minutes=3)
    follower.deliver([follower.pass_answer(written(first[2]))])
    follower.idle()
    output = stopped_output(follower)
    assert len(follower.passes) == 1, "no pass after the stop"
    assert output["status"] == "stopped" and output["passes"] == 1
    assert output["covered"]["end"] == first[2]["spec"]["explicit"][-1]["end"], "the pass it ran is applied"
    assert FollowState.from_json(output["state"]).stopped


def test_a_stop_processed_after_the_execution_continued_as_new_is_carried_and_honoured() -> None:
    """The pass's answer and the stop in one batch: the follower reaches ``continue_as_new`` on the answer, and DTFx
    carries the stop into the next execution, whose waiter takes it before anything else."""
    follower = Follower(payload(NOW - 6 * HOUR))
    follower.run_until_pass()
    (first,) = follower.passes
    follower.deliver([follower.pass_answer(written(first[2])), follower.stop_message()])
    follower.idle()
    output = stopped_output(follower)
    assert len(follower.passes) == 1 and output["status"] == "stopped"


def test_a_stop_during_a_failed_pass_still_ends_the_follower() -> None:
    follower = Follower(payload(NOW - 6 * HOUR))
    follower.run_until_pass()
    follower.deliver([follower.stop_message()])
    follower.deliver([follower.pass_answer(None)])  # the collection itself failed
    follower.idle()
    output = stopped_output(follower)
    assert len(follower.passes) == 1 and output["lastError"]["kind"] == "pass_failed"


def test_a_stop_during_the_first_of_two_passes_ends_the_follower_before_the_second() -> None:
    """Windows of two days are due (a settle pass for yesterday, new windows today): the stop sent during the first
    pass ends the follower after it, without starting the second."""
    start = NOW.replace(hour=0) - timedelta(days=1)
    follower = Follower(payload(start, covered=NOW.replace(hour=0) - 6 * HOUR))
    follower.run_until_pass()
    (first,) = follower.passes
    assert first[2]["spec"]["collectionId"].endswith(f"{start:%Y%m%d}"), "yesterday's pass first"
    follower.deliver([follower.stop_message()])
    follower.deliver([follower.pass_answer(written(first[2]))])
    follower.idle()
    output = stopped_output(follower)
    assert len(follower.passes) == 1, "the second day's pass never started"
    assert output["covered"]["end"] == iso(NOW.replace(hour=0))


def test_a_stop_while_it_waits_ends_it_at_once_and_a_follower_without_stop_goes_on() -> None:
    follower = Follower(payload(NOW - 6 * HOUR))
    follower.run_until_pass()
    follower.deliver([follower.pass_answer(written(follower.passes[0][2]))])
    follower.now += timedelta(minutes=1)
    follower.fire_timers()  # nothing is due before the next wake: it waits
    assert follower.status is RuntimeStatus.RUNNING and not follower.open_passes
    follower.deliver([follower.stop_message()])
    assert stopped_output(follower)["status"] == "stopped"

    going = Follower(payload(NOW - 6 * HOUR))
    going.run_until_pass()
    going.deliver([going.pass_answer(written(going.passes[0][2]))])
    going.now += 2 * HOUR
    going.run_until_pass()
    assert going.status is RuntimeStatus.RUNNING and len(going.passes) == 2, "without a stop it goes on"
