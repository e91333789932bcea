"""Fixtures for the runtime tests: a manual clock, a memory store, fast settings, message helpers."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durable_local import history
from durable_local.clock import ManualClock
from durable_local.model import TaskMessage
from durable_local.sessions.control_queue import ControlQueue, PendingMessageTracker
from durable_local.sessions.partitioning import control_queue_name
from durable_local.settings import EngineSettings
from durable_local.storage import StoreBundle, open_memory_store

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def fast_settings(**overrides: object) -> EngineSettings:
    """Settings whose real-time waits are milliseconds (visibility timeouts stay DTFx-sized: clock time)."""
    values: dict[str, object] = {
        "min_queue_polling_interval": timedelta(milliseconds=1),
        "max_queue_polling_interval": timedelta(milliseconds=10),
        "buffer_full_delay": timedelta(milliseconds=5),
        "prefetch_retry_delay": timedelta(milliseconds=5),
        "requeue_delay": timedelta(milliseconds=20),
        "dequeue_error_delay": timedelta(milliseconds=5),
        "drain_poll_interval": timedelta(milliseconds=5),
    }
    values.update(overrides)
    return EngineSettings(**values)  # type: ignore[arg-type]


def client_input(value: object) -> str:
    """The raw input a Python ``DurableOrchestrationClient.start_new(client_input=value)`` makes the host store:
    the SDK posts ``json.dumps(value)`` as a JSON string, so the stored text is JSON-encoded twice."""
    return json.dumps(json.dumps(value))


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` (real time) until true; returns its last value. For background-thread effects."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.002)
    return predicate()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def store(clock: ManualClock) -> Iterator[StoreBundle]:
    bundle = open_memory_store(clock)
    yield bundle
    bundle.close()


@pytest.fixture
def settings() -> EngineSettings:
    return fast_settings()


class Queues:
    """Control queue 0 of a test hub plus helpers to put and read real queue messages."""

    def __init__(self, store: StoreBundle, settings: EngineSettings, clock: ManualClock) -> None:
        self.clock = clock
        self.settings = settings
        self.raw = store.queues.get_queue(control_queue_name(settings.hub_name, 0))
        self.tracker = PendingMessageTracker()
        self.control = ControlQueue(self.raw, partition=0, settings=settings, pending=self.tracker)

    def put(self, message: TaskMessage) -> str:
        return self.raw.add(message)

    def read(self) -> list:  # type: ignore[type-arg]
        """One read through the ControlQueue (returns [] quickly when empty)."""
        batch = self.raw.get_messages(32, self.settings.control_queue_visibility_timeout)
        for m in batch:
            self.tracker.try_add(m.message_id, self.raw.name)
        batch.sort(key=lambda m: (m.inserted_on, m.body.sequence_number))
        return batch


@pytest.fixture
def queues(store: StoreBundle, settings: EngineSettings, clock: ManualClock) -> Queues:
    return Queues(store, settings, clock)


def start_message(
    instance_id: str, execution_id: str, *, at: datetime = T0, generation: int = 0, name: str = "orch"
) -> TaskMessage:
    event = history.execution_started(
        timestamp=at, name=name, instance_id=instance_id, execution_id=execution_id, input=None, generation=generation
    )
    return TaskMessage(instance_id, execution_id, event)


def raised_message(instance_id: str, execution_id: str | None, name: str = "go", *, at: datetime = T0) -> TaskMessage:
    return TaskMessage(instance_id, execution_id, history.event_raised(timestamp=at, name=name, input='"x"'))


def completed_message(instance_id: str, execution_id: str | None, task_id: int, *, at: datetime = T0) -> TaskMessage:
    event = history.task_completed(timestamp=at, task_scheduled_id=task_id, result='"r"')
    return TaskMessage(instance_id, execution_id, event)


@pytest.fixture
def world() -> Iterator[Any]:
    """Successive engines over one store and one manual clock (``world.World``)."""
    from .world import open_world  # world.py imports this module

    yield from open_world()
