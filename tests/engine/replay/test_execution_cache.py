"""The execution cache (``durable_local.replay.execution_cache``) changes the work of an episode, never its result.

The main test runs a real collection (the collector's orchestrator through the real SDK, Graph and Exchange, the
tenant budget on, several continue-as-new switches) with each episode's cache handed to the next, and checks for every
episode of every execution: the context JSON the worker received is byte for byte ``build_context_json`` (the uncached
encoding) of the same events, and the episode's result equals the one the same episode gives with no cache.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest

from durable_local.history import event_type
from durable_local.model import EventType, HistoryEvent
from durable_local.replay import episode as episode_module
from durable_local.replay.actions import parse_actions
from durable_local.replay.api import EpisodeInput, EpisodeResult
from durable_local.replay.context_json import build_context_json
from durable_local.replay.execution_cache import ExecutionCache, past_texts
from shared.sinks.memory import MemorySink
from tests.collector import replay_driver
from tests.collector.fakes import FakeQueryApi, FakeSearchApi, synthetic
from tests.collector.replay_driver import ReplayDriver, orchestrator_handle
from tests.collector.test_orchestrator_replay import START, exchange_activities, graph_activities, payload
from tests.engine.replay import orchestrations as o
from tests.engine.replay.driver import Driver


class Twin:
    """Runs every episode twice, without a cache and with the previous episode's, and checks both."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.cache: ExecutionCache | None = None
        self.received: list[str] = []
        self.references: list[str] = []
        self.episodes = 0
        self.past_events = 0
        self.reused_events = 0
        self.actions = 0
        self.reused_actions = 0
        self.executions: set[str] = set()
        self._past: list[HistoryEvent] = []
        real_past_texts, real_context = episode_module.past_texts, episode_module.context_json_from_past

        def recording_past_texts(past: list[HistoryEvent], cache: ExecutionCache | None) -> Any:
            self._past = past
            return real_past_texts(past, cache)

        def checked_context(**kwargs: Any) -> str:
            text = real_context(**kwargs)
            self.references.append(
                build_context_json(
                    instance_id=kwargs["instance_id"],
                    past_events=self._past,
                    current_events=kwargs["current_events"],
                    input=kwargs["input"],
                    parent_instance_id=kwargs["parent_instance_id"],
                    settings=kwargs["settings"],
                )
            )
            return text

        monkeypatch.setattr(episode_module, "past_texts", recording_past_texts)
        monkeypatch.setattr(episode_module, "context_json_from_past", checked_context)
        monkeypatch.setattr(replay_driver, "run_episode", self.run_episode)

    def handle(self, inner: Callable[[str], str]) -> Callable[[str], str]:
        def recording(context_json: str) -> str:
            self.received.append(context_json)
            return inner(context_json)

        return recording

    def run_episode(self, episode: EpisodeInput) -> EpisodeResult:
        self.episodes += 1
        results = []
        for cache in (None, self.cache):
            self.received.clear()
            self.references.clear()
            ids = (f"x{self.episodes}-{n}" for n in itertools.count())
            new_id = functools.partial(next, ids)
            results.append(
                episode_module.run_episode(dataclasses.replace(episode, cache=cache, new_execution_id=new_id))
            )
            assert self.received == self.references, f"episode {self.episodes}: the worker got other bytes"
        plain, cached = results
        assert plain.reused_events == plain.reused_actions == 0
        unused = {"cache": None, "reused_events": 0, "reused_actions": 0}
        assert dataclasses.replace(cached, **unused) == dataclasses.replace(plain, **unused)
        self.cache = cached.cache
        if self.cache is not None:
            self.executions.add(self.cache.execution_id)
            self.past_events += len(self.cache.events)
            self.reused_events += self.cache.reused_events
            assert self.cache.actions is not None
            self.actions += sum(len(group) for group in self.cache.actions.raw)
            self.reused_actions += self.cache.reused_actions
        return cached


