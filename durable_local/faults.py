"""Named crash points of the Azure Storage backend and a fault injector.

The points and their consequences in DTFx are the table "Crash points C1 to C15" in ``docs/durable-protocol.md``.

The dispatchers call ``FaultInjector.hit(point, **context)`` at exactly the places listed in ``CrashPoint``.
Unarmed, a hit only counts. Armed, it runs the armed action; the default action kills the worker: it raises
``WorkerKilled`` (a ``BaseException``, so ordinary ``except Exception`` handlers cannot swallow it) and
marks the injector dead. From then on every guarded storage call raises ``WorkerKilled`` too, so the
worker's other threads stop the way a process death would: nothing is released, abandoned or deleted,
and in-memory state is simply dropped. A new ``Engine`` on the same store recovers.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from durable_local.model import InstanceRecord, TaskMessage
from durable_local.ports import (
    HistoryBatch,
    InstancePage,
    InstanceQuery,
    OrchestrationHistory,
    Queue,
    QueueMessage,
    QueueService,
    TrackingStore,
)

_log = logging.getLogger(__name__)


class CrashPoint(enum.Enum):
    """The crash-point table of ``docs/durable-protocol.md``. Values are the table's numbers."""

    C1_AFTER_REPLAY = "C1"
    """Episode replayed, nothing sent yet."""
    C2_AFTER_OUTBOUND_MESSAGE = "C2"
    """After each outbound message is sent, before the history commit (context: index, total, kind)."""
    C3_BETWEEN_HISTORY_BATCHES = "C3"
    """After a non-final history batch was written (context: batch_index)."""
    C4_AFTER_HISTORY = "C4"
    """History committed, Instances row not yet updated."""
    C5_AFTER_INSTANCE_UPDATE = "C5"
    """Instances row updated, triggering messages not yet deleted."""
    C6_BEFORE_HISTORY_COMMIT = "C6"
    """Just before the history write: the place where another worker (split brain) can move the ETag."""
    C7_OUT_OF_ORDER_MESSAGE = "C7"
    """A response whose TaskScheduled is not in history is about to be abandoned."""
    C8_ACTIVITY_AFTER_EXECUTE = "C8"
    """Activity ran, its response not yet enqueued."""
    C9_ACTIVITY_AFTER_RESPONSE = "C9"
    """Activity response enqueued, work-item message not yet deleted."""
    C10_CLIENT_AFTER_START_ENQUEUE = "C10"
    """Client enqueued ExecutionStarted, Pending row not yet written."""
    C11_DUPLICATE_START_DISCARDED = "C11"
    """A redundant ExecutionStarted is about to be discarded by de-duplication."""
    C12_DUPLICATE_DEQUEUE = "C12"
    """A message already buffered was dequeued again (visibility expired while buffered)."""
    C13_STALE_GENERATION_DISCARDED = "C13"
    """A message for another execution (e.g. before continue-as-new) is being discarded."""
    C14_POISON_MESSAGE = "C14"
    """An abandoned message reached the 600 s visibility back-off (logged, never deleted)."""
    C15_DRAIN_TIMEOUT = "C15"
    """A partition drain timed out with sessions still active."""


class WorkerKilled(BaseException):
    """The simulated process death. Only the engine's thread entry points catch it (to exit quietly)."""


Predicate = Callable[[dict[str, Any]], bool]
Action = Callable[[dict[str, Any]], None]


@dataclass(slots=True)
class _Arming:
    times: int
    when: Predicate | None
    action: Action | None


