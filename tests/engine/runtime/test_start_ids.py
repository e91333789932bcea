"""``DurableClient.StartNewAsync``: the instance ids the extension refuses."""

from __future__ import annotations

import pytest

from durable_local.engine import Engine
from durable_local.model import RuntimeStatus

from .rules_app import engine, finish

__all__ = ["engine"]


_CHAR_RULE = "instanceId (Parameter 'Orchestration instance ids must not contain /, \\, #, ?, or control characters.')"
_BAD_START_IDS = {
    "@counter@x": "instanceId (Parameter 'Orchestration instance ids must not start with @.')",
    "a/b": _CHAR_RULE,
    "a\\b": _CHAR_RULE,
    "a#b": _CHAR_RULE,
    "a?b": _CHAR_RULE,
    "a\x01b": _CHAR_RULE,
    "a\x85b": _CHAR_RULE,
    "b" * 257: "Instance ID lengths must not exceed 256 characters.",
}


@pytest.mark.parametrize("instance_id", list(_BAD_START_IDS), ids=lambda i: repr(i[:12]))
def test_start_refuses_the_ids_the_extension_refuses(engine: Engine, instance_id: str) -> None:
    with pytest.raises(ValueError) as raised:
        engine.start_new("child", instance_id=instance_id)
    assert str(raised.value) == _BAD_START_IDS[instance_id]
    assert engine.get_status(instance_id) is None


def test_start_accepts_ids_at_the_limits(engine: Engine) -> None:
    for instance_id in ("b" * 256, "a@b", "a b", "ä-é"):
        engine.start_new("child", instance_id=instance_id)
        assert finish(engine, instance_id) == (RuntimeStatus.COMPLETED, "child")
