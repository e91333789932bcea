"""Parse what the Python worker returns: the ``OrchestratorState`` JSON.

Shapes: ``docs/durable-protocol.md``, "The orchestrator's answer: OrchestratorState and actions".

The SDK either returns the state JSON, or raises an exception whose text carries
``"\\n\\n$OutOfProcData$:" + state JSON`` (the error path). Both end up as an ``OrchestratorOutcome``.
"""

from __future__ import annotations

import enum
import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from durable_local.history import parse_timestamp
from durable_local.model import OrchestratorFn

logger = logging.getLogger(__name__)

OUT_OF_PROC_LABEL = "\n\n$OutOfProcData$:"


class ActionType(enum.IntEnum):
    """Extension ``AsyncActionType`` codes."""

    CALL_ACTIVITY = 0
    CALL_ACTIVITY_WITH_RETRY = 1
    CALL_SUB_ORCHESTRATOR = 2
    CALL_SUB_ORCHESTRATOR_WITH_RETRY = 3
    CONTINUE_AS_NEW = 4
    CREATE_TIMER = 5
    WAIT_FOR_EXTERNAL_EVENT = 6
    CALL_ENTITY = 7
    CALL_HTTP = 8
    SIGNAL_ENTITY = 9
    SCHEDULED_SIGNAL_ENTITY = 10
    WHEN_ANY = 11
    WHEN_ALL = 12


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The extension's ``RetryOptions`` as read by its ``RetryOptionsConverter``; DTFx defaults otherwise."""

    first_retry_interval_ms: float
    max_number_of_attempts: int
    backoff_coefficient: float = 1.0
    max_retry_interval_ms: float | None = 6 * 24 * 3600 * 1000.0
    """The extension's default cap is 6 days."""
    retry_timeout_ms: float | None = None


@dataclass(frozen=True, slots=True)
class Action:
    """One ``AsyncAction`` of the worker's action list (frozen: the next episode of the execution may reuse it)."""

    kind: ActionType
    function_name: str | None = None
    input: str | None = None
    """JSON text (the SDK already JSON-encodes activity/sub-orchestration inputs)."""
    instance_id: str | None = None
    fire_at: datetime | None = None
    is_canceled: bool = False
    event_name: str | None = None
    retry: RetryPolicy | None = None
    children: list[Action] = field(default_factory=list)
    operation: str | None = None
    """Entity operation name (CallEntity / SignalEntity)."""


@dataclass(slots=True)
class OrchestratorOutcome:
    """The worker's answer for one invocation."""

    is_done: bool
    actions: list[list[Action]]
    schema_version: int = 0
    output: str | None = None
    """JSON text of the output, None when absent or null."""
    error: str | None = None
    custom_status: str | None = None
    """JSON text, None when the SDK left it out (it drops falsy values)."""
    crash: str | None = None
    """Set when the call failed without the out-of-proc state (nothing to replay)."""
    parsed: ParsedActions | None = None
    """The action groups as the worker sent them and as parsed (None when there was no state to parse)."""


@dataclass(frozen=True, slots=True)
class ParsedActions:
    """One answer's action groups as JSON values and as ``Action`` objects, kept for the next answer of the same
    execution: the worker sends every action of the execution each time (the SDK replays from the start), so the next
    answer repeats these and adds a few, and only those few need parsing (``parse_actions``)."""

    raw: list[list[Any]]
    parsed: list[list[Action]]
    plain: list[list[bool]]
    """Whether each action holds only text where ``parse_action`` keeps a value as given (``_plain``)."""
    reused: int = 0
    """How many actions of this answer were taken from the previous one instead of parsed."""


def invoke_orchestrator(
    handle: OrchestratorFn, context_json: str, previous: ParsedActions | None = None
) -> OrchestratorOutcome:
    """Call the orchestrator handle and parse its answer, including the SDK's error path. ``previous``: the same
    execution's previous answer, whose actions are reused where this answer repeats them."""
    try:
        raw = handle(context_json)
    except Exception as exc:  # the SDK reports user-code failures by raising: parse, don't propagate
        text = str(exc)
        label = text.find(OUT_OF_PROC_LABEL)
        if label < 0:
            logger.info("orchestrator raised without out-of-proc state: %s", type(exc).__name__)
            return OrchestratorOutcome(is_done=False, actions=[], crash=text or type(exc).__name__)
        outcome = parse_state(text[label + len(OUT_OF_PROC_LABEL) :], previous)
        if not outcome.error:
            outcome.error = text[:label]
        return outcome
    if not isinstance(raw, str):
        raw = json.dumps(raw)
    return parse_state(raw, previous)