@pytest.mark.parametrize("source", ["graph", "exchange"])
def test_a_collection_gets_the_same_bytes_and_results_with_the_cache(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    twin = Twin(monkeypatch)
    hours, k = 18, 3
    records = synthetic(START, hours, 20 if source == "graph" else 6)
    sink = MemorySink()
    activities = (
        graph_activities(FakeQueryApi(records, polls_until_done=2), sink)
        if source == "graph"
        else exchange_activities(FakeSearchApi(records), sink)
    )
    driver = ReplayDriver(twin.handle(orchestrator_handle()), activities, seed=2, budget_capacity=2)
    options = {"budget_capacity": 2, "budget_lease_seconds": 600.0, "budget_poll_seconds": 5.0}
    driver.start(payload(source, hours, k, m=6, poll_interval_seconds=5.0, **options))
    result = driver.run()

    assert result.output is not None and driver.executions >= 3, "the collection ended after several executions"
    assert len(twin.executions) >= 3 and driver.entity_operations, "continue-as-new and budget calls were replayed"
    # The cache did the work: nearly every past event kept its text, nearly every action was not parsed again.
    assert twin.reused_events >= 0.8 * twin.past_events, (twin.reused_events, twin.past_events)
    assert twin.reused_actions >= 0.8 * twin.actions, (twin.reused_actions, twin.actions)


def test_a_cache_whose_events_are_not_a_prefix_is_not_used() -> None:
    events: list[HistoryEvent] = [{"EventType": 12, "EventId": -1, "Timestamp": "t0"}, {"EventType": 0, "Input": "a"}]
    texts, _, chars = past_texts(events, None)
    cache = ExecutionCache("i", "e", events, texts, None, chars)
    changed = [events[0], {**events[1], "Input": "b"}, {"EventType": 13}]
    assert past_texts([*events, {"EventType": 13}], cache)[1] == 2
    texts2, reused2, chars2 = past_texts(changed, cache)
    assert reused2 == 0 and texts2 == [json.dumps({**e, "IsPlayed": True}) for e in changed]
    assert chars2 == sum(len(t) for t in texts2)
    assert past_texts(events[:1], cache)[1] == 0, "a longer cache than the past is a miss"


def _action(input: object, name: str = "echo") -> dict[str, Any]:
    return {"actionType": 0, "functionName": name, "input": input}


def test_an_equal_text_action_is_reused_and_others_are_parsed_again() -> None:
    first = parse_actions([[_action('"a"'), _action(1)]])
    assert first.reused == 0 and first.plain == [[True, False]]
    second = parse_actions([[_action('"a"'), _action(1.0), _action('"c"')], [_action(None)]], first)
    assert second.reused == 1
    assert second.parsed[0][0] is first.parsed[0][0]
    # 1 == 1.0, but they are not the same JSON: the second is parsed again and keeps its own text.
    assert second.parsed[0][1] is not first.parsed[0][1] and second.parsed[0][1].input == "1.0"
    third = parse_actions([[_action('"changed"'), _action(1.0), _action('"c"')], [_action(None)]], second)
    assert third.reused == 2 and third.parsed[0][0].input == '"changed"'
    assert [[a.input for a in g] for g in third.parsed] == [['"changed"', "1.0", '"c"'], [None]]


def test_a_cache_of_another_execution_or_instance_is_ignored() -> None:
    driver = Driver({"chain": o.handle(o.chain)}, o.ACTIVITIES)
    driver.start("chain", "cached", "go")
    first = driver.episode("cached")
    assert first.cache is not None and first.cache.execution_id == first.execution_id
    stale = dataclasses.replace(first.cache, execution_id="another", texts=["not json"] * len(first.cache.texts))
    poisoned = dataclasses.replace(first.cache, instance_id="other", texts=["not json"] * len(first.cache.texts))
    driver.run_activity(driver.work_items[0])
    instance = driver.instances["cached"]
    for cache in (stale, poisoned):
        messages = list(instance.inbox)
        result = episode_module.run_episode(
            EpisodeInput(
                instance_id="cached",
                past_events=[dict(e) for e in instance.history],
                new_messages=messages,
                now=driver.now,
                registry=driver.registry,
                cache=cache,
            )
        )
        assert result.cache is not None and result.cache.reused_events == 0
        assert [event_type(e) for e in result.history][-2] is EventType.TASK_SCHEDULED


def test_the_cache_ends_with_the_execution() -> None:
    driver = Driver({"chain": o.handle(o.chain)}, o.ACTIVITIES)
    driver.start("chain", "done", "go")
    result = driver.run("done")
    assert result.output is not None and result.cache is None
