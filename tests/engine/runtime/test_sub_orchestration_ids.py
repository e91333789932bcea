"""``DurableOrchestrationContext.CallDurableTaskFunctionAsync``: the sub-orchestration ids it refuses."""

from __future__ import annotations

import pytest

from durable_local.engine import Engine
from durable_local.history import event_type
from durable_local.model import EventType, RuntimeStatus

from .conftest import client_input, wait_until
from .rules_app import engine, instance_ids

__all__ = ["engine"]


def _waiting_on_nothing(engine: Engine, instance_id: str, name: str) -> None:
    """The instance ran its episode (the custom status comes with the checkpoint), stays Running, and its history
    holds no sub-orchestration: the call was dropped, not scheduled and not failed."""
    assert wait_until(lambda: getattr(engine.get_status(instance_id), "custom_status", None) == '"calling"')
    status = engine.get_status(instance_id, show_history=True)
    assert status is not None
    assert (status.name, status.runtime_status) == (name, RuntimeStatus.RUNNING)
    kinds = {event_type(event) for event in status.history or []}
    assert EventType.SUB_ORCHESTRATION_INSTANCE_CREATED not in kinds
    assert EventType.EXECUTION_COMPLETED not in kinds


@pytest.mark.parametrize("child_id", ["<self>", "@counter@zz"])
def test_an_invalid_sub_orchestration_id_schedules_nothing_and_the_call_never_completes(
    engine: Engine, child_id: str
) -> None:
    # The extension's ArgumentException is thrown inside the async CallDurableTaskFunctionAsync, so it faults the
    # task the shim awaits, and ProcessAsyncActionsV2 swallows it: no child, no failure, the call never completes.
    engine.start_new("sub_with_id", instance_id="subber", input_json=client_input(child_id))
    _waiting_on_nothing(engine, "subber", "sub_with_id")
    assert instance_ids(engine) == {"subber"}


def test_a_grandchild_with_the_parents_id_is_not_started(engine: Engine) -> None:
    engine.start_new("grand", instance_id="g1")
    assert wait_until(lambda: engine.get_status("g1-middle") is not None)
    _waiting_on_nothing(engine, "g1-middle", "sub_with_id")
    assert instance_ids(engine) == {"g1", "g1-middle"}
    grand = engine.get_status("g1")
    assert grand is not None and (grand.name, grand.runtime_status) == ("grand", RuntimeStatus.RUNNING)
