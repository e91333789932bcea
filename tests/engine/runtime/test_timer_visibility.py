"""A durable timer's message becomes visible at its ``FireAt``, measured when the message is sent.

DTFx's Azure Storage backend turns a timer into a control-queue message whose visibility delay is ``FireAt`` less the
clock *when the message is added* (``TaskHubQueue.GetVisibilityDelay`` in DurableTask.AzureStorage): a timer already
due by then is visible at once. The engine once measured the delay from the episode's start and applied it to the
queue's clock at send time, so a clock that moved during the episode (a long episode, or a test's moved clock jumping
forward) pushed the timer out by the jump: a follower's wake, due in the past, waited 15 minutes of wall time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import azure.durable_functions as df
import pytest

from durable_local.clock import ManualClock
from durable_local.engine import Engine
from durable_local.model import FunctionRegistry, RuntimeStatus
from durable_local.storage import open_memory_store

from .conftest import T0, fast_settings, wait_until

JUMP = timedelta(hours=12)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def engine(clock: ManualClock) -> Iterator[Engine]:
    jumped: list[bool] = []

    def jumps_while_it_runs(ctx: df.DurableOrchestrationContext) -> Any:
        due = ctx.current_utc_datetime + timedelta(minutes=15)
        if not jumped:  # the clock moves on while the first episode runs (after "now" was read for it)
            jumped.append(True)
            clock.advance(JUMP)
        yield ctx.create_timer(due)
        return "fired"

    registry = FunctionRegistry(orchestrators={"jumps": df.Orchestrator.create(jumps_while_it_runs)}, activities={})
    running = Engine(registry, store=open_memory_store(clock), settings=fast_settings(), clock=clock)
    running.start()
    yield running
    running.stop(drain_timeout=2)


def test_a_timer_due_before_its_message_is_sent_fires_at_once(engine: Engine, clock: ManualClock) -> None:
    instance_id = engine.start_new("jumps")
    # Nothing else moves the clock: the timer (due 15 minutes after the episode began, 11 h 45 min before the clock
    # now reads) must fire without waiting for the clock to move again.
    assert wait_until(lambda: engine.get_status(instance_id).runtime_status is RuntimeStatus.COMPLETED, 10)  # type: ignore[union-attr]
    status = engine.get_status(instance_id)
    assert status is not None and json.loads(status.output or "null") == "fired"
