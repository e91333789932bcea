"""A start with the id of a running instance: DTFx's ``OrchestrationAlreadyExistsException`` (Azure Storage backend,
``ThrowExceptionOnInvalidDedupeStatus = true`` as the extension sets it)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import azure.durable_functions as df
import pytest

from durable_local.clock import SystemClock
from durable_local.engine import Engine
from durable_local.errors import InstanceExistsError
from durable_local.model import FunctionRegistry, RuntimeStatus
from durable_local.storage import open_memory_store

from .conftest import client_input, fast_settings, wait_until
from .rules_app import engine, finish

__all__ = ["engine"]


def test_a_duplicate_start_of_a_running_instance_is_refused_with_dtfx_message(engine: Engine) -> None:
    engine.start_new("sub_with_id", instance_id="dup", input_json=client_input("dup-kid"))
    with pytest.raises(InstanceExistsError) as raised:
        engine.start_new("sub_with_id", instance_id="dup")
    assert str(raised.value) in (
        "An Orchestration instance with the status Pending already exists.",
        "An Orchestration instance with the status Running already exists.",
    )


def _gated(ctx: df.DurableOrchestrationContext) -> Any:
    """Calls ``gate`` with its input: the activity blocks until the test opens the gate of that input."""
    result = yield ctx.call_activity("gate", ctx.get_input())
    return result


def test_with_any_state_a_start_replaces_a_running_instance_and_its_late_results_are_dropped() -> None:
    """``overridableExistingInstanceStates: AnyState``: no dedupe statuses, so DTFx sends the new ExecutionStarted
    and writes the new execution over the Instances row; the replaced execution's activity result arrives later,
    for an execution id that is no longer the instance's, and is dropped."""
    gates = {"first": threading.Event(), "second": threading.Event()}

    def gate(data: str | None) -> str | None:
        key = json.loads(data or "null")
        assert gates[key].wait(20)
        return json.dumps(f"{key} done")

    registry = FunctionRegistry(orchestrators={"gated": df.Orchestrator.create(_gated)}, activities={"gate": gate})
    clock = SystemClock()
    settings = fast_settings(overridable_existing_instance_states="AnyState")
    engine = Engine(registry, store=open_memory_store(clock), settings=settings, clock=clock)
    engine.start()

    def running(other_than: str | None = None, activities: int = 1) -> bool:
        current = engine.get_status("same")
        return (
            current is not None
            and current.runtime_status is RuntimeStatus.RUNNING
            and current.execution_id != other_than
            and engine.counters.snapshot()["activities_in_flight"] >= activities
        )

    try:
        engine.start_new("gated", instance_id="same", input_json=client_input("first"))
        assert wait_until(running)
        old = engine.get_status("same")
        assert old is not None
        engine.start_new("gated", instance_id="same", input_json=client_input("second"))  # no InstanceExistsError
        # The new execution runs (its activity is in flight next to the old one's) ...
        assert wait_until(lambda: running(other_than=old.execution_id, activities=2))
        new = engine.get_status("same")
        assert new is not None
        gates["first"].set()  # ... when the replaced execution's activity completes: its result is dropped
        assert wait_until(lambda: engine.counters.snapshot()["activities_in_flight"] == 1)
        time.sleep(0.2)
        still = engine.get_status("same")
        assert still is not None and (still.execution_id, still.runtime_status) == (
            new.execution_id,
            new.runtime_status,
        )
        gates["second"].set()
        status, output = finish(engine, "same")
        assert (status, output) == (RuntimeStatus.COMPLETED, "second done")
    finally:
        for opened in gates.values():
            opened.set()
        engine.stop(drain_timeout=2)


def test_an_unknown_overridable_states_value_is_refused() -> None:
    with pytest.raises(ValueError, match="overridable_existing_instance_states"):
        fast_settings(overridable_existing_instance_states="Always")
