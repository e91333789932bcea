"""Azure Storage Queue semantics in memory.

One lock per service guards every queue: operations are tiny, and a single lock makes each call atomic the
way one Azure REST call is. Messages are kept in insertion order (a dict keeps it); ``get_messages`` walks
them oldest first and takes the visible ones, so a message whose visibility expired keeps its original
place in the queue (Azure gives no ordering guarantee; oldest-first is the useful, deterministic choice).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta

from durable_local.model import TaskMessage
from durable_local.ports import Clock, MessageGoneError, QueueMessage
from durable_local.storage.codec import clone_task_message
from durable_local.storage.queue_rules import (
    new_message_id,
    new_pop_receipt,
    validate_get_args,
    validate_queue_name,
    validate_timeout,
)


@dataclass(slots=True)
class _Stored:
    message_id: str
    pop_receipt: str | None
    dequeue_count: int
    inserted_on: datetime
    next_visible_on: datetime
    body: TaskMessage

    def snapshot(self) -> QueueMessage:
        assert self.pop_receipt is not None  # only dequeued/updated messages are handed out
        return QueueMessage(
            message_id=self.message_id,
            pop_receipt=self.pop_receipt,
            dequeue_count=self.dequeue_count,
            inserted_on=self.inserted_on,
            next_visible_on=self.next_visible_on,
            body=clone_task_message(self.body),
        )


class MemoryQueue:
    """A handle on one named queue of a ``MemoryQueueService``."""

    def __init__(self, service: MemoryQueueService, name: str) -> None:
        self._service = service
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def _messages(self) -> dict[str, _Stored]:
        # A handle outlives delete_queue: the next call simply recreates the (empty) queue.
        return self._service._queues.setdefault(self._name, {})

    def add(self, message: TaskMessage, *, visibility_delay: timedelta = timedelta(0)) -> str:
        validate_timeout(visibility_delay, "visibility_delay")
        body = clone_task_message(message)
        with self._service._lock:
            now = self._service._clock.now()
            message_id = new_message_id()
            self._messages()[message_id] = _Stored(message_id, None, 0, now, now + visibility_delay, body)
            return message_id

    def get_messages(self, max_count: int, visibility_timeout: timedelta) -> list[QueueMessage]:
        validate_get_args(max_count, visibility_timeout)
        taken: list[QueueMessage] = []
        with self._service._lock:
            now = self._service._clock.now()
            for stored in self._messages().values():
                if stored.next_visible_on > now:
                    continue
                stored.dequeue_count += 1
                stored.pop_receipt = new_pop_receipt()
                stored.next_visible_on = now + visibility_timeout
                taken.append(stored.snapshot())
                if len(taken) >= max_count:
                    break
        return taken

    def delete(self, message_id: str, pop_receipt: str) -> None:
        with self._service._lock:
            messages = self._messages()
            self._check_receipt(messages, message_id, pop_receipt)
            del messages[message_id]

    def update_visibility(self, message_id: str, pop_receipt: str, visibility_timeout: timedelta) -> QueueMessage:
        validate_timeout(visibility_timeout, "visibility_timeout")
        with self._service._lock:
            stored = self._check_receipt(self._messages(), message_id, pop_receipt)
            stored.pop_receipt = new_pop_receipt()
            stored.next_visible_on = self._service._clock.now() + visibility_timeout
            return stored.snapshot()

    def approximate_count(self) -> int:
        with self._service._lock:
            return len(self._messages())

    def _check_receipt(self, messages: dict[str, _Stored], message_id: str, pop_receipt: str) -> _Stored:
        stored = messages.get(message_id)
        if stored is None:
            raise MessageGoneError(f"message {message_id} is not in queue {self._name}")
        if stored.pop_receipt != pop_receipt:
            raise MessageGoneError(f"stale pop receipt for message {message_id} in queue {self._name}")
        return stored


class MemoryQueueService:
    """``QueueService`` in memory; time comes from ``clock``."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._queues: dict[str, dict[str, _Stored]] = {}

    def get_queue(self, name: str) -> MemoryQueue:
        validate_queue_name(name)
        with self._lock:
            self._queues.setdefault(name, {})
        return MemoryQueue(self, name)

    def delete_queue(self, name: str) -> None:
        with self._lock:
            self._queues.pop(name, None)

    def queue_names(self) -> list[str]:
        """Names of the existing queues, sorted (diagnostics and tests)."""
        with self._lock:
            return sorted(self._queues)
