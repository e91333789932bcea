"""A store and a manual clock shared by successive engines ("workers"), and the ``world`` fixture.

Time moves only when ``pump_until`` moves it, once every running engine is quiet, so hidden messages reappear
after their visibility timeouts without real waiting.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from durable_local.clock import ManualClock
from durable_local.engine import Engine
from durable_local.faults import FaultInjector
from durable_local.model import RuntimeStatus
from durable_local.storage import StoreBundle, open_memory_store

from .apps import Activities
from .conftest import T0, fast_settings, wait_until


def pump_until(
    engines: list[Engine], clock: ManualClock, done: Callable[[], bool], *, step: float = 20.0, limit: int = 2000
) -> bool:
    """Advance ``clock`` by ``step`` seconds at a time (letting the engines run between) until ``done``.

    Time moves only once every running engine is quiet (or after 5 s of real time, so a wedged state
    still progresses): advancing while work is merely slow (a loaded CI machine) would expire the
    visibility timeouts of messages still being processed and run activities twice.
    """
    for _ in range(limit):
        if done():
            return True
        time.sleep(0.002)
        quiet = wait_until(lambda: all(e.is_quiet() for e in engines if e.is_running), timeout=5)
        if done():
            return True
        if quiet:  # advancing past a busy engine's visibility timeout would hand its work out twice
            clock.advance(step)
    return done()


class World:
    """One store and clock shared by successive workers."""

    def __init__(self) -> None:
        self.clock = ManualClock(T0)
        self.store: StoreBundle = open_memory_store(self.clock)
        self.activities = Activities()
        self.engines: list[Engine] = []

    def engine(
        self, faults: FaultInjector | None = None, *, start: bool = True, activities: bool = True, **overrides: Any
    ) -> Engine:
        engine = Engine(
            self.activities.registry(),
            store=self.store,
            settings=fast_settings(**overrides),
            clock=self.clock,
            faults=faults,
        )
        self.engines.append(engine)
        if start:
            engine.start(run_activities=activities)
        return engine

    def pump_until(self, done: Callable[[], bool], *, step: float = 20.0, limit: int = 2000) -> bool:
        return pump_until(self.engines, self.clock, done, step=step, limit=limit)

    def finish(self, engine: Engine, instance_id: str) -> tuple[RuntimeStatus, Any]:
        def terminal() -> bool:
            status = engine.get_status(instance_id)
            return status is not None and status.runtime_status.is_terminal

        assert self.pump_until(terminal)
        status = engine.get_status(instance_id)
        assert status is not None
        return status.runtime_status, json.loads(status.output) if status.output else None

    def calls(self, key: str) -> int:
        return self.activities.calls[key]


def open_world() -> Iterator[World]:
    """The ``world`` fixture's body (the fixture lives in conftest.py): stops every engine, closes the store."""
    w = World()
    yield w
    for engine in w.engines:
        engine.stop(drain_timeout=1)
    w.store.close()
