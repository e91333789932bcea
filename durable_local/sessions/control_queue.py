"""The control-queue wrapper (DTFx ``Messaging/ControlQueue.cs`` + ``TaskHubQueue.cs`` semantics).

* ``get_messages`` reads a batch (``control_queue_batch_size``, hidden for ``control_queue_visibility_timeout``),
  pausing while the worker already buffers ``control_queue_buffer_threshold`` messages (back-pressure) and
  backing off 50 ms → doubling → ``max_queue_polling_interval`` while the queue is empty. It returns the batch
  sorted by insertion time, then by the client's sequence number.
* Every buffered message is tracked by message id in ``PendingMessageTracker`` (DTFx
  ``stats.PendingOrchestratorMessages``, shared by all control queues of a worker). A message dequeued again
  while still buffered (its visibility expired) is a duplicate dequeue: it is kept, because only the newest
  copy's pop receipt can delete it.
* ``abandon`` makes a message visible again after ``abandon_delay(dequeue_count)`` (2, 4, … 600 s); at
  600 s it is logged as poison, never deleted. ``delete`` removes it. Both stop tracking it.
* ``release`` stops the dequeue loop (``is_released``), e.g. on lease loss or shutdown.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

from durable_local.faults import CrashPoint, FaultInjector
from durable_local.ports import MessageGoneError, Queue, QueueMessage
from durable_local.settings import EngineSettings
from durable_local.storage.queue_rules import abandon_delay, is_poison

_log = logging.getLogger(__name__)


class PendingMessageTracker:
    """Message ids currently buffered in memory by this worker (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: dict[str, str] = {}

    def try_add(self, message_id: str, queue_name: str) -> bool:
        """Track ``message_id``; False if it was already tracked (a duplicate dequeue)."""
        with self._lock:
            if message_id in self._ids:
                return False
            self._ids[message_id] = queue_name
            return True

    def remove(self, message_id: str) -> None:
        with self._lock:
            self._ids.pop(message_id, None)

    def count(self) -> int:
        with self._lock:
            return len(self._ids)

    def __contains__(self, message_id: object) -> bool:
        with self._lock:
            return message_id in self._ids


class PollingBackoff:
    """Empty-queue back-off: starts at the minimum, doubles up to the maximum; reset by a non-empty read."""

    def __init__(self, minimum: timedelta, maximum: timedelta) -> None:
        self._min = minimum.total_seconds()
        self._max = maximum.total_seconds()
        self._next = self._min

    def next_delay(self) -> float:
        """The delay to wait now (seconds); the following one doubles."""
        delay = self._next
        self._next = min(self._next * 2, self._max)
        return delay

    def reset(self) -> None:
        self._next = self._min


class ControlQueue:
    """One owned control queue (partition) of this worker."""

    def __init__(
        self,
        queue: Queue,
        *,
        partition: int,
        settings: EngineSettings,
        pending: PendingMessageTracker,
        faults: FaultInjector | None = None,
    ) -> None:
        self.queue = queue
        self.partition = partition
        self._settings = settings
        self._pending = pending
        self._faults = faults or FaultInjector()
        self._released = threading.Event()
        self._wakeup = threading.Event()
        self._backoff = PollingBackoff(settings.min_queue_polling_interval, settings.max_queue_polling_interval)
        self.buffer_full_waits = 0
        """How many times a read waited because the buffer threshold was reached (for tests and stats)."""
        self.empty_polls = 0

    @property
    def name(self) -> str:
        return self.queue.name

    @property
    def is_released(self) -> bool:
        return self._released.is_set()

    def release(self, reason: str | None = None, caller: str = "") -> None:
        """Stop receiving: wakes a waiting ``get_messages``, which then returns an empty list."""
        if not self._released.is_set():
            _log.info("control queue %s released (reason=%s, caller=%s)", self.name, reason, caller)
        self._released.set()

    def get_messages(self, stop: threading.Event | None = None) -> list[QueueMessage]:
        """Block until a batch arrives, the queue is released, or ``stop`` is set (then: empty list)."""
        limit_logged = False
        waiting_logged = False
        while not self._stopped(stop):
            buffered = self._pending.count()
            if buffered >= self._settings.control_queue_buffer_threshold:
                if not limit_logged:
                    limit_logged = True
                    _log.info("%s: %d messages buffered, pausing dequeue (back-pressure)", self.name, buffered)
                self.buffer_full_waits += 1
                self._wait(self._settings.buffer_full_delay.total_seconds(), stop)
                continue
            limit_logged = False
            batch = self.queue.get_messages(
                self._settings.control_queue_batch_size, self._settings.control_queue_visibility_timeout
            )
            if not batch:
                if not waiting_logged:
                    waiting_logged = True
                    _log.debug("%s: waiting for more messages", self.name)
                self.empty_polls += 1
                self._wait(self._backoff.next_delay(), stop)
                continue
            self._backoff.reset()
            for message in batch:
                if not self._pending.try_add(message.message_id, self.name):
                    # Already buffered: its visibility timeout expired before we processed it. Keep this copy,
                    # which holds the only valid pop receipt; MessageCollection replaces the old one.
                    _log.info("%s: duplicate dequeue of message %s", self.name, message.message_id)
                    self._faults.hit(CrashPoint.C12_DUPLICATE_DEQUEUE, message=message)
            batch.sort(key=lambda m: (m.inserted_on, m.body.sequence_number))
            return batch
        self._released.set()
        return []

    def abandon(self, message: QueueMessage) -> None:
        """Make ``message`` visible again after the abandon back-off; it is never deleted here."""
        self._pending.remove(message.message_id)
        delay = abandon_delay(message.dequeue_count)
        if is_poison(delay):
            _log.warning(
                "poison message %s on %s (dequeue count %d): visible again in %s, not deleted",
                message.message_id,
                self.name,
                message.dequeue_count,
                delay,
            )
            self._faults.hit(CrashPoint.C14_POISON_MESSAGE, message=message, delay=delay)
        try:
            updated = self.queue.update_visibility(message.message_id, message.pop_receipt, delay)
        except MessageGoneError:
            _log.info("%s: abandon of %s skipped, message gone or receipt stale", self.name, message.message_id)
            return
        message.pop_receipt = updated.pop_receipt
        message.next_visible_on = updated.next_visible_on

    def delete(self, message: QueueMessage) -> None:
        self._pending.remove(message.message_id)
        try:
            self.queue.delete(message.message_id, message.pop_receipt)
        except MessageGoneError:
            # Another copy (newer pop receipt) owns it, or it was already deleted: nothing to do.
            _log.info("%s: delete of %s skipped, message gone or receipt stale", self.name, message.message_id)

    def _stopped(self, stop: threading.Event | None) -> bool:
        return self._released.is_set() or (stop is not None and stop.is_set())

    def wake(self) -> None:
        """A message was just added to this queue by this process: end the polling back-off now.

        Azure Storage has no such signal (DTFx only polls); in one process it removes polling latency without
        changing what is delivered (visibility still decides).
        """
        self._wakeup.set()

    def _wait(self, seconds: float, stop: threading.Event | None) -> None:
        # Real-time wait that a release, an engine stop or a wake-up cuts short. Not the Clock: a ManualClock's
        # sleep would advance message visibility, which must move only when a test says so.
        deadline = time.monotonic() + seconds
        while not self._stopped(stop):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if self._wakeup.wait(min(remaining, 0.05)):
                self._wakeup.clear()
                self._backoff.reset()
                return
