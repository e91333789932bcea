"""What the collections API's modules share: the Durable client port, the response type and status readers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from shared.models import JsonDict, iso
from shared.window import CollectionSpec

ACTIVE = frozenset({"Running", "Pending", "ContinuedAsNew", "Suspended"})


class DurableClient(Protocol):
    """The subset of ``DurableOrchestrationClient`` the API uses."""

    async def start_new(self, orchestration_function_name: str, instance_id: str | None, client_input: Any) -> str: ...

    async def get_status(self, instance_id: str, show_history: bool = ..., show_history_output: bool = ...,
                         show_input: bool = ...) -> Any: ...  # fmt: skip


@dataclass(frozen=True, slots=True)
class ApiResponse:
    status: int
    body: JsonDict
    instance_id: str | None = None
    """Set when the body should be merged into the Durable check-status payload for this instance."""


def error(status: int, field: str, rule: str, message: str) -> ApiResponse:
    return ApiResponse(status, {"error": {"field": field, "rule": rule, "message": message}})


def runtime_status(status: Any) -> str | None:
    value = getattr(status, "runtime_status", None)
    if value is None:
        return None
    return str(getattr(value, "value", value))


def json_field(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def orchestration_input(spec: CollectionSpec, request: JsonDict, now: datetime, budget_token: str = "") -> JsonDict:
    """``budget_token``: the collection's token for its tenant budget operations (``Settings.budget_token``)."""
    payload: JsonDict = {"spec": spec.to_json(), "state": None, "request": request, "startedAt": iso(now)}
    if budget_token:
        payload["budgetToken"] = budget_token
    return payload
