"""Data held by the session manager: message collections, pending batches and orchestration sessions.

Mirrors DurableTask.AzureStorage ``MessageCollection``, ``OrchestrationSessionManager.PendingMessageBatch``
and ``Messaging/OrchestrationSession``. No I/O here; the session manager's lock guards all mutation.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from durable_local.entities.ids import is_entity_instance
from durable_local.entities.messages import request_id_of
from durable_local.history import event_type, parse_timestamp
from durable_local.model import EventType, HistoryEvent
from durable_local.ports import QueueMessage

if TYPE_CHECKING:
    from durable_local.sessions.control_queue import ControlQueue

_RESPONSE_ID_KEYS: dict[EventType, str] = {
    EventType.TASK_COMPLETED: "TaskScheduledId",
    EventType.TASK_FAILED: "TaskScheduledId",
    EventType.SUB_ORCHESTRATION_INSTANCE_COMPLETED: "TaskScheduledId",
    EventType.SUB_ORCHESTRATION_INSTANCE_FAILED: "TaskScheduledId",
    EventType.TIMER_FIRED: "TimerId",
}


def task_event_id(event: HistoryEvent) -> int:
    """DTFx ``Utils.GetTaskEventId``: the scheduled id a response refers to, else the event's own EventId."""
    key = _RESPONSE_ID_KEYS.get(event_type(event))
    if key is not None and event.get(key) is not None:
        return int(event[key])
    return int(event.get("EventId", -1))


class MessageCollection:
    """Messages in arrival order; adding a message whose id is already present replaces that copy."""

    def __init__(self, messages: Iterable[QueueMessage] = ()) -> None:
        self._items: list[QueueMessage] = []
        for message in messages:
            self.add_or_replace(message)

    def add_or_replace(self, message: QueueMessage) -> bool:
        """Add ``message``; True if new, False if it replaced a copy with the same message id."""
        for index, existing in enumerate(self._items):
            if existing.message_id == message.message_id:
                # The newer copy carries the only valid pop receipt (DTFx keeps the newest).
                self._items[index] = message
                return False
        self._items.append(message)
        return True

    def remove(self, message: QueueMessage) -> None:
        self._items = [m for m in self._items if m.message_id != message.message_id]

    def clear(self) -> None:
        self._items.clear()

    def __iter__(self) -> Iterator[QueueMessage]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def to_list(self) -> list[QueueMessage]:
        return list(self._items)


@dataclass(eq=False, slots=True)
class PendingMessageBatch:
    """Messages for one instance + execution, waiting for their history prefetch and a session."""

    control_queue: ControlQueue
    instance_id: str
    _execution_id: str | None
    messages: MessageCollection = field(default_factory=MessageCollection)
    history: list[HistoryEvent] | None = None
    """Prefetched committed history (None until the prefetch finished)."""
    etag: str | None = None
    last_checkpoint_time: datetime | None = None
    checkpoint_complete: bool = True
    history_execution_id: str | None = None

    @property
    def execution_id(self) -> str | None:
        return self._execution_id

    def adopt_execution_id(self, execution_id: str) -> None:
        """A batch opened by messages without an execution id takes the first one seen (set once)."""
        if self._execution_id is not None:
            raise RuntimeError(f"This batch already has an ExecutionId '{self._execution_id}' assigned.")
        self._execution_id = execution_id

    @property
    def is_prefetched(self) -> bool:
        return self.history is not None


