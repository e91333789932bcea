"""What an entity persists between batches, and the status it shows.

The extension (2.x) runs each entity as an orchestration named by its ``@name@key`` id that ends every batch
with ``ContinueAsNew(schedulerState)``: the entity's state lives in the input of the current execution, i.e.
the Instances row's ``Input`` and the ``ExecutionStarted`` event of its history, in the same stores as any
orchestration. ``EntityScheduler/SchedulerState.cs`` (JSON, defaults omitted): ``exists``, ``state`` (the entity
state as JSON text), ``queue`` (waiting requests), ``lockedBy``, ``suspended``, ``sorter`` (always written).

The custom status is ``EntityStatus`` (``EntityScheduler/EntityStatus.cs``; DTFx reads it with
``DurableTask.Core/Entities/StateFormat/EntityStatus.cs``): ``entityExists``, ``queueSize``, ``lockedBy``,
``currentOperation``, each omitted at its default, so an entity that does not exist shows ``{}``.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from durable_local.entities.messages import EntityMessageError, RequestMessage
from durable_local.entities.sorter import MessageSorter


@dataclass(slots=True)
class SchedulerState:
    exists: bool = False
    state: str | None = None
    queue: deque[RequestMessage] = field(default_factory=deque)
    locked_by: str | None = None
    suspended: bool = False
    sorter: MessageSorter = field(default_factory=MessageSorter)

    # -- the scheduler's queue (SchedulerState.Enqueue/PutBack/MayDequeue/Dequeue) ----------------------

    def enqueue(self, message: RequestMessage) -> None:
        self.queue.append(message)

    def put_back(self, messages: list[RequestMessage]) -> None:
        """``PutBack``: these go in front of the waiting requests (requests of the lock holder)."""
        self.queue.extendleft(reversed(messages))

    def may_dequeue(self) -> bool:
        return bool(self.queue) and (self.locked_by is None or self.locked_by == self.queue[0].parent_instance_id)

    def dequeue(self) -> RequestMessage:
        return self.queue.popleft()

    @property
    def is_empty(self) -> bool:
        return not self.exists and not self.queue and self.locked_by is None

    # -- JSON ------------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.exists:
            data["exists"] = True
        if self.state is not None:
            data["state"] = self.state
        if self.queue:
            data["queue"] = [message.to_json() for message in self.queue]
        if self.locked_by is not None:
            data["lockedBy"] = self.locked_by
        if self.suspended:
            data["suspended"] = True
        data["sorter"] = self.sorter.to_json()
        return data

    def to_text(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def from_text(cls, text: str | None) -> SchedulerState:
        """``Rehydrate``: no input = a new (or deleted-and-restarted) entity."""
        if text is None:
            return cls()
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise EntityMessageError(
                f"Failed to deserialize entity scheduler state - may be corrupted or wrong version: {exc}"
            ) from exc
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise EntityMessageError("Failed to deserialize entity scheduler state: not a JSON object")
        state = data.get("state")
        locked = data.get("lockedBy")
        return cls(
            exists=bool(data.get("exists", False)),
            state=None if state is None else str(state),
            queue=deque(RequestMessage.from_json(item) for item in data.get("queue") or []),
            locked_by=None if locked is None else str(locked),
            suspended=bool(data.get("suspended", False)),
            sorter=MessageSorter.from_json(data.get("sorter")),
        )

    def status_text(self) -> str:
        """The ``EntityStatus`` custom status (no operation runs once a batch is checkpointed)."""
        status: dict[str, Any] = {}
        if self.exists:
            status["entityExists"] = True
        if self.queue:
            status["queueSize"] = len(self.queue)
        if self.locked_by is not None:
            status["lockedBy"] = self.locked_by
        return json.dumps(status, separators=(",", ":"))


def entity_state_of(scheduler_state_text: str | None) -> str | None:
    """DTFx ``ClientEntityHelpers.GetEntityState``: the ``state`` inside a persisted scheduler state."""
    if scheduler_state_text is None:
        return None
    try:
        data = json.loads(scheduler_state_text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("state") is None:
        return None
    return str(data["state"])


def status_says_exists(custom_status: str | None) -> bool:
    """DTFx ``EntityStatus.TestEntityExists``: the custom status text mentions ``entityExists``."""
    return custom_status is not None and "entityExists" in custom_status
