"""What the collections API's modules share: the Durable client port, the response type and status readers."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import urlsplit

import azure.functions as func

from shared.errors import ConfigError
from shared.models import JsonDict, iso
from shared.requests.admission import RUN, sealed
from shared.window.machine import CollectionSpec

ACTIVE = frozenset({"Running", "Pending", "ContinuedAsNew", "Suspended"})
CANCEL_REASON = "cancelled through POST /api/collections/{id}/cancel at {at}"
"""The termination reason ``cancel`` gives; a terminated instance's output is its reason (DTFx)."""
_CANCEL_MARK = CANCEL_REASON.split("{", 1)[0]


class DurableClient(Protocol):
    """The subset of ``DurableOrchestrationClient`` the API uses."""

    async def start_new(self, orchestration_function_name: str, instance_id: str | None, client_input: Any) -> str: ...

    async def get_status(self, instance_id: str, show_history: bool = ..., show_history_output: bool = ...,
                         show_input: bool = ...) -> Any: ...  # fmt: skip

    async def signal_entity(self, entity_id: Any, operation_name: str, operation_input: Any = ..., /) -> None: ...

    async def read_entity_state(self, entity_id: Any, /) -> Any:
        """An ``EntityStateResponse``: ``entity_exists`` and ``entity_state``."""
        ...

    async def terminate(self, instance_id: str, reason: str, /) -> None: ...


@dataclass(frozen=True, slots=True)
class ApiResponse:
    status: int
    body: JsonDict
    instance_id: str | None = None
    """Set when the body should be merged into the Durable check-status payload for this instance."""


JSON_HEADERS = {"X-Content-Type-Options": "nosniff"}
"""Headers of every JSON answer: browsers must not sniff a JSON body (which may echo request text) as HTML."""


def json_answer(status: int, body: object) -> func.HttpResponse:
    """A JSON answer of the API (``application/json``, ``nosniff``)."""
    return func.HttpResponse(json.dumps(body), status_code=status, mimetype="application/json", headers=JSON_HEADERS)


def answer_with_links(client: Any, result: ApiResponse, summary_route: str) -> func.HttpResponse:
    """``result`` as JSON; an answer naming an instance also carries its Durable management URLs and ``summaryUri``
    (``/api/<summary_route>/<id>``).

    Never from the request: its URL carries whatever ``Host`` header the caller sent, and the SDK would copy that
    origin into every management URL (with the system key). The binding's URLs come from the host's configured name
    (``WEBSITE_HOSTNAME`` on Azure; the local host's own base), and ``summaryUri`` takes the same origin."""
    body = dict(result.body)
    if result.instance_id is not None:
        links = client.get_client_response_links(None, result.instance_id)
        parts = urlsplit(links["statusQueryGetUri"])
        summary = f"{parts.scheme}://{parts.netloc}/api/{summary_route}/{result.instance_id}"
        body = {**links, **body, "summaryUri": summary}
    return json_answer(result.status, body)


def config_error_answer(exc: ConfigError) -> func.HttpResponse:
    """A setting the app cannot run with: 500, naming the setting."""
    return json_answer(500, {"error": {"field": exc.setting, "rule": "config", "message": str(exc)}})


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


def orchestration_input(
    spec: CollectionSpec,
    request: JsonDict,
    now: datetime,
    plan: JsonDict | None = None,
    *,
    secret: str = "",
    run: str | None = None,
) -> JsonDict:
    """The collection's orchestration input, sealed for its instance (``shared.requests.admission``) under
    ``secret`` (``COLLECTOR_BUDGET_SECRET``); ``plan`` (``http_api.plan_report``) is kept for its summary; ``run``:
    the run id its budget token is derived from (a new random one by default). No token is stored in it: the
    admission activity derives the token where it is needed."""
    payload: JsonDict = {"spec": spec.to_json(), "state": None, "request": request, "startedAt": iso(now)}
    if plan is not None:
        payload["plan"] = plan
    payload[RUN] = run or uuid.uuid4().hex
    return sealed(secret, spec.collection_id, payload)


def cancelled_reason(status: Any) -> str | None:
    """The reason of a collection ended by ``POST .../cancel`` (terminated with ``CANCEL_REASON``), else None."""
    if runtime_status(status) != "Terminated":
        return None
    output = json_field(getattr(status, "output", None))
    return output if isinstance(output, str) and output.startswith(_CANCEL_MARK) else None