class OrchestrationSession:
    """One instance being processed by this worker (at most one session per instance id)."""

    def __init__(self, batch: PendingMessageBatch) -> None:
        history = list(batch.history or [])
        self.control_queue = batch.control_queue
        self.instance_id = _started_instance_id(history) or batch.instance_id
        self.execution_id: str | None = _started_execution_id(history) or batch.execution_id
        self.current_batch: list[QueueMessage] = batch.messages.to_list()
        self.history = history
        """Committed history (plus, last, the seed's ExecutionTerminated when it exceeded ``max_history_events``)."""
        self.etag = batch.etag
        self.last_checkpoint_time = batch.last_checkpoint_time
        self.checkpoint_complete = batch.checkpoint_complete
        self._lock = threading.Lock()
        self._next_batch = MessageCollection()
        self.deferred_messages: list[QueueMessage] = []

    def add_or_replace_messages(self, messages: Iterable[QueueMessage]) -> list[QueueMessage]:
        """Queue messages for this session's next batch; returns those that replaced an existing copy."""
        replaced: list[QueueMessage] = []
        with self._lock:
            for message in messages:
                if not self._next_batch.add_or_replace(message):
                    replaced.append(message)
        return replaced

    @property
    def pending_messages(self) -> list[QueueMessage]:
        with self._lock:
            return self._next_batch.to_list()

    def defer(self, message: QueueMessage) -> None:
        self.current_batch = [m for m in self.current_batch if m.message_id != message.message_id]
        self.deferred_messages.append(message)

    def remove_from_batch(self, messages: Iterable[QueueMessage]) -> None:
        ids = {m.message_id for m in messages}
        self.current_batch = [m for m in self.current_batch if m.message_id not in ids]

    @property
    def is_nonexistent_instance(self) -> bool:
        return not self.history or _started_execution_id(self.history) is None

    def is_out_of_order(self, message: QueueMessage) -> bool:
        """DTFx ``OrchestrationSession.IsOutOfOrderMessage`` in its order (Azure/durabletask,
        ``src/DurableTask.AzureStorage/Messaging/OrchestrationSession.cs``, the version of the seed's era: from
        #331, 2019, until #1303, 2026-03; ``docs/durable-protocol.md``, "Out-of-order messages"):

        1. only a response can be out of order: TaskCompleted/TaskFailed, SubOrchestrationInstanceCompleted/Failed,
           TimerFired, and an EventRaised an entity sent to an orchestration (the answer to a call);
        2. an instance without history (no rows, or no ExecutionStarted) gets the benefit of the doubt for five
           dequeues; from the sixth the message is a zombie (purged, or an older generation): not out of order,
           the executable-instance check discards it;
        3. a message whose event is older than the last checkpoint (``LastCheckpointTime``, the sentinel's
           completion time read with the history) is not out of order: a checkpoint writes history only after it
           sent its messages, so whatever that message answers was already committed, or belongs to an execution
           that no longer exists (a timer left behind by continue-as-new);
        4. a response whose scheduled id (TaskScheduledId, TimerId) is an EventId in history is in order; an
           entity's answer is in order when an EventSent with its request id is in history;
        5. anything else is out of order: the dispatcher abandons it (it comes back after the abandon back-off).
        """
        body = message.body
        if event_type(body.event) not in _RESPONSE_ID_KEYS and not _is_entity_response(message, self.instance_id):
            return False
        if self.is_nonexistent_instance and message.dequeue_count > 5:
            return False
        if self.last_checkpoint_time is not None and self.last_checkpoint_time > _timestamp(body.event):
            return False
        key = _RESPONSE_ID_KEYS.get(event_type(body.event))
        if key is not None and body.event.get(key) is not None:
            scheduled_id = int(body.event[key])
            if any(int(e.get("EventId", -1)) == scheduled_id for e in self.history):
                return False
        if event_type(body.event) is EventType.EVENT_RAISED:
            # The answer is named by the request id, which is in the input of the EventSent that made the call.
            request_id = body.event.get("Name")
            if request_id is not None and any(
                event_type(e) is EventType.EVENT_SENT and request_id_of(e.get("Input")) == str(request_id)
                for e in self.history
            ):
                return False
        return True


@dataclass(frozen=True, slots=True)
class SessionStats:
    """``GetStats``: buffered batches, buffered messages (all partitions), active sessions."""

    pending_instances: int
    pending_messages: int
    active_sessions: int


def _timestamp(event: HistoryEvent) -> datetime:
    """The event's creation time (DTFx ``HistoryEvent.Timestamp``); the earliest moment if it has none."""
    text = event.get("Timestamp")
    return parse_timestamp(str(text)) if text else datetime.min.replace(tzinfo=UTC)


def _is_entity_response(message: QueueMessage, receiver: str) -> bool:
    """DTFx also checks an ``EventRaised`` an entity sent to an orchestration (an entity's response)."""
    body = message.body
    return (
        event_type(body.event) is EventType.EVENT_RAISED
        and is_entity_instance(body.sender)
        and not is_entity_instance(receiver)
    )


def _started_event(history: list[HistoryEvent]) -> HistoryEvent | None:
    for event in history:
        if event_type(event) is EventType.EXECUTION_STARTED:
            return event
    return None


def _started_instance_id(history: list[HistoryEvent]) -> str | None:
    event = _started_event(history)
    if event is None:
        return None
    value = (event.get("OrchestrationInstance") or {}).get("InstanceId")
    return str(value) if value else None


def _started_execution_id(history: list[HistoryEvent]) -> str | None:
    event = _started_event(history)
    if event is None:
        return None
    value = (event.get("OrchestrationInstance") or {}).get("ExecutionId")
    return str(value) if value else None


def started_event(history: list[HistoryEvent]) -> HistoryEvent | None:
    """The ExecutionStarted event of ``history`` (None if absent)."""
    return _started_event(history)
