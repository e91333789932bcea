"""The out-of-proc entity protocol: the batch JSON an entity function gets and the result JSON it returns.

Request (``Bindings/EntityTriggerAttributeBindingProvider.cs``, ``EntityContextToString``)::

    {"self": {"name": "<lower-case name>", "key": "<key>"}, "exists": <bool>, "state": <JSON text or null>,
     "batch": [{"name": "<operation>", "input": <JSON text or null>, "isSignal": <bool>}, ...]}

The Python SDK (``DurableEntityContext.from_json``) passes every top-level key except ``self`` and ``batch`` to
its constructor, so the keys must be exactly these.

Result (``Listener/TaskEntityShim.cs``, ``OutOfProcResult``)::

    {"entityExists": <bool>, "entityState": <JSON text or null>,
     "results": [{"result": <JSON text>, "isError": <bool>, "duration": <ms>, ...}, ...],   # one per operation
     "signals": [{"target": {"name", "key"}, "name": "<operation>", "input": <JSON text>}, ...]}

Anything else (not JSON, wrong shape, fewer results than operations) is what the extension reports as "Out of
proc orchestrators must return a valid JSON schema": the batch is aborted and its messages retried.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from durable_local.entities.ids import EntityId
from durable_local.entities.messages import RequestMessage


class EntityBatchError(Exception):
    """The entity function failed as a whole (not one operation): the batch is aborted and retried."""


@dataclass(frozen=True, slots=True)
class OperationResult:
    result: str | None
    is_error: bool
    duration_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class SignalRequest:
    target: EntityId
    operation: str
    input: str | None


@dataclass(frozen=True, slots=True)
class BatchResult:
    entity_exists: bool
    entity_state: str | None
    results: list[OperationResult]
    signals: list[SignalRequest]


def batch_request(entity: EntityId, *, exists: bool, state: str | None, operations: Sequence[RequestMessage]) -> str:
    return json.dumps(
        {
            "self": {"name": entity.name, "key": entity.key},
            "exists": exists,
            "state": state,
            "batch": [{"name": op.operation, "input": op.input, "isSignal": op.is_signal} for op in operations],
        }
    )


def parse_batch_result(text: Any, operation_count: int) -> BatchResult:
    """Read the entity function's answer; ``EntityBatchError`` names what is wrong with it."""
    try:
        data = json.loads(text) if isinstance(text, str | bytes) else text
    except ValueError as exc:
        raise EntityBatchError(f"Out of proc orchestrators must return a valid JSON schema: {exc}") from exc
    if not isinstance(data, dict):
        raise EntityBatchError("Out of proc orchestrators must return a valid JSON schema: not a JSON object")
    raw_results = data.get("results")
    if not isinstance(raw_results, list) or len(raw_results) < operation_count:
        raise EntityBatchError(
            f"the entity function returned {len(raw_results) if isinstance(raw_results, list) else 'no'} results "
            f"for a batch of {operation_count} operations"
        )
    try:
        results = [_result(item) for item in raw_results[:operation_count]]
        signals = [_signal(item) for item in data.get("signals") or []]
    except (TypeError, ValueError, AttributeError) as exc:
        raise EntityBatchError(f"Out of proc orchestrators must return a valid JSON schema: {exc}") from exc
    state = data.get("entityState")
    return BatchResult(
        entity_exists=bool(data.get("entityExists", False)),
        entity_state=None if state is None else str(state),
        results=results,
        signals=signals,
    )


def _result(item: Any) -> OperationResult:
    if not isinstance(item, dict):
        raise ValueError(f"an operation result must be a JSON object, got {item!r}")
    result = item.get("result")
    return OperationResult(
        result=None if result is None else str(result),
        is_error=bool(item.get("isError", False)),
        duration_ms=float(item.get("duration") or 0),
    )


def _signal(item: Any) -> SignalRequest:
    if not isinstance(item, dict):
        raise ValueError(f"a signal must be a JSON object, got {item!r}")
    value = item.get("input")
    return SignalRequest(EntityId.from_json(item.get("target")), str(item.get("name") or ""), value)
