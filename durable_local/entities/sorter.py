"""In-order, de-duplicated delivery of entity requests over Azure Storage queues (which do not keep order).

Re-implements the facts of the extension's ``EntityScheduler/MessageSorter.cs``:

* The sender labels each request with a ``Timestamp`` (its current time, made strictly increasing per
  destination) and the ``Predecessor`` (the timestamp of the previous request it sent to the same destination).
  An orchestration labels with its replay-safe current time, so a replay re-sends identical labels.
* The receiving entity keeps, per sender instance, the timestamp of the last delivered request. A request whose
  timestamp is not newer is a duplicate and dropped; one whose predecessor was not delivered yet is buffered
  until it is. A new execution of the sender resets its buffer.
* Only requests within the reorder window (30 min on Azure Storage, ``EntityMessageReorderWindowInMinutes``)
  take part; the horizon moves with the newest timestamp seen (at most every 10 s) and older messages pass
  through. Requests from clients (no parent) and forwarded lock requests (position > 0) pass through too.

The sorter's state is persisted inside the entity's scheduler state (``sorter``), PascalCase as Newtonsoft writes
the class (``LastSentToInstance``, ``ReceivedFromInstance`` with ``Last``/``ExecutionId``/``Buffered``,
``ReceiveHorizon``, ``SendHorizon``; defaults omitted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from durable_local.entities.dotnet import TICKS_PER_SECOND, format_datetime, parse_datetime
from durable_local.entities.messages import RequestMessage

MIN_INTERVAL_BETWEEN_COLLECTIONS = 10 * TICKS_PER_SECOND


@dataclass(slots=True)
class ReceiveBuffer:
    last: int = 0
    """Timestamp of the last delivered request (0 = none / outside the window)."""
    execution_id: str | None = None
    buffered: dict[int, RequestMessage] = field(default_factory=dict)
    """Requests waiting for their predecessor, by timestamp."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"Last": format_datetime(self.last)}
        if self.execution_id is not None:
            data["ExecutionId"] = self.execution_id
        if self.buffered:
            data["Buffered"] = {format_datetime(k): self.buffered[k].to_json() for k in sorted(self.buffered)}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReceiveBuffer:
        buffered = {parse_datetime(k): RequestMessage.from_json(v) for k, v in (data.get("Buffered") or {}).items()}
        execution = data.get("ExecutionId")
        return cls(_ticks(data.get("Last")), None if execution is None else str(execution), buffered)


