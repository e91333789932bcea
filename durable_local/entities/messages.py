"""The messages entities exchange, in the JSON the Durable extension (2.x) writes.

All travel as ``EventRaised`` events (DTFx ``SendEvent``/``RaiseEventAsync``), distinguished by the event name
(``EntityScheduler/EntityMessageEventNames.cs``):

* ``"op"`` — a ``RequestMessage`` (operation call or signal, or a lock request) to an entity;
  ``"op@<time>"`` is a request to be delivered at that time;
* ``"release"`` — a ``ReleaseMessage`` (lock release) to an entity;
* ``"continue"`` — an entity resuming itself after a batch was cut short (no payload);
* ``"<request id>"`` — a ``ResponseMessage`` from an entity to the orchestration that called it.

``RequestMessage.cs`` (property order = JSON order): ``op`` (null for a lock request), ``signal`` (omitted when
false), ``input`` (omitted when null), ``id``, ``parent`` and ``parentExecution`` (omitted when null: a client
sent it), ``due`` (omitted unless scheduled), ``Timestamp`` and ``Predecessor`` (always written: the
``MessageSorter`` fields), ``lockset`` (omitted unless a lock request) and ``pos`` (omitted when 0).
``ResponseMessage.cs``: ``result`` and ``exceptionType`` (omitted when null). ``ReleaseMessage.cs``: ``parent``
and ``id``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from durable_local.entities.dotnet import format_datetime, parse_datetime
from durable_local.entities.ids import EntityId

REQUEST_EVENT = "op"
RELEASE_EVENT = "release"
CONTINUE_EVENT = "continue"
LOCK_ACQUIRED = "Lock Acquisition Completed"
"""``SendLockResponseMessage``'s result text (ignored by the receiver, shows up in traces)."""


def is_request_event(name: str | None) -> bool:
    """``EntityMessageEventNames.IsRequestMessage``: the name starts with ``op``."""
    return bool(name) and str(name).startswith(REQUEST_EVENT)


def scheduled_request_event(due_ticks: int) -> str:
    """``ScheduledRequestMessageEventName``: ``op@`` + the due time (round-trip format)."""
    return f"{REQUEST_EVENT}@{format_datetime(due_ticks)}"


class EntityMessageError(ValueError):
    """A message an entity cannot read (the extension's deserialisation would throw)."""


@dataclass(slots=True)
class RequestMessage:
    """An operation (call or signal) or a lock request sent to an entity."""

    id: str
    operation: str | None = None
    is_signal: bool = False
    input: str | None = None
    """JSON text the entity function receives as the operation input (see ``entities.batch``)."""
    parent_instance_id: str | None = None
    parent_execution_id: str | None = None
    scheduled_time: int | None = None
    """Ticks; set for a signal scheduled for later (not produced by the Python SDK 1.x)."""
    timestamp: int = 0
    predecessor: int = 0
    lockset: list[EntityId] | None = None
    position: int = 0

    @property
    def is_lock_request(self) -> bool:
        return self.lockset is not None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"op": self.operation}
        if self.is_signal:
            data["signal"] = True
        if self.input is not None:
            data["input"] = self.input
        data["id"] = self.id
        if self.parent_instance_id is not None:
            data["parent"] = self.parent_instance_id
        if self.parent_execution_id is not None:
            data["parentExecution"] = self.parent_execution_id
        if self.scheduled_time is not None:
            data["due"] = format_datetime(self.scheduled_time)
        data["Timestamp"] = format_datetime(self.timestamp)
        data["Predecessor"] = format_datetime(self.predecessor)
        if self.lockset is not None:
            data["lockset"] = [entity.to_json() for entity in self.lockset]
        if self.position:
            data["pos"] = self.position
        return data

    def to_text(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_json(cls, data: Any) -> RequestMessage:
        if not isinstance(data, dict) or not data.get("id"):
            raise EntityMessageError(f"an entity request message needs an 'id': {data!r}")
        try:
            lockset = data.get("lockset")
            due = data.get("due")
            return cls(
                id=str(data["id"]),
                operation=None if data.get("op") is None else str(data["op"]),
                is_signal=bool(data.get("signal", False)),
                input=None if data.get("input") is None else str(data["input"]),
                parent_instance_id=None if data.get("parent") is None else str(data["parent"]),
                parent_execution_id=None if data.get("parentExecution") is None else str(data["parentExecution"]),
                scheduled_time=None if due is None else parse_datetime(str(due)),
                timestamp=_ticks(data.get("Timestamp")),
                predecessor=_ticks(data.get("Predecessor")),
                lockset=None if lockset is None else [EntityId.from_json(item) for item in lockset],
                position=int(data.get("pos", 0)),
            )
        except (TypeError, ValueError) as exc:
            raise EntityMessageError(f"unreadable entity request message: {exc}") from exc

    @classmethod
    def from_text(cls, text: str | None) -> RequestMessage:
        try:
            return cls.from_json(json.loads(text or "null"))
        except ValueError as exc:
            raise EntityMessageError(f"unreadable entity request message: {exc}") from exc


@dataclass(frozen=True, slots=True)
class ResponseMessage:
    """An entity's answer to a call: the result JSON text, or an error with its type."""

    result: str | None
    exception_type: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"result": self.result}
        if self.exception_type is not None:
            data["exceptionType"] = self.exception_type
        return data

    def to_text(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class ReleaseMessage:
    """A lock release sent by the orchestration that holds the lock."""

    parent_instance_id: str | None
    lock_request_id: str | None

    @classmethod
    def from_text(cls, text: str | None) -> ReleaseMessage:
        try:
            data = json.loads(text or "null")
        except ValueError as exc:
            raise EntityMessageError(f"unreadable entity release message: {exc}") from exc
        if not isinstance(data, dict):
            raise EntityMessageError(f"an entity release message must be a JSON object: {text!r}")
        parent, request = data.get("parent"), data.get("id")
        return cls(None if parent is None else str(parent), None if request is None else str(request))


def request_id_of(event_sent_input: str | None) -> str | None:
    """The request id inside an ``EventSent`` event's input (DTFx ``OrchestrationSession.FindRequestId``)."""
    try:
        data = json.loads(event_sent_input or "null")
    except ValueError:
        return None
    if isinstance(data, dict) and data.get("id") is not None:
        return str(data["id"])
    return None


@dataclass(slots=True)
class OutgoingMessage:
    """A message an entity batch sends: to ``target`` (an instance id), optionally for one execution."""

    target_instance_id: str
    target_execution_id: str | None
    event_name: str
    payload: str | None
    due: int | None = None
    """Ticks: deliver no earlier than this (a scheduled request re-sent to itself)."""


def _ticks(value: Any) -> int:
    if value is None:
        return 0
    return parse_datetime(str(value))
