"""The dispatcher's per-instance execution caches: used for the history this worker wrote, for nothing else."""

from __future__ import annotations

import json
import threading
from typing import Any

import azure.durable_functions as df

from durable_local.clock import SystemClock
from durable_local.dispatch.episode_caches import EpisodeCaches
from durable_local.engine import Engine
from durable_local.model import FunctionRegistry, RuntimeStatus
from durable_local.ports import HistoryBatch
from durable_local.replay.execution_cache import ExecutionCache
from durable_local.storage import open_memory_store

from .conftest import fast_settings, wait_until


def _cache(instance_id: str = "i", execution_id: str = "e", chars: int = 10) -> ExecutionCache:
    return ExecutionCache(instance_id, execution_id, [], [], None, chars)


def test_an_entry_is_given_once_and_only_for_the_history_it_was_kept_for() -> None:
    caches = EpisodeCaches()
    cache = _cache()
    caches.keep("i", etag="E1", history_length=4, cache=cache)
    assert caches.take("i", etag="E1", execution_id="e", history_length=4) is cache
    assert caches.take("i", etag="E1", execution_id="e", history_length=4) is None, "taken out until kept again"
    for etag, execution_id, length in (("E2", "e", 4), ("E1", "other", 4), ("E1", "e", 5), (None, "e", 4)):
        caches.keep("i", etag="E1", history_length=4, cache=cache)
        assert caches.take("i", etag=etag, execution_id=execution_id, history_length=length) is None
        assert len(caches) == 0, "a miss drops the entry"
    caches.keep("j", etag="E1", history_length=4, cache=cache)
    assert len(caches) == 0, "never kept under another instance"


def test_the_least_recently_kept_entries_go_beyond_the_bound() -> None:
    caches = EpisodeCaches(max_chars=25)
    for name in ("a", "b", "c"):
        caches.keep(name, etag="E", history_length=0, cache=_cache(name, chars=10))
    assert len(caches) == 2
    assert caches.take("a", etag="E", execution_id="e", history_length=0) is None
    assert caches.take("c", etag="E", execution_id="e", history_length=0) is not None
    caches.keep("big", etag="E", history_length=0, cache=_cache("big", chars=26))
    assert caches.take("big", etag="E", execution_id="e", history_length=0) is None, "one too big is not kept"


def _steps(ctx: df.DurableOrchestrationContext) -> Any:
    total = 0
    for step in range(ctx.get_input()):
        total += yield ctx.call_activity("add", step)
    ctx.set_custom_status("waiting")
    extra = yield ctx.wait_for_external_event("go")
    return total + extra


class _Recording:
    def __init__(self) -> None:
        self.inner = df.Orchestrator.create(_steps)
        self.received: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, context_json: str) -> str:
        with self.lock:
            self.received.append(context_json)
        return self.inner(context_json)  # type: ignore[no-any-return]


def _engine(recording: _Recording) -> tuple[Engine, Any]:
    registry = FunctionRegistry(
        orchestrators={"steps": recording}, activities={"add": lambda data: json.dumps(json.loads(data or "0") + 1)}
    )
    clock = SystemClock()
    store = open_memory_store(clock)
    engine = Engine(registry, store=store, settings=fast_settings(), clock=clock)
    engine.start()
    return engine, store


def test_an_engine_reuses_what_its_own_checkpoints_wrote() -> None:
    recording = _Recording()
    engine, store = _engine(recording)
    try:
        instance = engine.start_new("steps", input_json=json.dumps(json.dumps(6)))
        assert wait_until(lambda: (engine.get_status(instance) or _NONE).custom_status == '"waiting"', 30)
        engine.raise_event(instance, "go", "100")
        status = engine.wait_for_completion(instance, 30)
        stats = engine.stats()
    finally:
        engine.stop(drain_timeout=2)
        store.close()
    assert status is not None and status.runtime_status is RuntimeStatus.COMPLETED and status.output == "121"
    episodes = stats["orchestration_episodes"]
    assert episodes == len(recording.received) == 8
    # Each episode encoded only the events added since the previous one: in all, the last episode's past events.
    played_last = sum(1 for event in json.loads(recording.received[-1])["history"] if event["IsPlayed"])
    assert stats["replayed_events"] - stats["reused_events"] == played_last, stats
    assert stats["reused_actions"] >= episodes - 1, stats


def test_a_history_another_writer_changed_is_encoded_again() -> None:
    """The store's history is rewritten between two episodes with an equal value of another JSON type (``-1`` to
    ``-1.0``, equal in Python): the episode must send the new bytes, as an engine without a cache would. Only the
    ETag tells the two histories apart."""
    recording = _Recording()
    engine, store = _engine(recording)
    try:
        instance = engine.start_new("steps", input_json=json.dumps(json.dumps(1)))
        assert wait_until(lambda: (engine.get_status(instance) or _NONE).custom_status == '"waiting"', 30)
        assert wait_until(lambda: engine.stats()["active_sessions"] == 0, 10)
        loaded = store.tracking.get_history(instance)
        assert loaded.execution_id is not None
        rewritten = [dict(event) for event in loaded.events]
        assert rewritten[0]["EventId"] == -1
        rewritten[0]["EventId"] = -1.0
        batch = HistoryBatch(instance, loaded.execution_id, 0, rewritten, is_final_batch=True)
        store.tracking.write_history_batch(batch, loaded.etag)
        engine.raise_event(instance, "go", "1")
        status = engine.wait_for_completion(instance, 30)
    finally:
        engine.stop(drain_timeout=2)
        store.close()
    assert status is not None and status.runtime_status is RuntimeStatus.COMPLETED
    last = json.loads(recording.received[-1])["history"][0]
    assert '"EventId": -1.0' in recording.received[-1].split("}", 1)[0], last
    assert '"EventId": -1,' in recording.received[-2].split("}", 1)[0]


class _NoStatus:
    custom_status = None


_NONE: Any = _NoStatus()
