"""Building entity messages and running entity episodes for the entity tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import azure.durable_functions as df

from durable_local.entities.dotnet import ticks_of, to_ticks
from durable_local.entities.episode import run_entity_episode
from durable_local.entities.messages import RequestMessage
from durable_local.entities.sorter import MessageSorter
from durable_local.history import event_raised
from durable_local.model import FunctionRegistry, HistoryEvent, TaskMessage
from durable_local.replay.api import EpisodeInput, EpisodeResult, ReplaySettings

T0 = datetime(2024, 1, 1, tzinfo=UTC)
WINDOW = timedelta(minutes=30)


def counter(context: df.DurableEntityContext) -> None:
    """The docs' counter entity, plus an operation that fails."""
    value = context.get_state(lambda: 0)
    operation = context.operation_name
    if operation == "add":
        value += context.get_input()
    elif operation == "get":
        context.set_result(value)
    elif operation == "fail":
        raise ValueError("no such luck")
    context.set_state(value)


def registry(**entities: Any) -> FunctionRegistry:
    return FunctionRegistry(
        orchestrators={}, activities={}, entities=entities or {"counter": df.Entity.create(counter)}
    )


def client_signal(entity: str, operation: str, value: Any = None, *, at: datetime = T0) -> TaskMessage:
    """What ``client.signal_entity`` makes: the SDK posts ``json.dumps(value)`` as JSON (a JSON string)."""
    input_text = None if value is None else json.dumps(json.dumps(value))
    request = RequestMessage(id=f"client-{operation}-{value}", operation=operation, is_signal=True, input=input_text)
    return TaskMessage(entity, None, event_raised(timestamp=at, name="op", input=request.to_text()))


class Caller:
    """An orchestration execution sending requests the way the extension labels them."""

    def __init__(self, instance_id: str = "orch", execution_id: str = "exec-1") -> None:
        self.instance_id = instance_id
        self.execution_id = execution_id
        self.sorter = MessageSorter()
        self.sent = 0

    def request(
        self, entity: str, operation: str, value: Any = None, *, signal: bool = False, at: datetime = T0
    ) -> TaskMessage:
        self.sent += 1
        message = RequestMessage(
            id=f"{self.instance_id}-{self.sent}",
            operation=operation,
            is_signal=signal,
            input=json.dumps(json.dumps(value)),
            parent_instance_id=self.instance_id,
            parent_execution_id=self.execution_id,
        )
        self.sorter.label_outgoing(message, entity, to_ticks(at), ticks_of(WINDOW))
        event = event_raised(timestamp=at, name="op", input=message.to_text())
        return TaskMessage(entity, None, event, sender=self.instance_id)


def episode(
    entity: str,
    messages: list[TaskMessage],
    *,
    past: list[HistoryEvent] | None = None,
    now: datetime = T0,
    batch_size: int = 5000,
    functions: FunctionRegistry | None = None,
) -> EpisodeResult:
    counter_ids = iter(range(1000))
    return run_entity_episode(
        EpisodeInput(
            instance_id=entity,
            past_events=past or [],
            new_messages=messages,
            now=now,
            registry=functions or registry(),
            settings=ReplaySettings(max_entity_operation_batch_size=batch_size),
            new_execution_id=lambda: f"x{next(counter_ids)}",
        )
    )


def state_of(result: EpisodeResult) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(result.input or "null")
    return data