def parse_state(text: str, previous: ParsedActions | None = None) -> OrchestratorOutcome:
    """Parse an ``OrchestratorState`` JSON document (reusing ``previous``'s actions where it repeats them)."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("Out of proc orchestrators must return a valid JSON schema")
    output = data.get("output")
    custom = data.get("customStatus")
    parsed = parse_actions(data.get("actions") or [], previous)
    return OrchestratorOutcome(
        is_done=bool(data.get("isDone", False)),
        actions=parsed.parsed,
        schema_version=_schema(data.get("schemaVersion", 0)),
        output=None if output is None else json.dumps(output),
        error=data.get("error") or None,
        custom_status=None if custom is None else json.dumps(custom),
        parsed=parsed,
    )


def parse_actions(groups: list[Any], previous: ParsedActions | None = None) -> ParsedActions:
    """Parse the action groups; an action equal (as a JSON value) to the one in the same place of ``previous`` is
    taken from it when that one was ``_plain``: an equal text is the same text, so parsing it again would give an equal
    ``Action``. (Equal numbers of other types are not the same JSON, ``1 == 1.0 == True``: such actions are parsed.)"""
    raw_groups: list[list[Any]] = []
    parsed_groups: list[list[Action]] = []
    plain_groups: list[list[bool]] = []
    reused = 0
    for index, group in enumerate(groups):
        items = list(group)
        old_raw, old_parsed, old_plain = _group(previous, index)
        parsed: list[Action] = []
        plain: list[bool] = []
        for position, item in enumerate(items):
            if position < len(old_raw) and old_plain[position] and item == old_raw[position]:
                parsed.append(old_parsed[position])
                plain.append(True)
                reused += 1
            else:
                parsed.append(parse_action(item))
                plain.append(_plain(item))
        raw_groups.append(items)
        parsed_groups.append(parsed)
        plain_groups.append(plain)
    return ParsedActions(raw_groups, parsed_groups, plain_groups, reused)


def _group(previous: ParsedActions | None, index: int) -> tuple[list[Any], list[Action], list[bool]]:
    if previous is None or index >= len(previous.raw):
        return [], [], []
    return previous.raw[index], previous.parsed[index], previous.plain[index]


_KEPT_AS_GIVEN = ("functionName", "input", "instanceId", "fireAt", "externalEventName", "operation")


def _plain(data: Any) -> bool:
    """Every value ``parse_action`` keeps as given (or encodes) is text or null, in the action and its children; the
    others it converts (``int``, ``float``, ``bool``), which gives equal results for equal values."""
    if not isinstance(data, dict):
        return False
    for key in _KEPT_AS_GIVEN:
        value = data.get(key)
        if value is not None and type(value) is not str:
            return False
    return all(_plain(child) for child in data.get("compoundActions") or [])


def _schema(value: Any) -> int:
    # The extension reads schemaVersion with a StringEnumConverter: names and numbers both work.
    names = {"original": 0, "v2": 1, "replaypatchv1": 1, "v3": 2}
    if isinstance(value, str):
        return names.get(value.lower(), 0) if not value.isdigit() else int(value)
    return int(value or 0)


def parse_action(data: dict[str, Any]) -> Action:
    kind = ActionType(int(data["actionType"]))
    fire_at = data.get("fireAt")
    retry = data.get("retryOptions")
    return Action(
        kind=kind,
        function_name=data.get("functionName"),
        input=_as_text(data.get("input")),
        instance_id=data.get("instanceId"),
        fire_at=parse_timestamp(fire_at) if isinstance(fire_at, str) else None,
        is_canceled=bool(data.get("isCanceled", False)),
        event_name=data.get("externalEventName"),
        retry=_retry(retry) if isinstance(retry, dict) else None,
        children=[parse_action(child) for child in data.get("compoundActions") or []],
        operation=data.get("operation"),
    )


def _as_text(value: Any) -> str | None:
    """Action inputs are JSON text already (``df_dumps``); anything else is encoded here."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value)


def _retry(data: dict[str, Any]) -> RetryPolicy:
    if "firstRetryIntervalInMilliseconds" not in data or "maxNumberOfAttempts" not in data:
        raise ValueError("Invalid JSON. retryOptions needs firstRetryIntervalInMilliseconds and maxNumberOfAttempts")
    policy = RetryPolicy(
        first_retry_interval_ms=float(data["firstRetryIntervalInMilliseconds"]),
        max_number_of_attempts=int(data["maxNumberOfAttempts"]),
    )
    extra: dict[str, Any] = {}
    if "backoffCoefficient" in data:
        extra["backoff_coefficient"] = float(data["backoffCoefficient"])
    if "maxRetryIntervalInMilliseconds" in data:
        extra["max_retry_interval_ms"] = float(data["maxRetryIntervalInMilliseconds"])
    if "retryTimeoutInMilliseconds" in data:
        extra["retry_timeout_ms"] = float(data["retryTimeoutInMilliseconds"])
    if extra:
        policy = RetryPolicy(
            first_retry_interval_ms=policy.first_retry_interval_ms,
            max_number_of_attempts=policy.max_number_of_attempts,
            **extra,
        )
    return policy
