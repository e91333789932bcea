"""Core data types shared by every layer of the local durable engine.

History events are kept in the exact JSON shape the Durable extension sends to the Python worker
(DTFx ``HistoryEvent`` classes serialised by Newtonsoft: PascalCase keys, numeric ``EventType``), so the
same dicts are persisted, replayed and shown by the HTTP API without translation. See "History events" in
``docs/durable-protocol.md``.

This module holds data only: no I/O, no clocks, no threads.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeAlias, TypeVar

_T = TypeVar("_T")

HistoryEvent: TypeAlias = dict[str, Any]
"""One DTFx history event as JSON-ready dict (``EventType``, ``EventId``, ``IsPlayed``, ``Timestamp``, ...)."""

OrchestratorFn: TypeAlias = Callable[[str], str]
"""The orchestrator handle registered by the app: context JSON string in, ``OrchestratorState`` JSON out.

It raises an ``Exception`` whose message contains ``"\\n\\n$OutOfProcData$:"`` + state JSON when the user
code fails (the SDK's error path)."""

ActivityFn: TypeAlias = Callable[[str | None], str | None]
"""An activity: JSON-encoded input (or None) in, JSON-encoded result (or None) out; raises on failure."""

EntityFn: TypeAlias = Callable[[str], str]
"""An entity function (``df.Entity.create`` handle): the batch request JSON in, the batch result JSON out
(``durable_local.entities.batch``); raises when the function fails as a whole."""


class EventType(enum.IntEnum):
    """DTFx ``EventType`` codes (``DurableTask.Core/History/EventType.cs``)."""

    EXECUTION_STARTED = 0
    EXECUTION_COMPLETED = 1
    EXECUTION_FAILED = 2
    EXECUTION_TERMINATED = 3
    TASK_SCHEDULED = 4
    TASK_COMPLETED = 5
    TASK_FAILED = 6
    SUB_ORCHESTRATION_INSTANCE_CREATED = 7
    SUB_ORCHESTRATION_INSTANCE_COMPLETED = 8
    SUB_ORCHESTRATION_INSTANCE_FAILED = 9
    TIMER_CREATED = 10
    TIMER_FIRED = 11
    ORCHESTRATOR_STARTED = 12
    ORCHESTRATOR_COMPLETED = 13
    EVENT_SENT = 14
    EVENT_RAISED = 15
    CONTINUE_AS_NEW = 16
    GENERIC_EVENT = 17
    HISTORY_STATE = 18
    EXECUTION_SUSPENDED = 19
    EXECUTION_RESUMED = 20
    EXECUTION_REWOUND = 21


class RuntimeStatus(enum.Enum):
    """DTFx ``OrchestrationStatus``; ``.value`` is the numeric code stored in ``ExecutionCompleted``."""

    RUNNING = 0
    COMPLETED = 1
    CONTINUED_AS_NEW = 2
    FAILED = 3
    CANCELED = 4
    TERMINATED = 5
    PENDING = 6
    SUSPENDED = 7

    @property
    def display(self) -> str:
        """The name the HTTP API and the Python SDK use (``"Running"``, ``"ContinuedAsNew"``, ...)."""
        return _DISPLAY[self]

    @classmethod
    def from_display(cls, text: str) -> RuntimeStatus:
        """Parse an API name case-insensitively; raises ``ValueError`` naming the accepted values."""
        for status, name in _DISPLAY.items():
            if name.lower() == text.strip().lower():
                return status
        raise ValueError(f"unknown runtime status {text!r}; expected one of {', '.join(_DISPLAY.values())}")

    @property
    def is_terminal(self) -> bool:
        return self in (
            RuntimeStatus.COMPLETED,
            RuntimeStatus.FAILED,
            RuntimeStatus.TERMINATED,
            RuntimeStatus.CANCELED,
        )


_DISPLAY: dict[RuntimeStatus, str] = {
    RuntimeStatus.RUNNING: "Running",
    RuntimeStatus.COMPLETED: "Completed",
    RuntimeStatus.CONTINUED_AS_NEW: "ContinuedAsNew",
    RuntimeStatus.FAILED: "Failed",
    RuntimeStatus.CANCELED: "Canceled",
    RuntimeStatus.TERMINATED: "Terminated",
    RuntimeStatus.PENDING: "Pending",
    RuntimeStatus.SUSPENDED: "Suspended",
}


class SchedulingMode(enum.Enum):
    """How the engine turns the SDK's action list into scheduled work (``docs/durable-protocol.md``, "How the
    extension replays the actions")."""

    SHIM = "shim"
    """Faithful to the extension's out-of-proc shim (``ProcessAsyncActionsV2``): top-level actions are
    awaited one after another, so an action after an incomplete one is not scheduled yet."""

    IDEAL = "ideal"
    """Every new leaf action is scheduled as soon as the SDK reports it (durabletask / 2.x semantics)."""


def utc_now() -> datetime:
    """The wall clock, UTC. Only clocks (``durable_local.clock``) should call this."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class TaskMessage:
    """A history event addressed to one orchestration instance (DTFx ``TaskMessage``).

    This is what travels on every queue: an activity request on the work-item queue carries the
    ``TaskScheduled`` event; everything on a control queue (``ExecutionStarted``, ``TaskCompleted``,
    ``TimerFired``, ``EventRaised``, ``ExecutionTerminated``, ...) carries the event to append.
    ``execution_id`` is None for management messages (raise event, terminate) that target whatever
    execution is current.
    """

    instance_id: str
    execution_id: str | None
    event: HistoryEvent
    sequence_number: int = 0
    """Client-side ordering hint used to sort a dequeued batch after ``inserted_on``."""
    sender: str | None = None
    """The instance that sent it (DTFx ``MessageData.Sender``), set for entity messages: the out-of-order check
    needs to know that an ``EventRaised`` is an entity's response."""


@dataclass(frozen=True, slots=True)
class ScheduledMessage:
    """An outbound message produced by an episode, before it is put on a queue."""

    message: TaskMessage
    visible_at: datetime | None = None
    """For timer messages: when the ``TimerFired`` may be delivered. None = immediately."""


@dataclass(slots=True)
class FailureDetails:
    """Why an orchestration or task failed, as the HTTP API reports it."""

    error_type: str
    message: str
    stack_trace: str | None = None


@dataclass(slots=True)
class InstanceRecord:
    """One row of the Instances table (DTFx ``OrchestrationState`` as the Azure Storage backend keeps it).

    ``input``, ``output`` and ``custom_status`` are JSON text exactly as the worker produced them.
    """

    instance_id: str
    name: str
    execution_id: str | None
    status: RuntimeStatus
    created_time: datetime
    last_updated_time: datetime
    version: str = ""
    input: str | None = None
    output: str | None = None
    custom_status: str | None = None
    completed_time: datetime | None = None
    generation: int = 0
    parent_instance_id: str | None = None
    scheduled_start_time: datetime | None = None
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FunctionRegistry:
    """What the engine can run: orchestrator handles, activities and entity functions by function name.

    Azure Functions names are case-insensitive; lookups here are too.
    """

    orchestrators: Mapping[str, OrchestratorFn]
    activities: Mapping[str, ActivityFn]
    entities: Mapping[str, EntityFn] = field(default_factory=dict)

    def orchestrator(self, name: str) -> OrchestratorFn | None:
        return _lookup(self.orchestrators, name)

    def activity(self, name: str) -> ActivityFn | None:
        return _lookup(self.activities, name)

    def entity(self, name: str) -> EntityFn | None:
        return _lookup(self.entities, name)


def _lookup(table: Mapping[str, _T], name: str) -> _T | None:
    if name in table:
        return table[name]
    folded = name.lower()
    for key, value in table.items():
        if key.lower() == folded:
            return value
    return None
