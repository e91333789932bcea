"""A start with the id of a running instance: DTFx's ``OrchestrationAlreadyExistsException`` (Azure Storage backend,
``ThrowExceptionOnInvalidDedupeStatus = true`` as the extension sets it)."""

from __future__ import annotations

import pytest

from durable_local.engine import Engine
from durable_local.errors import InstanceExistsError

from .conftest import client_input
from .rules_app import engine

__all__ = ["engine"]


def test_a_duplicate_start_of_a_running_instance_is_refused_with_dtfx_message(engine: Engine) -> None:
    engine.start_new("sub_with_id", instance_id="dup", input_json=client_input("dup-kid"))
    with pytest.raises(InstanceExistsError) as raised:
        engine.start_new("sub_with_id", instance_id="dup")
    assert str(raised.value) in (
        "An Orchestration instance with the status Pending already exists.",
        "An Orchestration instance with the status Running already exists.",
    )
