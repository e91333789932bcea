"""``SetCustomStatus`` with ``MessagePayloadDataConverter.Serialize(value, 16)``: the 16 KB custom status limit."""

from __future__ import annotations

import json

from durable_local.engine import Engine
from durable_local.history import event_type
from durable_local.model import EventType, RuntimeStatus

from .conftest import client_input
from .rules_app import engine, finish

__all__ = ["engine"]


_TOO_BIG = (
    "Orchestrator function 'status_of_size' failed: The UTF-16 size of the JSON-serialized payload must not "
    "exceed 16 KB. The current payload size is 17 KB."
)


def test_custom_status_of_8703_json_characters_is_accepted(engine: Engine) -> None:
    engine.start_new("status_of_size", instance_id="fits", input_json=client_input("x" * 8701))
    assert finish(engine, "fits") == (RuntimeStatus.COMPLETED, "done")
    status = engine.get_status("fits")
    assert status is not None and status.custom_status == json.dumps("x" * 8701)


def test_custom_status_of_8704_json_characters_fails_the_orchestration(engine: Engine) -> None:
    engine.start_new("status_of_size", instance_id="too-big", input_json=client_input("x" * 8702))
    assert finish(engine, "too-big") == (RuntimeStatus.FAILED, _TOO_BIG)
    # SetCustomStatus throws before the shim replays any action: the activity is never scheduled.
    status = engine.get_status("too-big", show_history=True)
    assert status is not None
    assert EventType.TASK_SCHEDULED not in {event_type(event) for event in status.history or []}


def test_custom_status_size_counts_utf16_code_units_of_unescaped_json(engine: Engine) -> None:
    # Newtonsoft writes "é" as itself (one UTF-16 unit), where Python's json.dumps would write 6 characters.
    engine.start_new("status_of_size", instance_id="accents", input_json=client_input("é" * 8000))
    assert finish(engine, "accents") == (RuntimeStatus.COMPLETED, "done")
    engine.start_new("status_of_size", instance_id="emoji", input_json=client_input("😀" * 4351))
    assert finish(engine, "emoji")[0] is RuntimeStatus.FAILED  # 2 units each: 8,704 units with the quotes
