"""Crash points of an entity batch (it checkpoints like an orchestration) and of a calling orchestration.

Worker A dies at the armed point (``WorkerKilled``: nothing released, abandoned or deleted); worker B is a new
``Engine`` on the same store; a ``ManualClock`` is pumped so hidden messages reappear after their visibility
timeout. What each point must (and must not) guarantee:

* entity C1/C2 (batch ran, or responses sent, before the history commit): the batch runs again from the
  committed state, so every operation takes effect once; a response may be sent twice (ignored).
* entity C5 (history and row written, messages not deleted): the messages come back. Requests an orchestration
  sent are recognised by the sorter and dropped; a client's signal has no sender to recognise and runs twice.
* orchestration C2 (request sent, the orchestration's own checkpoint lost): the retried episode has a new
  current time, so it sends a NEW request (new id and timestamp) and the operation runs twice; the response
  to the lost request has no EventSent in the history: it is abandoned as out of order, as DTFx does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from durable_local.clock import ManualClock
from durable_local.engine import Engine
from durable_local.entities.ids import EntityId
from durable_local.faults import CrashPoint, FaultInjector
from durable_local.model import RuntimeStatus
from durable_local.storage import StoreBundle, open_memory_store
from tests.engine.runtime.conftest import T0, client_input, fast_settings, wait_until
from tests.engine.runtime.world import pump_until

from .apps import Recorder


class World:
    def __init__(self) -> None:
        self.clock = ManualClock(T0)
        self.store: StoreBundle = open_memory_store(self.clock)
        self.recorder = Recorder()
        self.engines: list[Engine] = []

    def engine(self, faults: FaultInjector | None = None) -> Engine:
        engine = Engine(
            self.recorder.registry(), store=self.store, settings=fast_settings(), clock=self.clock, faults=faults
        )
        self.engines.append(engine)
        engine.start()
        return engine

    def pump_until(self, done: Callable[[], bool], *, step: float = 20.0, limit: int = 2000) -> bool:
        return pump_until(self.engines, self.clock, done, step=step, limit=limit)

    def finish(self, engine: Engine, instance_id: str) -> Any:
        def terminal() -> bool:
            status = engine.get_status(instance_id)
            return status is not None and status.runtime_status.is_terminal

        assert self.pump_until(terminal)
        status = engine.get_status(instance_id)
        assert status is not None and status.runtime_status is RuntimeStatus.COMPLETED, status
        return json.loads(status.output or "null")

    def tally(self, key: str) -> int | None:
        """The committed state, read from the store (a dead worker cannot read)."""
        row = self.store.tracking.get_instance(EntityId.of("tally", key).scheduler_id)
        return None if row is None else int(json.loads(json.loads(row.input or "{}")["state"]))

    def batches(self, entity: str) -> int:
        return sum(1 for name, _, _ in self.recorder.batches if name == entity)

    def operations(self, entity: str) -> int:
        return sum(size for name, size, _ in self.recorder.batches if name == entity)


@pytest.fixture
def world() -> Iterator[World]:
    w = World()
    yield w
    for engine in w.engines:
        engine.stop(drain_timeout=1)
    w.store.close()


def _killed(engine: Engine) -> None:
    assert wait_until(lambda: engine.is_dead, timeout=20), "the armed crash point was never reached"
    engine.stop(drain_timeout=0)


def _is_entity(instance_id: object) -> bool:
    return isinstance(instance_id, str) and instance_id.startswith("@")


def test_entity_c1_batch_ran_but_nothing_sent_runs_again_from_the_committed_state(world: World) -> None:
    faults = FaultInjector()
    faults.arm(CrashPoint.C1_AFTER_REPLAY, when=lambda c: _is_entity(c["instance_id"]))
    a = world.engine(faults)
    instance_id = a.start_new("adder", input_json=client_input({"key": "c1", "n": 3}))
    _killed(a)
    assert world.batches("@tally@c1") == 1 and world.tally("c1") is None  # ran, not committed
    b = world.engine()
    assert world.finish(b, instance_id) == [1, 2, 3]
    assert world.tally("c1") == 3
    assert world.batches("@tally@c1") == 4  # the first batch ran twice


def test_entity_c2_response_sent_before_the_checkpoint_counts_once(world: World) -> None:
    faults = FaultInjector()
    faults.arm(CrashPoint.C2_AFTER_OUTBOUND_MESSAGE, when=lambda c: _is_entity(c["message"].sender))
    a = world.engine(faults)
    instance_id = a.start_new("adder", input_json=client_input({"key": "c2", "n": 3}))
    _killed(a)
    b = world.engine()
    # The orchestration may go on with the first response while the entity's own message is still hidden: its
    # next request then waits in the entity's sorter until the redelivered first one ran again.
    assert world.finish(b, instance_id) == [1, 2, 3]
    assert world.pump_until(lambda: world.tally("c2") == 3 and b.stats()["pending_messages"] == 0)
    assert world.operations("@tally@c2") == 4  # the first operation ran twice, once from the committed state


def test_entity_c5_redelivered_requests_of_an_orchestration_are_dropped_but_a_client_signal_runs_again(
    world: World,
) -> None:
    faults = FaultInjector()
    faults.arm(CrashPoint.C5_AFTER_INSTANCE_UPDATE, when=lambda c: _is_entity(c["instance_id"]))
    a = world.engine(faults)
    instance_id = a.start_new("adder", input_json=client_input({"key": "c5", "n": 2}))
    _killed(a)
    b = world.engine()
    assert world.finish(b, instance_id) == [1, 2]
    assert world.pump_until(lambda: b.stats()["pending_messages"] == 0 and b.stats()["active_sessions"] == 0)
    assert world.tally("c5") == 2  # the redelivered request was recognised by the sorter
    b.stop(drain_timeout=1)  # alive, it could own the client entity's queue and run the signal with no fault armed

    faults = FaultInjector()
    faults.arm(CrashPoint.C5_AFTER_INSTANCE_UPDATE, when=lambda c: _is_entity(c["instance_id"]))
    c = world.engine(faults)
    c.signal_entity(EntityId.of("tally", "client"), "add", json.dumps(json.dumps(1)))
    _killed(c)
    world.engine()  # worker D picks the redelivered signal up
    assert world.pump_until(lambda: world.tally("client") == 2)  # at-least-once for client signals


def test_orchestration_c2_request_sent_then_crash_sends_a_new_request(world: World) -> None:
    faults = FaultInjector()
    faults.arm(CrashPoint.C2_AFTER_OUTBOUND_MESSAGE, when=lambda c: _is_entity(c["message"].instance_id))
    a = world.engine(faults)
    instance_id = a.start_new("adder", input_json=client_input({"key": "o2", "n": 1}))
    _killed(a)
    observed = FaultInjector()
    b = world.engine(observed)
    answers = world.finish(b, instance_id)
    assert world.tally("o2") == 2  # the lost episode's request ran too: at-least-once, like activities
    assert answers in ([1], [2])  # whichever request the entity ran second answers the retried episode
    assert world.pump_until(lambda: observed.hits(CrashPoint.C7_OUT_OF_ORDER_MESSAGE) >= 1)
    history = b.get_status(instance_id, show_history=True)
    assert history is not None and history.history is not None
    sent = [e for e in history.history if e["EventType"] == 14]
    assert len(sent) == 1  # the committed history knows only the retried request