@dataclass(slots=True)
class MessageSorter:
    last_sent_to_instance: dict[str, int] | None = None
    received_from_instance: dict[str, ReceiveBuffer] | None = None
    receive_horizon: int = 0
    send_horizon: int = 0

    # -- sending -------------------------------------------------------------------------------------

    def label_outgoing(self, message: RequestMessage, destination: str, now: int, reorder_window: int) -> None:
        """Fill ``timestamp`` and ``predecessor`` of a request sent to ``destination`` at ``now`` (ticks)."""
        if reorder_window == 0:
            return
        timestamp = now
        if self.send_horizon + reorder_window + MIN_INTERVAL_BETWEEN_COLLECTIONS < now:
            self.send_horizon = now - reorder_window
            if self.last_sent_to_instance is not None:
                for expired in [k for k, v in self.last_sent_to_instance.items() if v < self.send_horizon]:
                    del self.last_sent_to_instance[expired]
        if self.last_sent_to_instance is None:
            self.last_sent_to_instance = {}
        else:
            found = _find(self.last_sent_to_instance, destination)
            if found is not None:
                last = self.last_sent_to_instance[found]
                message.predecessor = last
                if timestamp <= last:
                    timestamp = last + 1  # timestamps stay monotonic even if the clock is not
        message.timestamp = timestamp
        key = _find(self.last_sent_to_instance, destination) or destination
        self.last_sent_to_instance[key] = timestamp

    # -- receiving -----------------------------------------------------------------------------------

    def receive_in_order(self, message: RequestMessage, reorder_window: int) -> list[RequestMessage]:
        """The requests to deliver now because ``message`` arrived (possibly none, possibly several)."""
        if reorder_window == 0 or message.parent_instance_id is None or message.position > 0:
            return [message]
        delivered: list[RequestMessage] = []
        if self.receive_horizon + reorder_window + MIN_INTERVAL_BETWEEN_COLLECTIONS < message.timestamp:
            self.receive_horizon = message.timestamp - reorder_window
            self._collect(delivered)
        if message.timestamp < self.receive_horizon:
            delivered.append(message)  # too old to take part in ordering
            return delivered
        if self.received_from_instance is None:
            self.received_from_instance = {}
        key = _find(self.received_from_instance, message.parent_instance_id)
        if key is None:
            buffer = ReceiveBuffer(execution_id=message.parent_execution_id)
            self.received_from_instance[message.parent_instance_id] = buffer
        else:
            buffer = self.received_from_instance[key]
            if buffer.execution_id != message.parent_execution_id:
                # A new execution of the sender: release what was held back and start over.
                delivered.extend(buffer.buffered[k] for k in sorted(buffer.buffered))
                buffer.buffered.clear()
                buffer.last = 0
                buffer.execution_id = message.parent_execution_id
        if message.timestamp <= buffer.last:
            return delivered  # already delivered: a duplicate
        if message.predecessor > buffer.last and message.predecessor >= self.receive_horizon:
            buffer.buffered[message.timestamp] = message  # wait for the predecessor
            return delivered
        delivered.append(message)
        buffer.last = message.timestamp if message.timestamp >= self.receive_horizon else 0
        self._deliver_ready(buffer, delivered)
        return delivered

    @property
    def buffered_count(self) -> int:
        return sum(len(b.buffered) for b in (self.received_from_instance or {}).values())

    def _collect(self, delivered: list[RequestMessage]) -> None:
        """The horizon moved: release buffered requests whose predecessors fell out of the window."""
        if self.received_from_instance is None:
            return
        for key in list(self.received_from_instance):
            buffer = self.received_from_instance[key]
            if buffer.last < self.receive_horizon:
                buffer.last = 0
            self._deliver_ready(buffer, delivered)
            if buffer.last == 0 and not buffer.buffered:
                del self.received_from_instance[key]
        if not self.received_from_instance:
            self.received_from_instance = None

    def _deliver_ready(self, buffer: ReceiveBuffer, delivered: list[RequestMessage]) -> None:
        while buffer.buffered:
            first = min(buffer.buffered)
            message = buffer.buffered[first]
            if not (message.predecessor <= buffer.last or message.predecessor < self.receive_horizon):
                return
            del buffer.buffered[first]
            buffer.last = message.timestamp if message.timestamp >= self.receive_horizon else 0
            delivered.append(message)

    # -- persistence ---------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.last_sent_to_instance is not None:
            data["LastSentToInstance"] = {k: format_datetime(v) for k, v in self.last_sent_to_instance.items()}
        if self.received_from_instance is not None:
            data["ReceivedFromInstance"] = {k: b.to_json() for k, b in self.received_from_instance.items()}
        if self.receive_horizon:
            data["ReceiveHorizon"] = format_datetime(self.receive_horizon)
        if self.send_horizon:
            data["SendHorizon"] = format_datetime(self.send_horizon)
        return data

    @classmethod
    def from_json(cls, data: Any) -> MessageSorter:
        if not isinstance(data, dict):
            return cls()
        sent = data.get("LastSentToInstance")
        received = data.get("ReceivedFromInstance")
        return cls(
            last_sent_to_instance=None if sent is None else {k: parse_datetime(v) for k, v in sent.items()},
            received_from_instance=(
                None if received is None else {k: ReceiveBuffer.from_json(v) for k, v in received.items()}
            ),
            receive_horizon=_ticks(data.get("ReceiveHorizon")),
            send_horizon=_ticks(data.get("SendHorizon")),
        )


def _find(table: dict[str, Any], instance_id: str) -> str | None:
    """Keys compare case-insensitively (the extension's dictionaries use ``OrdinalIgnoreCase``)."""
    if instance_id in table:
        return instance_id
    folded = instance_id.lower()
    return next((key for key in table if key.lower() == folded), None)


def _ticks(value: Any) -> int:
    return 0 if value is None else parse_datetime(str(value))
