"""An engine for the extension-rule tests: orchestrators that break the rules, run by the real SDK replay.

Instance ids on start (``DurableClient.StartNewAsync``), sub-orchestration ids
(``DurableOrchestrationContext.CallDurableTaskFunctionAsync``) and the 16 KB custom status limit
(``MessagePayloadDataConverter.Serialize``): an app that breaks them must break locally too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import azure.durable_functions as df
import pytest

from durable_local.clock import SystemClock
from durable_local.engine import Engine
from durable_local.model import FunctionRegistry, RuntimeStatus
from durable_local.ports import InstanceQuery
from durable_local.storage import open_memory_store

from .conftest import fast_settings


def _echo(data: str | None) -> str | None:
    return data


def _child(ctx: df.DurableOrchestrationContext) -> Any:
    value = yield ctx.call_activity("echo", "child")
    return value


def _sub_with_id(ctx: df.DurableOrchestrationContext) -> Any:
    """Calls ``child`` with the id given as input (``<self>``: its own id upper-cased, ``<parent>``: its parent's)."""
    child_id = ctx.get_input()
    if child_id == "<self>":
        child_id = ctx.instance_id.upper()
    elif child_id == "<parent>":
        child_id = ctx.parent_instance_id
    ctx.set_custom_status("calling")
    outcome = yield ctx.call_sub_orchestrator("child", None, child_id)
    return outcome


def _grand(ctx: df.DurableOrchestrationContext) -> Any:
    """Its child calls a grandchild with this instance's id."""
    outcome = yield ctx.call_sub_orchestrator("sub_with_id", "<parent>", f"{ctx.instance_id}-middle")
    return outcome


def _status_of_size(ctx: df.DurableOrchestrationContext) -> Any:
    text = ctx.get_input()
    ctx.set_custom_status(text)
    yield ctx.call_activity("echo", "x")
    return "done"


@pytest.fixture
def engine() -> Iterator[Engine]:
    orchestrators = {
        name: df.Orchestrator.create(fn)
        for name, fn in {
            "child": _child,
            "sub_with_id": _sub_with_id,
            "grand": _grand,
            "status_of_size": _status_of_size,
        }.items()
    }
    registry = FunctionRegistry(orchestrators=orchestrators, activities={"echo": _echo})
    clock = SystemClock()
    running = Engine(registry, store=open_memory_store(clock), settings=fast_settings(), clock=clock)
    running.start()
    yield running
    running.stop(drain_timeout=2)


def instance_ids(engine: Engine) -> set[str]:
    statuses, _ = engine.query(InstanceQuery())
    return {status.instance_id for status in statuses}


def finish(engine: Engine, instance_id: str) -> tuple[RuntimeStatus, Any]:
    status = engine.wait_for_completion(instance_id, 20)
    assert status is not None
    return status.runtime_status, json.loads(status.output) if status.output is not None else None
