"""Activity dispatcher behaviour through the Engine: concurrency cap, visibility renewal, missing functions."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

from durable_local.clock import ManualClock, SystemClock
from durable_local.dispatch import ActivityDispatcher, EngineCounters
from durable_local.engine import Engine
from durable_local.faults import FaultInjector
from durable_local.model import RuntimeStatus, TaskMessage
from durable_local.storage import StoreBundle, open_memory_store

from .apps import Activities
from .conftest import T0, client_input, fast_settings, wait_until


@pytest.fixture
def activities() -> Activities:
    return Activities()


@pytest.fixture
def engines() -> Iterator[list[Engine]]:
    started: list[Engine] = []
    yield started
    for engine in started:
        engine.stop(drain_timeout=2)


def _engine(engines: list[Engine], activities: Activities, store: StoreBundle, clock, **overrides: object) -> Engine:  # type: ignore[no-untyped-def]
    engine = Engine(activities.registry(), store=store, settings=fast_settings(**overrides), clock=clock)
    engines.append(engine)
    engine.start()
    return engine


def test_max_concurrent_activities_caps_in_flight(engines: list[Engine], activities: Activities) -> None:
    clock = SystemClock()
    engine = _engine(engines, activities, open_memory_store(clock), clock, max_concurrent_activities=3)
    instance_id = engine.start_new("slow_fan_out", input_json=client_input(12))
    status = engine.wait_for_completion(instance_id, 30)
    assert status is not None and status.runtime_status is RuntimeStatus.COMPLETED
    assert json.loads(status.output or "[]") == list(range(12))
    stats = engine.stats()
    assert stats["activities_peak_in_flight"] == 3
    assert stats["activity_executions"] == {"sleepy": 12}


def test_running_activity_visibility_is_renewed(engines: list[Engine], activities: Activities) -> None:
    clock = ManualClock(T0)
    activities.gate.clear()  # "square" blocks until the test opens the gate
    engine = _engine(engines, activities, open_memory_store(clock), clock)
    instance_id = engine.start_new("fan_out", input_json=client_input(1))
    assert wait_until(lambda: engine.stats()["activities_in_flight"] == 1)
    # Well past the 5-minute visibility timeout, in steps longer than half of it: after each step the renewer
    # extends the hidden work item, so no second copy of the activity ever starts.
    for step in range(1, 5):
        clock.advance(timedelta(minutes=3))
        assert wait_until(lambda step=step: engine.stats()["activity_renewals"] >= step)
        assert engine.stats()["activity_executions"] == {"square": 1}
    activities.gate.set()
    status = engine.wait_for_completion(instance_id, 10)
    assert status is not None and status.runtime_status is RuntimeStatus.COMPLETED
    assert engine.stats()["activity_executions"] == {"square": 1}


def test_missing_activity_fails_the_orchestration(engines: list[Engine], activities: Activities) -> None:
    # As the extension: scheduling an unknown activity fails the orchestration (not just the task).
    clock = SystemClock()
    engine = _engine(engines, activities, open_memory_store(clock), clock)
    instance_id = engine.start_new("calls_missing")
    status = engine.wait_for_completion(instance_id, 10)
    assert status is not None and status.runtime_status is RuntimeStatus.FAILED
    assert "not_registered" in (status.output or "")
    assert engine.stats()["activity_executions"] == {}


def test_on_event_hook_sees_activities_and_episodes(activities: Activities) -> None:
    seen: list[str] = []
    clock = SystemClock()
    engine = Engine(
        activities.registry(),
        store=open_memory_store(clock),
        settings=fast_settings(),
        clock=clock,
        on_event=lambda kind, data: seen.append(kind),
    )
    with engine:
        instance_id = engine.start_new("chain")
        status = engine.wait_for_completion(instance_id, 10)
    assert status is not None and status.runtime_status is RuntimeStatus.COMPLETED
    assert seen.count("activity_started") == 3 and seen.count("activity_finished") == 3
    assert seen.count("episode_completed") == 4


def test_stop_gives_back_work_items_the_pool_never_ran(activities: Activities) -> None:
    clock = ManualClock(T0)
    store = open_memory_store(clock)
    work_items = store.queues.get_queue("dispatcher-test-workitems")
    control = store.queues.get_queue("dispatcher-test-control")
    dispatcher = ActivityDispatcher(
        work_items=work_items,
        control_queue_for=lambda _: control,
        registry=activities.registry(),
        settings=fast_settings(max_concurrent_activities=1),
        clock=clock,
        faults=FaultInjector(),
        counters=EngineCounters(),
    )
    # Occupy the pool's only thread from outside, so that the fetched work item waits in the pool's queue
    # (the window in which a real activity thread is finishing); stop() then cancels it.
    gate = threading.Event()
    dispatcher._pool.submit(gate.wait)
    scheduled = {"EventType": 4, "EventId": 0, "Name": "echo", "Input": json.dumps("x"), "Timestamp": T0.isoformat()}
    work_items.add(TaskMessage("i1", "e1", scheduled))
    dispatcher.start()
    try:
        assert wait_until(lambda: dispatcher.running == 1)
        dispatcher.stop(timeout=0.5)
    finally:
        gate.set()
    assert dispatcher.running == 0
    assert dispatcher._slots.acquire(blocking=False)  # the slot came back too
    assert activities.calls["echo:x"] == 0  # it never ran; the message reappears after its visibility timeout
    assert work_items.approximate_count() == 1
