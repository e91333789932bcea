"""Protocol details of one episode: reconciliation, the context JSON, the DTFx episode layout."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta

from durable_local.history import event_type, execution_started, task_completed
from durable_local.model import EventType, FunctionRegistry, RuntimeStatus, TaskMessage
from durable_local.replay.api import EpisodeInput, ReplaySettings
from durable_local.replay.context_json import format_timespan
from durable_local.replay.episode import run_episode
from tests.engine.replay import orchestrations as o
from tests.engine.replay.driver import T0, Driver


class Recording:
    """Wraps a real SDK handle and keeps every context JSON it receives."""

    def __init__(self, inner: Callable[[str], str]) -> None:
        self.inner = inner
        self.contexts: list[dict] = []

    def __call__(self, context: str) -> str:
        self.contexts.append(json.loads(context))
        return self.inner(context)


def start_message(
    instance_id: str, execution_id: str, name: str = "chain", input: str | None = '"\\"a\\""'
) -> TaskMessage:
    event = execution_started(timestamp=T0, name=name, instance_id=instance_id, execution_id=execution_id, input=input)
    return TaskMessage(instance_id, execution_id, event)


def registry(**orchestrators: Callable[[str], str]) -> FunctionRegistry:
    return FunctionRegistry(orchestrators=orchestrators, activities=o.ACTIVITIES)


def test_execution_started_goes_first_and_duplicates_are_dropped() -> None:
    early = task_completed(timestamp=T0, task_scheduled_id=0, result='"x"')
    messages = [
        TaskMessage("i1", None, early),
        start_message("i1", "e1"),
        start_message("i1", "e2"),
    ]
    result = run_episode(EpisodeInput("i1", [], messages, T0, registry(chain=o.handle(o.chain))))
    kinds = [event_type(e) for e in result.history]
    assert kinds[:3] == [EventType.ORCHESTRATOR_STARTED, EventType.EXECUTION_STARTED, EventType.TASK_COMPLETED]
    assert result.execution_id == "e1"
    assert [(m.execution_id, reason) for m, reason in result.discarded] == [("e2", "Duplicate start event")]


def test_messages_for_another_execution_are_discarded_with_the_reason() -> None:
    first = run_episode(EpisodeInput("i1", [], [start_message("i1", "e1")], T0, registry(chain=o.handle(o.chain))))
    stale = TaskMessage("i1", "e0", task_completed(timestamp=T0, task_scheduled_id=0, result='"x"'))
    second = run_episode(EpisodeInput("i1", first.history, [stale], T0, registry(chain=o.handle(o.chain))))
    assert second.discarded == [(stale, "ExecutionId of event (e0) does not match current executionId")]
    assert second.activity_messages == []
    assert second.status is RuntimeStatus.RUNNING


def test_messages_for_a_never_started_instance_are_all_discarded() -> None:
    stray = TaskMessage("ghost", "e1", task_completed(timestamp=T0, task_scheduled_id=0, result="1"))
    result = run_episode(EpisodeInput("ghost", [], [stray], T0, registry()))
    assert result.history == [] and result.committed_count == 0
    assert result.discarded == [(stray, "Received work-item for an invalid orchestration")]


def test_duplicate_completion_is_tolerated() -> None:
    driver = Driver({"chain": o.handle(o.chain)}, o.ACTIVITIES)
    driver.start("chain", "c1", "a")
    driver.episode("c1")
    work = driver.work_items[0]
    driver.run_activity(work)
    driver.work_items.append(work)
    driver.run_activity(work)  # at-least-once: the same activity answered twice (crash point C9)
    result = driver.episode("c1")
    assert result.status is RuntimeStatus.RUNNING
    completions = [e for e in result.history if event_type(e) == EventType.TASK_COMPLETED]
    assert [e["TaskScheduledId"] for e in completions] == [0, 0]
    assert [m.event["EventId"] for m in result.activity_messages] == [1]
    final = driver.run("c1")
    assert final.status is RuntimeStatus.COMPLETED and json.loads(final.output or "") == "a!!!"


def test_context_json_matches_the_extension() -> None:
    recording = Recording(o.handle(o.chain))
    settings = ReplaySettings(default_http_async_request_sleep_ms=1234)
    driver = Driver({"chain": recording}, o.ACTIVITIES, settings=settings)
    driver.start("chain", "c1", "a")
    driver.episode("c1")
    driver.advance(timedelta(seconds=3))
    driver.run_activity(driver.work_items[0])
    driver.episode("c1")
    first, second = recording.contexts
    assert first["isReplaying"] is False and second["isReplaying"] is True
    for context in (first, second):
        assert context["instanceId"] == "c1"
        # the stored input '"\\"a\\""' (the SDK client's encoding) reaches the worker parsed once: '"a"'
        assert context["input"] == '"a"'
        assert context["parentInstanceId"] is None
        assert context["upperSchemaVersion"] == 1 and context["upperSchemaVersionNew"] == 2
        assert context["longRunningTimerIntervalDuration"] == "3.00:00:00"
        assert context["maximumShortTimerDuration"] == "6.00:00:00"
        assert context["defaultHttpAsyncRequestSleepTimeMillseconds"] == 1234
    history = second["history"]
    kinds = [event_type(e) for e in history]
    assert kinds == [
        EventType.ORCHESTRATOR_STARTED,
        EventType.EXECUTION_STARTED,
        EventType.TASK_SCHEDULED,
        EventType.ORCHESTRATOR_COMPLETED,
        EventType.ORCHESTRATOR_STARTED,
        EventType.TASK_COMPLETED,
    ]
    assert [e["IsPlayed"] for e in history] == [True, True, True, True, False, False]
    assert history[4]["Timestamp"] == "2024-01-01T00:00:03.0000000Z"


def test_timespan_format_is_dotnet() -> None:
    assert format_timespan(timedelta(days=3)) == "3.00:00:00"
    assert format_timespan(timedelta(hours=5, minutes=4, seconds=3)) == "05:04:03"
    assert format_timespan(timedelta(seconds=1, microseconds=5)) == "00:00:01.0000050"
    assert format_timespan(-timedelta(days=1, hours=2)) == "-1.02:00:00"


def test_every_episode_has_the_dtfx_layout() -> None:
    driver = Driver({"fan": o.handle(o.fan_out)}, o.ACTIVITIES)
    driver.start("fan", "f1", 3)
    result = driver.run("f1", batch=2)
    assert result.status is RuntimeStatus.COMPLETED
    episodes: list[list[dict]] = []
    for event in result.history:
        if event_type(event) == EventType.ORCHESTRATOR_STARTED:
            episodes.append([])
        episodes[-1].append(event)
    assert len(episodes) == len(driver.results)
    decision_kinds = {EventType.TASK_SCHEDULED, EventType.TIMER_CREATED, EventType.EXECUTION_COMPLETED}
    for episode in episodes:
        kinds = [event_type(e) for e in episode]
        assert kinds[0] == EventType.ORCHESTRATOR_STARTED and kinds[-1] == EventType.ORCHESTRATOR_COMPLETED
        body = kinds[1:-1]
        first_decision = next((i for i, k in enumerate(body) if k in decision_kinds), len(body))
        messages, decisions = body[:first_decision], body[first_decision:]
        assert messages, "every episode starts from at least one message"
        assert all(k not in decision_kinds for k in messages)
        assert all(k in decision_kinds for k in decisions)
        assert all(e["EventId"] == -1 for e in episode[1 : 1 + len(messages)])
    assert [event_type(e) for e in episodes[0][1:2]] == [EventType.EXECUTION_STARTED]
    assert [e["EventId"] for e in result.history if event_type(e) in decision_kinds] == [0, 1, 2, 3]
