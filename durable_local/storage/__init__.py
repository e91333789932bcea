"""Storage for the local durable engine: queues and tracking tables, in memory or in one SQLite file.

Open a store with ``open_store(spec, clock)`` (``"memory"`` or a SQLite file path), or explicitly with
``open_memory_store`` / ``open_sqlite_store``. The result bundles a ``QueueService`` and a ``TrackingStore``
(the Protocols in ``durable_local.ports``); close it when done.

Like Azure Storage, queue operations and tracking writes are *not* transactional with each other: each
public method is atomic on its own, and the caller (the session manager's checkpoint) sequences them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from durable_local.ports import Clock, QueueService, TrackingStore
from durable_local.storage.memory_queues import MemoryQueueService
from durable_local.storage.memory_tracking import MemoryTrackingStore
from durable_local.storage.queue_rules import MAX_ABANDON_DELAY, abandon_delay, is_poison
from durable_local.storage.sqlite_db import SqliteDatabase
from durable_local.storage.sqlite_queues import SqliteQueueService
from durable_local.storage.sqlite_tracking import SqliteTrackingStore

__all__ = [
    "MAX_ABANDON_DELAY",
    "MEMORY_SPEC",
    "StoreBundle",
    "abandon_delay",
    "is_poison",
    "open_memory_store",
    "open_sqlite_store",
    "open_store",
]

MEMORY_SPEC = "memory"


def _nothing() -> None:
    return None


@dataclass(slots=True)
class StoreBundle:
    """A queue service and a tracking store over the same backing storage.

    Usable as a context manager; ``close()`` is idempotent.
    """

    queues: QueueService
    tracking: TrackingStore
    description: str = MEMORY_SPEC
    """``"memory"`` or the SQLite file path (for logs and diagnostics)."""
    _closer: Callable[[], None] = field(default=_nothing, repr=False)

    def close(self) -> None:
        self._closer()

    def __enter__(self) -> StoreBundle:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def open_memory_store(clock: Clock) -> StoreBundle:
    """Queues and tracking in memory (lost when the process ends)."""
    return StoreBundle(queues=MemoryQueueService(clock), tracking=MemoryTrackingStore(clock))


def open_sqlite_store(path: str | Path, clock: Clock, *, synchronous: str = "NORMAL") -> StoreBundle:
    """Queues and tracking in one SQLite file (WAL), creating the file and its parent directories.

    Args:
        path: the database file.
        clock: time source for visibility and checkpoint times.
        synchronous: ``"NORMAL"`` (survives a killed process) or ``"FULL"`` (also survives power loss).
    """
    db = SqliteDatabase(path, synchronous=synchronous)
    return StoreBundle(
        queues=SqliteQueueService(db, clock),
        tracking=SqliteTrackingStore(db, clock),
        description=str(db.path),
        _closer=db.close,
    )


def open_store(spec: str, clock: Clock) -> StoreBundle:
    """``"memory"`` (any case) → in memory; anything else is a SQLite file path."""
    text = spec.strip()
    if not text:
        raise ValueError('store spec is empty: use "memory" or a SQLite file path')
    if text.lower() == MEMORY_SPEC:
        return open_memory_store(clock)
    return open_sqlite_store(text, clock)
