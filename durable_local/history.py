"""Factories for DTFx history events in the JSON shape the Durable extension sends to the Python worker.

Events created from *messages* carry ``EventId = -1``; events created from *decisions* carry the
orchestration's sequence number (``docs/durable-protocol.md``, "History events"). ``IsPlayed`` is False when
an event is created; the replay layer marks events True once an episode has processed them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from durable_local.model import EventType, HistoryEvent


def format_timestamp(moment: datetime) -> str:
    """Newtonsoft's round-trip format: ``2024-01-01T00:00:00.1234567Z`` (7 fractional digits, UTC)."""
    if moment.tzinfo is None:
        raise ValueError("history timestamps must be timezone-aware")
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond:06d}0Z"


def parse_timestamp(text: str) -> datetime:
    """Parse the timestamps this module writes (and ISO-8601 with up to 7 fractional digits)."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    main, _, rest = value.partition(".")
    if rest:
        digits = ""
        tail = ""
        for index, char in enumerate(rest):
            if not char.isdigit():
                tail = rest[index:]
                break
            digits += char
        value = f"{main}.{digits[:6].ljust(6, '0')}{tail}"
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def event_type(event: HistoryEvent) -> EventType:
    return EventType(int(event["EventType"]))


def _base(kind: EventType, timestamp: datetime, event_id: int = -1) -> HistoryEvent:
    return {
        "EventType": int(kind),
        "EventId": event_id,
        "IsPlayed": False,
        "Timestamp": format_timestamp(timestamp),
    }


@dataclass(frozen=True, slots=True)
class ParentInstance:
    """The parent of a sub-orchestration (DTFx ``ParentInstance``)."""

    name: str
    instance_id: str
    execution_id: str
    task_scheduled_id: int
    version: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "Name": self.name,
            "Version": self.version,
            "TaskScheduleId": self.task_scheduled_id,
            "OrchestrationInstance": {"InstanceId": self.instance_id, "ExecutionId": self.execution_id},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ParentInstance | None:
        if not data:
            return None
        instance = data.get("OrchestrationInstance") or {}
        return cls(
            name=str(data.get("Name") or ""),
            instance_id=str(instance.get("InstanceId") or ""),
            execution_id=str(instance.get("ExecutionId") or ""),
            task_scheduled_id=int(data.get("TaskScheduleId", -1)),
            version=str(data.get("Version") or ""),
        )


def execution_started(
    *,
    timestamp: datetime,
    name: str,
    instance_id: str,
    execution_id: str,
    input: str | None,
    parent: ParentInstance | None = None,
    generation: int = 0,
    version: str = "",
    scheduled_start_time: datetime | None = None,
    tags: dict[str, str] | None = None,
) -> HistoryEvent:
    event = _base(EventType.EXECUTION_STARTED, timestamp)
    event.update(
        {
            "OrchestrationInstance": {"InstanceId": instance_id, "ExecutionId": execution_id},
            "ParentInstance": parent.to_json() if parent else None,
            "Name": name,
            "Version": version,
            "Input": input,
            "Tags": dict(tags) if tags else None,
            "Correlation": None,
            "ParentTraceContext": None,
            "ScheduledStartTime": format_timestamp(scheduled_start_time) if scheduled_start_time else None,
            "Generation": generation,
        }
    )
    return event


def task_completed(*, timestamp: datetime, task_scheduled_id: int, result: str | None) -> HistoryEvent:
    event = _base(EventType.TASK_COMPLETED, timestamp)
    event.update({"TaskScheduledId": task_scheduled_id, "Result": result})
    return event


def task_failed(
    *, timestamp: datetime, task_scheduled_id: int, reason: str, details: str | None = None
) -> HistoryEvent:
    event = _base(EventType.TASK_FAILED, timestamp)
    event.update({"TaskScheduledId": task_scheduled_id, "Reason": reason, "Details": details, "FailureDetails": None})
    return event


def sub_orchestration_completed(*, timestamp: datetime, task_scheduled_id: int, result: str | None) -> HistoryEvent:
    event = _base(EventType.SUB_ORCHESTRATION_INSTANCE_COMPLETED, timestamp)
    event.update({"TaskScheduledId": task_scheduled_id, "Result": result})
    return event


def sub_orchestration_failed(
    *, timestamp: datetime, task_scheduled_id: int, reason: str, details: str | None = None
) -> HistoryEvent:
    event = _base(EventType.SUB_ORCHESTRATION_INSTANCE_FAILED, timestamp)
    event.update({"TaskScheduledId": task_scheduled_id, "Reason": reason, "Details": details, "FailureDetails": None})
    return event


def timer_fired(*, timestamp: datetime, timer_id: int, fire_at: datetime) -> HistoryEvent:
    event = _base(EventType.TIMER_FIRED, timestamp)
    event.update({"TimerId": timer_id, "FireAt": format_timestamp(fire_at)})
    return event


def event_raised(*, timestamp: datetime, name: str, input: str | None) -> HistoryEvent:
    event = _base(EventType.EVENT_RAISED, timestamp)
    event.update({"Name": name, "Input": input})
    return event


def execution_terminated(*, timestamp: datetime, reason: str | None) -> HistoryEvent:
    event = _base(EventType.EXECUTION_TERMINATED, timestamp)
    event.update({"Input": reason})
    return event


def execution_suspended(*, timestamp: datetime, reason: str | None) -> HistoryEvent:
    event = _base(EventType.EXECUTION_SUSPENDED, timestamp)
    event.update({"Reason": reason})
    return event


def execution_resumed(*, timestamp: datetime, reason: str | None) -> HistoryEvent:
    event = _base(EventType.EXECUTION_RESUMED, timestamp)
    event.update({"Reason": reason})
    return event


def orchestrator_started(*, timestamp: datetime) -> HistoryEvent:
    return _base(EventType.ORCHESTRATOR_STARTED, timestamp)


def orchestrator_completed(*, timestamp: datetime) -> HistoryEvent:
    return _base(EventType.ORCHESTRATOR_COMPLETED, timestamp)