class FaultInjector:
    """Arms crash points; counts every hit; kills the worker when an armed point fires."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: dict[CrashPoint, list[_Arming]] = {}
        self._hits: Counter[CrashPoint] = Counter()
        self._fired: Counter[CrashPoint] = Counter()
        self._dead = threading.Event()

    def arm(
        self,
        point: CrashPoint,
        *,
        times: int = 1,
        when: Predicate | None = None,
        action: Action | None = None,
    ) -> None:
        """Fire ``point`` on its next ``times`` hits whose context satisfies ``when``.

        ``action`` replaces the default (kill the worker); it receives the hit's context and may raise.
        """
        if times < 1:
            raise ValueError(f"times must be at least 1, got {times}")
        with self._lock:
            self._armed.setdefault(point, []).append(_Arming(times, when, action))

    def hit(self, point: CrashPoint, **context: Any) -> None:
        """Record a pass through ``point``; fire it if armed (see ``arm``)."""
        self.check_alive()
        chosen: _Arming | None = None
        with self._lock:
            self._hits[point] += 1
            for arming in self._armed.get(point, []):
                if arming.times > 0 and (arming.when is None or arming.when(context)):
                    arming.times -= 1
                    chosen = arming
                    break
            if chosen is not None:
                self._fired[point] += 1
        if chosen is None:
            return
        if chosen.action is not None:
            chosen.action(context)
            return
        _log.warning("fault injection: worker killed at %s (%s)", point.value, context)
        self.kill()

    def kill(self) -> None:
        """Kill the worker now (raises ``WorkerKilled``)."""
        self._dead.set()
        raise WorkerKilled

    @property
    def dead(self) -> bool:
        return self._dead.is_set()

    def check_alive(self) -> None:
        """Raise ``WorkerKilled`` if the worker was killed: a dead process performs no further I/O."""
        if self._dead.is_set():
            raise WorkerKilled

    def hits(self, point: CrashPoint) -> int:
        with self._lock:
            return self._hits[point]

    def fired(self, point: CrashPoint) -> int:
        with self._lock:
            return self._fired[point]


# --------------------------------------------------------------------------------------------------
# Guards: storage views that refuse every call once the worker is dead.


class GuardedQueue:
    def __init__(self, inner: Queue, faults: FaultInjector) -> None:
        self._inner = inner
        self._faults = faults

    @property
    def name(self) -> str:
        return self._inner.name

    def add(self, message: TaskMessage, *, visibility_delay: timedelta = timedelta(0)) -> str:
        self._faults.check_alive()
        return self._inner.add(message, visibility_delay=visibility_delay)

    def get_messages(self, max_count: int, visibility_timeout: timedelta) -> list[QueueMessage]:
        self._faults.check_alive()
        return self._inner.get_messages(max_count, visibility_timeout)

    def delete(self, message_id: str, pop_receipt: str) -> None:
        self._faults.check_alive()
        self._inner.delete(message_id, pop_receipt)

    def update_visibility(self, message_id: str, pop_receipt: str, visibility_timeout: timedelta) -> QueueMessage:
        self._faults.check_alive()
        return self._inner.update_visibility(message_id, pop_receipt, visibility_timeout)

    def approximate_count(self) -> int:
        return self._inner.approximate_count()


class GuardedQueueService:
    def __init__(self, inner: QueueService, faults: FaultInjector) -> None:
        self._inner = inner
        self._faults = faults

    def get_queue(self, name: str) -> Queue:
        return GuardedQueue(self._inner.get_queue(name), self._faults)

    def delete_queue(self, name: str) -> None:
        self._faults.check_alive()
        self._inner.delete_queue(name)


class GuardedTrackingStore:
    def __init__(self, inner: TrackingStore, faults: FaultInjector) -> None:
        self._inner = inner
        self._faults = faults

    def get_history(self, instance_id: str, expected_execution_id: str | None = None) -> OrchestrationHistory:
        self._faults.check_alive()
        return self._inner.get_history(instance_id, expected_execution_id)

    def write_history_batch(self, batch: HistoryBatch, expected_etag: str | None) -> str:
        self._faults.check_alive()
        return self._inner.write_history_batch(batch, expected_etag)

    def get_instance(self, instance_id: str) -> InstanceRecord | None:
        self._faults.check_alive()
        return self._inner.get_instance(instance_id)

    def get_instances(self, instance_ids: Iterable[str]) -> list[InstanceRecord]:
        self._faults.check_alive()
        return self._inner.get_instances(instance_ids)

    def set_new_execution(self, record: InstanceRecord, *, overwrite: bool) -> bool:
        self._faults.check_alive()
        return self._inner.set_new_execution(record, overwrite=overwrite)

    def update_instance(self, record: InstanceRecord) -> None:
        self._faults.check_alive()
        self._inner.update_instance(record)

    def query_instances(self, query: InstanceQuery) -> InstancePage:
        self._faults.check_alive()
        return self._inner.query_instances(query)

    def purge_instance(self, instance_id: str) -> bool:
        self._faults.check_alive()
        return self._inner.purge_instance(instance_id)


__all__ = [
    "CrashPoint",
    "FaultInjector",
    "GuardedQueue",
    "GuardedQueueService",
    "GuardedTrackingStore",
    "WorkerKilled",
]
