"""Fixtures for the storage contract suites: every store test runs against memory and SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from durable_local.clock import ManualClock
from durable_local.model import InstanceRecord, RuntimeStatus, TaskMessage
from durable_local.storage import StoreBundle, open_memory_store, open_sqlite_store

T0 = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, clock: ManualClock, tmp_path: Path) -> Iterator[StoreBundle]:
    """A fresh store of each kind, sharing the test's manual clock."""
    bundle = open_memory_store(clock) if request.param == "memory" else open_sqlite_store(tmp_path / "hub.db", clock)
    try:
        yield bundle
    finally:
        bundle.close()


def message(instance_id: str = "inst1", n: int = 0, execution_id: str | None = "exec1") -> TaskMessage:
    """A task message whose event carries ``n`` so tests can tell messages apart."""
    return TaskMessage(
        instance_id=instance_id,
        execution_id=execution_id,
        event={"EventType": 5, "EventId": -1, "TaskScheduledId": n, "Result": f'"r{n}"', "IsPlayed": False},
        sequence_number=n,
    )


def event(n: int) -> dict[str, object]:
    return {"EventType": 4, "EventId": n, "Name": f"act{n}", "IsPlayed": False, "Timestamp": "2024-01-01T00:00:00Z"}


def record(
    instance_id: str,
    *,
    status: RuntimeStatus = RuntimeStatus.PENDING,
    created: datetime = T0,
    execution_id: str = "exec1",
    **extra: object,
) -> InstanceRecord:
    return InstanceRecord(
        instance_id=instance_id,
        name="orchestrator",
        execution_id=execution_id,
        status=status,
        created_time=created,
        last_updated_time=created,
        **extra,  # type: ignore[arg-type]
    )
