"""The ports between the engine's layers, as Protocols.

Layering mirrors DurableTask.AzureStorage (``docs/durable-protocol.md`` names the upstream files):

* ``Clock``          — time, injectable so tests never sleep through back-offs.
* ``Queue`` / ``QueueService`` — Azure Storage Queue semantics: visibility timeouts, pop receipts,
  dequeue counts, delayed (timer) messages. Control queues ``{hub}-control-NN`` and ``{hub}-workitems``.
* ``TrackingStore``  — the Instances table and the History table with its sentinel-row ETag.

Implementations live in ``durable_local.storage`` (in memory and SQLite); the session manager and the
dispatchers only see these Protocols.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from durable_local.model import HistoryEvent, InstanceRecord, RuntimeStatus, TaskMessage


class Clock(Protocol):
    """Time source. ``SystemClock`` in production; ``ManualClock`` in tests."""

    def now(self) -> datetime:
        """Current time, timezone-aware UTC."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds`` of this clock's time (a manual clock may return at once
        after advancing, or wait until a test advances it)."""
        ...


# --------------------------------------------------------------------------------------------------
# Queues


@dataclass(slots=True)
class QueueMessage:
    """A dequeued message: the payload plus the Azure Queue bookkeeping."""

    message_id: str
    pop_receipt: str
    dequeue_count: int
    inserted_on: datetime
    next_visible_on: datetime
    body: TaskMessage


class MessageGoneError(Exception):
    """Delete/update with a stale pop receipt or for a message that no longer exists (Azure: 404)."""


class Queue(Protocol):
    @property
    def name(self) -> str: ...

    def add(self, message: TaskMessage, *, visibility_delay: timedelta = timedelta(0)) -> str:
        """Enqueue; the message becomes visible after ``visibility_delay``. Returns the new message id."""
        ...

    def get_messages(self, max_count: int, visibility_timeout: timedelta) -> list[QueueMessage]:
        """Dequeue up to ``max_count`` visible messages, hiding each for ``visibility_timeout`` and
        incrementing its dequeue count; every call issues a fresh pop receipt."""
        ...

    def delete(self, message_id: str, pop_receipt: str) -> None:
        """Delete; raises ``MessageGoneError`` if the pop receipt is stale or the message is gone."""
        ...

    def update_visibility(self, message_id: str, pop_receipt: str, visibility_timeout: timedelta) -> QueueMessage:
        """Make the message visible again after ``visibility_timeout``; returns it with a new pop receipt."""
        ...

    def approximate_count(self) -> int:
        """Number of messages in the queue (visible or not)."""
        ...


class QueueService(Protocol):
    def get_queue(self, name: str) -> Queue:
        """The queue with that name, created if missing."""
        ...

    def delete_queue(self, name: str) -> None: ...


# --------------------------------------------------------------------------------------------------
# Tracking (Instances + History tables)


class EtagConflictError(Exception):
    """The history sentinel's ETag changed since it was read (Azure: 412/409 → split brain)."""


@dataclass(slots=True)
class OrchestrationHistory:
    """The committed history of the current execution, with the sentinel ETag read with it."""

    events: list[HistoryEvent]
    etag: str | None
    """None when no history exists yet (first episode: the first batch is an insert)."""
    execution_id: str | None
    last_checkpoint_time: datetime | None = None
    checkpoint_complete: bool = True
    """False if the last checkpoint stopped between history batches (crash point C3)."""


@dataclass(slots=True)
class InstanceQuery:
    """Filters for listing instances (the HTTP API's list query)."""

    runtime_status: Sequence[RuntimeStatus] = ()
    created_from: datetime | None = None
    created_to: datetime | None = None
    instance_id_prefix: str | None = None
    page_size: int = 100
    continuation_token: str | None = None


@dataclass(slots=True)
class InstancePage:
    instances: list[InstanceRecord]
    continuation_token: str | None = None


@dataclass(slots=True)
class HistoryBatch:
    """One entity-group batch of a checkpoint (Azure: ≤ 99 rows + the sentinel)."""

    instance_id: str
    execution_id: str
    first_sequence_number: int
    """Row key of ``events[0]`` in the history (0 for the first event of the execution)."""
    events: list[HistoryEvent]
    is_final_batch: bool
    extra: dict[str, str] = field(default_factory=dict)


class TrackingStore(Protocol):
    # History -------------------------------------------------------------------------------------
    def get_history(self, instance_id: str, expected_execution_id: str | None = None) -> OrchestrationHistory:
        """History rows of the execution named by the sentinel (or ``expected_execution_id``)."""
        ...

    def write_history_batch(self, batch: HistoryBatch, expected_etag: str | None) -> str:
        """Upsert the batch's rows and the sentinel (``ExecutionId``, ``IsCheckpointComplete``) with
        optimistic concurrency: insert when ``expected_etag`` is None (fails if a sentinel exists), else
        merge only if the sentinel still has that ETag. Returns the new ETag; raises
        ``EtagConflictError`` on a mismatch. A new execution id (continue-as-new) replaces the rows."""
        ...

    # Instances -----------------------------------------------------------------------------------
    def get_instance(self, instance_id: str) -> InstanceRecord | None: ...

    def get_instances(self, instance_ids: Iterable[str]) -> list[InstanceRecord]: ...

    def set_new_execution(self, record: InstanceRecord, *, overwrite: bool) -> bool:
        """Client start: insert the Pending row (or replace an existing one when ``overwrite``).
        Returns False if a row exists and ``overwrite`` is False (Azure: 409, ignored by the caller)."""
        ...

    def update_instance(self, record: InstanceRecord) -> None:
        """Checkpoint: insert-or-merge the row (no ETag)."""
        ...

    def query_instances(self, query: InstanceQuery) -> InstancePage: ...

    def purge_instance(self, instance_id: str) -> bool:
        """Delete the instance row and all its history; True if anything was deleted."""
        ...
