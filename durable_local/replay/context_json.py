"""The orchestration context JSON the extension sends to the Python worker (``docs/durable-protocol.md``,
"The context JSON").

Built like ``OrchestrationTriggerAttributeBindingProvider.OrchestrationContextToString``.
"""

from __future__ import annotations

import json
from datetime import timedelta

from durable_local.model import HistoryEvent
from durable_local.replay.api import ReplaySettings

SCHEMA_V2 = 1
SCHEMA_V3 = 2


def format_timespan(span: timedelta) -> str:
    """.NET ``TimeSpan.ToString()``: ``[-][d.]hh:mm:ss[.fffffff]`` (e.g. ``"3.00:00:00"``)."""
    ticks = (span.days * 86_400 + span.seconds) * 10_000_000 + span.microseconds * 10
    sign = "-" if ticks < 0 else ""
    ticks = abs(ticks)
    days, rest = divmod(ticks, 86_400 * 10_000_000)
    hours, rest = divmod(rest, 3_600 * 10_000_000)
    minutes, rest = divmod(rest, 60 * 10_000_000)
    seconds, fraction = divmod(rest, 10_000_000)
    text = f"{sign}{days}." if days else sign
    text += f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    if fraction:
        text += f".{fraction:07d}"
    return text


def build_context_json(
    *,
    instance_id: str,
    past_events: list[HistoryEvent],
    current_events: list[HistoryEvent],
    input: str | None,
    parent_instance_id: str | None,
    settings: ReplaySettings,
) -> str:
    """``history`` = every event of the current execution: replayed ones with IsPlayed true, this episode's
    (its OrchestratorStarted first) with IsPlayed false."""
    history = [{**event, "IsPlayed": True} for event in past_events]
    history.extend({**event, "IsPlayed": False} for event in current_events)
    fields = _context_fields(instance_id, bool(past_events), input, parent_instance_id, settings)
    return json.dumps({"history": history, **fields})


def context_json_from_past(
    *,
    instance_id: str,
    past_json: list[str],
    current_events: list[HistoryEvent],
    input: str | None,
    parent_instance_id: str | None,
    settings: ReplaySettings,
) -> str:
    """``build_context_json`` with the past events given as their text (``execution_cache.past_event_json``), byte
    for byte: the default ``json.dumps`` writes a list as its items' texts joined by ``", "`` and an object as
    ``{"key": value, ...}``, so the history's text is spliced in front of the other fields'."""
    current = [json.dumps({**event, "IsPlayed": False}) for event in current_events]
    fields = json.dumps(_context_fields(instance_id, bool(past_json), input, parent_instance_id, settings))
    history = ", ".join([*past_json, *current])
    return '{"history": [' + history + "], " + fields[1:]


def _context_fields(
    instance_id: str, replaying: bool, input: str | None, parent_instance_id: str | None, settings: ReplaySettings
) -> dict[str, object]:
    """Every field of the context but ``history``, in the order the extension writes them."""
    return {
        # The extension sends ``GetInputAsJson()`` = ``ConvertToJToken(RawInput)``: the stored input parsed once, so a
        # client that posted JSON text as a JSON string (the Python SDK's start_new does) reaches get_input() decoded.
        "input": _input_token(input),
        "instanceId": instance_id,
        # DTFx replays past events first: the worker is called while ExecutionStarted is replayed.
        "isReplaying": replaying,
        "parentInstanceId": parent_instance_id,
        "upperSchemaVersion": SCHEMA_V2,
        "upperSchemaVersionNew": SCHEMA_V3,
        "longRunningTimerIntervalDuration": format_timespan(settings.long_running_timer_interval),
        "maximumShortTimerDuration": format_timespan(settings.maximum_short_timer_duration),
        "defaultHttpAsyncRequestSleepTimeMillseconds": settings.default_http_async_request_sleep_ms,
    }


def _input_token(raw: str | None) -> object:
    """``MessagePayloadDataConverter.ConvertToJToken``: parse the raw input one level (text that is not JSON stays
    a string, as a lenient reader would keep it)."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw
