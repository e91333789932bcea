"""The Durable extension's JSON shapes for instance status and ``showHistory`` history events.

Mirrors what the extension's HTTP API returns (learn.microsoft.com "HTTP API reference"): timestamps as
``yyyy-MM-ddTHH:mm:ssZ``, input/output/customStatus parsed back into JSON values (the raw text when it is
not JSON), and history events as ``DurableClient.GetDurableOrchestrationStatusAsync`` formats them since
extension 2.9.0 (PR #2267): ``EventType`` as its name, ``TaskScheduled`` folded into the matching completion
(``FunctionName``, ``ScheduledTime`` and, with ``showInput``, its ``Input``), every event's ``Input`` kept as
stored (a string) unless ``showInput=false``, and orchestrator start/complete markers dropped.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from durable_local.engine_api import InstanceStatus
from durable_local.model import EventType, HistoryEvent, RuntimeStatus


def parse_json_text(value: str | None) -> Any:
    """The extension's ``ParseToJToken``: None → null, blank → "", not JSON → the raw string."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return ""
    try:
        return json.loads(text)
    except ValueError:
        return value


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_payload(
    status: InstanceStatus, *, show_input: bool = True, show_history_output: bool = False
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "name": status.name,
        "instanceId": status.instance_id,
        "runtimeStatus": status.runtime_status.display,
        "input": parse_json_text(status.input) if show_input else None,
        "customStatus": parse_json_text(status.custom_status),
        "output": parse_json_text(status.output),
        "createdTime": format_time(status.created_time),
        "lastUpdatedTime": format_time(status.last_updated_time),
    }
    if status.history is not None:
        payload["historyEvents"] = history_payload(
            status.history, show_history_output=show_history_output, show_input=show_input
        )
    return payload


def history_payload(
    events: list[HistoryEvent], *, show_history_output: bool, show_input: bool = True
) -> list[dict[str, Any]]:
    items = [copy.deepcopy(event) for event in events]
    scheduled: dict[str, tuple[int, str, Any, Any]] = {}
    drop: set[int] = set()
    for index, item in enumerate(items):
        try:
            kind = EventType(int(item["EventType"]))
        except (KeyError, ValueError):
            continue
        item["EventType"] = _EVENT_NAMES[kind]
        if kind in (EventType.TASK_SCHEDULED, EventType.SUB_ORCHESTRATION_INSTANCE_CREATED):
            key = f"{kind.name}_{item.get('EventId')}"
            scheduled[key] = (index, str(item.get("Name")), item.get("Timestamp"), item.get("Input"))
            item.pop("Version", None)
        elif kind in (EventType.TASK_COMPLETED, EventType.TASK_FAILED):
            _fold(item, scheduled, "TASK_SCHEDULED", drop, show_input)
            _result(item, show_history_output and kind == EventType.TASK_COMPLETED)
        elif kind in (EventType.SUB_ORCHESTRATION_INSTANCE_COMPLETED, EventType.SUB_ORCHESTRATION_INSTANCE_FAILED):
            _fold(item, scheduled, "SUB_ORCHESTRATION_INSTANCE_CREATED", drop, show_input)
            _result(item, show_history_output and kind == EventType.SUB_ORCHESTRATION_INSTANCE_COMPLETED)
        elif kind == EventType.EXECUTION_STARTED:
            item["FunctionName"] = item.pop("Name", None)
            for key in ("OrchestrationInstance", "ParentInstance", "Version", "Tags"):
                item.pop(key, None)
        elif kind == EventType.EXECUTION_COMPLETED:
            raw_status = item.get("OrchestrationStatus")
            if isinstance(raw_status, int):
                item["OrchestrationStatus"] = RuntimeStatus(raw_status).display
            _result(item, show_history_output)
        elif kind == EventType.TIMER_FIRED:
            item.pop("TimerId", None)
        elif kind in (EventType.ORCHESTRATOR_STARTED, EventType.ORCHESTRATOR_COMPLETED):
            drop.add(index)
        if not show_input:
            item.pop("Input", None)
        item.pop("EventId", None)
        item.pop("IsPlayed", None)
    return [item for index, item in enumerate(items) if index not in drop]


def _fold(
    item: dict[str, Any],
    scheduled: dict[str, tuple[int, str, Any, Any]],
    prefix: str,
    drop: set[int],
    show_input: bool,
) -> None:
    found = scheduled.get(f"{prefix}_{item.get('TaskScheduledId')}")
    if found is not None:
        index, name, timestamp, scheduled_input = found
        item["ScheduledTime"] = timestamp
        item["FunctionName"] = name
        if show_input:
            item["Input"] = scheduled_input
        drop.add(index)
    item.pop("TaskScheduledId", None)


def _result(item: dict[str, Any], show: bool) -> None:
    if not show:
        item.pop("Result", None)
    elif "Result" in item:
        item["Result"] = parse_json_text(item["Result"])


_EVENT_NAMES: dict[EventType, str] = {
    EventType.EXECUTION_STARTED: "ExecutionStarted",
    EventType.EXECUTION_COMPLETED: "ExecutionCompleted",
    EventType.EXECUTION_FAILED: "ExecutionFailed",
    EventType.EXECUTION_TERMINATED: "ExecutionTerminated",
    EventType.TASK_SCHEDULED: "TaskScheduled",
    EventType.TASK_COMPLETED: "TaskCompleted",
    EventType.TASK_FAILED: "TaskFailed",
    EventType.SUB_ORCHESTRATION_INSTANCE_CREATED: "SubOrchestrationInstanceCreated",
    EventType.SUB_ORCHESTRATION_INSTANCE_COMPLETED: "SubOrchestrationInstanceCompleted",
    EventType.SUB_ORCHESTRATION_INSTANCE_FAILED: "SubOrchestrationInstanceFailed",
    EventType.TIMER_CREATED: "TimerCreated",
    EventType.TIMER_FIRED: "TimerFired",
    EventType.ORCHESTRATOR_STARTED: "OrchestratorStarted",
    EventType.ORCHESTRATOR_COMPLETED: "OrchestratorCompleted",
    EventType.EVENT_SENT: "EventSent",
    EventType.EVENT_RAISED: "EventRaised",
    EventType.CONTINUE_AS_NEW: "ContinueAsNew",
    EventType.GENERIC_EVENT: "GenericEvent",
    EventType.HISTORY_STATE: "HistoryState",
    EventType.EXECUTION_SUSPENDED: "ExecutionSuspended",
    EventType.EXECUTION_RESUMED: "ExecutionResumed",
    EventType.EXECUTION_REWOUND: "ExecutionRewound",
}
