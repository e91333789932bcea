"""Scenarios through ``Engine`` with the memory store and the real SDK replay."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest

from durable_local.clock import ManualClock, SystemClock
from durable_local.engine import Engine
from durable_local.errors import FunctionNotFoundError, InstanceExistsError, InvalidInstanceStateError
from durable_local.model import InstanceRecord, RuntimeStatus, SchedulingMode
from durable_local.ports import Clock, InstanceQuery
from durable_local.storage import open_memory_store

from .apps import Activities
from .conftest import T0, client_input, fast_settings, wait_until

EngineFactory = Callable[..., Engine]


@pytest.fixture
def activities() -> Activities:
    return Activities()


@pytest.fixture
def make_engine(activities: Activities) -> Iterator[EngineFactory]:
    engines: list[Engine] = []

    def make(clock: Clock | None = None, **overrides: object) -> Engine:
        clock = clock or SystemClock()
        mode = overrides.pop("mode", None)
        engine = Engine(
            activities.registry(),
            store=open_memory_store(clock),
            settings=fast_settings(**overrides),
            clock=clock,
            mode=mode,  # type: ignore[arg-type]
        )
        engines.append(engine)
        engine.start()
        return engine

    yield make
    for engine in engines:
        engine.stop(drain_timeout=2)


def _finish(engine: Engine, instance_id: str, timeout: float = 20) -> tuple[RuntimeStatus, object]:
    status = engine.wait_for_completion(instance_id, timeout)
    assert status is not None
    output = json.loads(status.output) if status.output is not None else None
    return status.runtime_status, output


def test_chaining(make_engine: EngineFactory) -> None:
    engine = make_engine()
    instance_id = engine.start_new("chain")
    assert _finish(engine, instance_id) == (RuntimeStatus.COMPLETED, "abc")


def test_fan_out_fan_in_200(make_engine: EngineFactory, activities: Activities) -> None:
    engine = make_engine()
    instance_id = engine.start_new("fan_out", input_json=client_input(200))
    assert _finish(engine, instance_id, 60) == (RuntimeStatus.COMPLETED, sum(i * i for i in range(200)))
    assert sum(v for k, v in activities.calls.items() if k.startswith("square:")) == 200
    history = engine.get_status(instance_id, show_history=True).history  # type: ignore[union-attr]
    assert history is not None and len(history) > 400  # > 99 events per checkpoint: several history batches


def test_task_any_first_completed_wins(make_engine: EngineFactory) -> None:
    engine = make_engine()
    instance_id = engine.start_new("first_of")
    assert _finish(engine, instance_id) == (RuntimeStatus.COMPLETED, "fast")


def test_durable_timer_fires_when_the_clock_reaches_fire_at(make_engine: EngineFactory) -> None:
    clock = ManualClock(T0)
    engine = make_engine(clock)
    instance_id = engine.start_new("timer_then_done", input_json=client_input(3600))
    assert wait_until(lambda: engine.get_status(instance_id).runtime_status is RuntimeStatus.RUNNING)  # type: ignore[union-attr]
    assert engine.wait_for_completion(instance_id, 0.2).runtime_status is RuntimeStatus.RUNNING  # type: ignore[union-attr]
    clock.advance(timedelta(seconds=3600))
    assert _finish(engine, instance_id) == (RuntimeStatus.COMPLETED, "fired")


def test_external_event_and_custom_status(make_engine: EngineFactory) -> None:
    engine = make_engine()
    instance_id = engine.start_new("wait_event")
    assert wait_until(lambda: engine.get_status(instance_id).custom_status is not None)  # type: ignore[union-attr]
    assert json.loads(engine.get_status(instance_id).custom_status) == {"stage": "waiting"}  # type: ignore[arg-type,union-attr]
    engine.raise_event(instance_id, "go", json.dumps(42))
    assert _finish(engine, instance_id) == (RuntimeStatus.COMPLETED, {"got": 42})
    assert json.loads(engine.get_status(instance_id).custom_status) == {"stage": "done"}  # type: ignore[arg-type,union-attr]


def test_sub_orchestration(make_engine: EngineFactory) -> None:
    engine = make_engine()
    instance_id = engine.start_new("parent", instance_id="p1")
    assert _finish(engine, instance_id) == (RuntimeStatus.COMPLETED, "parent:abc")
    child = engine.get_status("p1-child")
    assert child is not None and child.runtime_status is RuntimeStatus.COMPLETED
    assert child.parent_instance_id == "p1"


def test_continue_as_new(make_engine: EngineFactory, activities: Activities) -> None:
    engine = make_engine()
    instance_id = engine.start_new("counter", input_json=client_input(0))
    assert _finish(engine, instance_id) == (RuntimeStatus.COMPLETED, 3)
    assert [activities.calls[f"echo:{i}"] for i in range(3)] == [1, 1, 1]
    history = engine.get_status(instance_id, show_history=True).history  # type: ignore[union-attr]
    started = next(e for e in history or [] if e["EventType"] == 0)
    assert started["Input"] == client_input(3)  # the last generation's input, stored like a client's


def test_retries_succeed(make_engine: EngineFactory, activities: Activities) -> None:
    engine = make_engine()
    instance_id = engine.start_new("with_retry", input_json=client_input("x"))
    assert _finish(engine, instance_id) == (RuntimeStatus.COMPLETED, "ok")
    assert activities.calls["flaky"] == 3


def test_retries_exhausted_fail_the_orchestration(make_engine: EngineFactory, activities: Activities) -> None:
    activities.flaky_failures = 99
    engine = make_engine()
    instance_id = engine.start_new("with_retry", input_json=client_input("x"))
    status, output = _finish(engine, instance_id)
    assert status is RuntimeStatus.FAILED
    assert "flaky failure 3" in str(output)
    assert activities.calls["flaky"] == 3


def test_caught_activity_failure(make_engine: EngineFactory) -> None:
    engine = make_engine()
    instance_id = engine.start_new("catches")
    status, output = _finish(engine, instance_id)
    assert status is RuntimeStatus.COMPLETED
    assert "Activity function 'boom' failed:" in str(output) and "RuntimeError: kaboom" in str(output)


def test_terminate(make_engine: EngineFactory) -> None:
    engine = make_engine()
    instance_id = engine.start_new("wait_event")
    assert wait_until(lambda: engine.get_status(instance_id).runtime_status is RuntimeStatus.RUNNING)  # type: ignore[union-attr]
    engine.terminate(instance_id, "enough")
    status, output = _finish(engine, instance_id)
    assert status is RuntimeStatus.TERMINATED
    assert output == "enough"
    with pytest.raises(InvalidInstanceStateError):
        engine.raise_event(instance_id, "go", None)


def test_terminate_of_a_never_started_instance_marks_its_row_terminated(activities: Activities) -> None:
    # DTFx IsExecutableInstanceAsync: a terminate that finds neither history nor a start message (the start is
    # deferred, hidden or lost) still updates the Instances row; otherwise the instance stays Pending forever.
    clock = SystemClock()
    store = open_memory_store(clock)
    now = clock.now()
    row = InstanceRecord("never-started", "wait_event", "exec-1", RuntimeStatus.PENDING, now, now)
    store.tracking.set_new_execution(row, overwrite=False)
    engine = Engine(activities.registry(), store=store, settings=fast_settings(), clock=clock)
    engine.start()
    try:
        engine.terminate("never-started", "not wanted")
        status, output = _finish(engine, "never-started")
        assert (status, output) == (RuntimeStatus.TERMINATED, "not wanted")
        assert wait_until(lambda: engine.control_queue_for("never-started").approximate_count() == 0)
    finally:
        engine.stop(drain_timeout=2)


def test_suspend_and_resume(make_engine: EngineFactory) -> None:
    engine = make_engine()
    instance_id = engine.start_new("wait_event")
    assert wait_until(lambda: engine.get_status(instance_id).runtime_status is RuntimeStatus.RUNNING)  # type: ignore[union-attr]
    engine.suspend(instance_id, "pause")
    assert wait_until(lambda: engine.get_status(instance_id).runtime_status is RuntimeStatus.SUSPENDED)  # type: ignore[union-attr]
    with pytest.raises(InvalidInstanceStateError):
        engine.suspend(instance_id, "twice")  # as the extension's SuspendAsync: only a running instance
    engine.raise_event(instance_id, "go", json.dumps("while suspended"))
    assert engine.wait_for_completion(instance_id, 0.3).runtime_status is RuntimeStatus.SUSPENDED  # type: ignore[union-attr]
    engine.resume(instance_id, "go on")
    assert _finish(engine, instance_id) == (RuntimeStatus.COMPLETED, {"got": "while suspended"})


def test_non_deterministic_orchestrator_fails_naming_both_names(make_engine: EngineFactory) -> None:
    engine = make_engine()
    instance_id = engine.start_new("changes_its_mind")
    status, output = _finish(engine, instance_id)
    assert status is RuntimeStatus.FAILED
    assert "echo" in str(output) and "square" in str(output)


def test_client_errors_and_management(make_engine: EngineFactory) -> None:
    engine = make_engine()
    with pytest.raises(FunctionNotFoundError):
        engine.start_new("nope")
    instance_id = engine.start_new("wait_event", instance_id="same")
    with pytest.raises(InstanceExistsError):
        engine.start_new("wait_event", instance_id="same")
    running = engine.start_new("wait_event")
    assert wait_until(lambda: engine.get_status(running).runtime_status is RuntimeStatus.RUNNING)  # type: ignore[union-attr]
    assert engine.purge(running) is True  # whatever the status, as DTFx's Azure Storage tracking store
    assert engine.get_status(running) is None and engine.purge(running) is False
    engine.raise_event(instance_id, "go", "1")
    assert _finish(engine, instance_id)[0] is RuntimeStatus.COMPLETED
    first_execution = engine.get_status("same").execution_id  # type: ignore[union-attr]
    again = engine.restart(instance_id, restart_with_new_instance_id=False)
    assert again == "same"
    assert wait_until(
        lambda: (
            engine.get_status("same").execution_id != first_execution  # type: ignore[union-attr]
            and engine.get_status("same").runtime_status is RuntimeStatus.RUNNING
        )  # type: ignore[union-attr]
    )
    engine.raise_event("same", "go", "2")
    assert _finish(engine, "same") == (RuntimeStatus.COMPLETED, {"got": 2})
    other = engine.start_new("chain")
    assert _finish(engine, other)[0] is RuntimeStatus.COMPLETED
    statuses, _ = engine.query(InstanceQuery(runtime_status=(RuntimeStatus.COMPLETED,)))
    assert {s.instance_id for s in statuses} == {"same", other}
    assert engine.purge(other) is True
    assert engine.get_status(other) is None
    assert engine.purge_many(statuses=(RuntimeStatus.COMPLETED,)) == 1
    assert engine.query(InstanceQuery())[0] == []


@pytest.mark.parametrize(("mode", "expected_peak"), [(SchedulingMode.SHIM, 1), (SchedulingMode.IDEAL, 3)])
def test_naive_task_any_window_in_flight(make_engine: EngineFactory, mode: SchedulingMode, expected_peak: int) -> None:
    # K=3 over 12 activities with varied durations. In SHIM mode the extension's sequential-await replay
    # collapses the window: after the initial fill drains, only one activity is ever in flight. IDEAL holds K.
    durations = [0.30, 0.05, 0.20, 0.10, 0.25, 0.05, 0.15, 0.30, 0.10, 0.20, 0.05, 0.15]
    engine = make_engine(mode=mode)
    instance_id = engine.start_new("window", input_json=client_input({"k": 3, "durations": durations}))
    assert _finish(engine, instance_id, 60) == (RuntimeStatus.COMPLETED, list(range(12)))
    starts = engine.stats()["activities_in_flight_at_start"]
    assert len(starts) == 12
    assert max(starts[:3]) == 3  # the initial fill is concurrent in both modes
    after_fill = starts[6:]
    assert max(after_fill) == expected_peak
