"""Serialisation shared by the stores: UTC timestamps, task messages, instance rows, continuation tokens.

The in-memory stores use the same round trips as SQLite so both hand out private copies: a caller that
mutates a returned event dict (e.g. to set ``IsPlayed``) cannot change what is stored, and a payload that
would not survive JSON fails in memory exactly as it would on disk.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from durable_local.model import InstanceRecord, RuntimeStatus, TaskMessage


def require_utc(moment: datetime, what: str = "datetime") -> datetime:
    """``moment`` converted to UTC; naive datetimes are rejected (they are always a bug here)."""
    if moment.tzinfo is None:
        raise ValueError(f"{what} must be timezone-aware, got naive {moment.isoformat()}")
    return moment.astimezone(UTC)


def format_utc(moment: datetime) -> str:
    """Fixed-width ISO-8601 in UTC (``2024-01-02T03:04:05.000006+00:00``).

    Fixed width matters: SQLite compares these strings, so lexicographic order must equal time order
    (``datetime.isoformat`` drops the fraction when it is zero, which would break that).
    """
    u = require_utc(moment)
    return (
        f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}.{u.microsecond:06d}+00:00"
    )


def parse_utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _opt_format(moment: datetime | None) -> str | None:
    return None if moment is None else format_utc(moment)


def _opt_parse(text: str | None) -> datetime | None:
    return None if text is None else parse_utc(text)


# --------------------------------------------------------------------------------------------------
# Events and task messages


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
"""One encoder for every call: ``json.dumps`` with arguments builds a new one each time, which costs more than
encoding a small history event."""


def dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def encode_task_message(message: TaskMessage) -> str:
    data: dict[str, Any] = {
        "instance_id": message.instance_id,
        "execution_id": message.execution_id,
        "event": message.event,
        "sequence_number": message.sequence_number,
    }
    if message.sender is not None:
        data["sender"] = message.sender
    return dumps(data)


def decode_task_message(text: str) -> TaskMessage:
    data = json.loads(text)
    return TaskMessage(
        instance_id=str(data["instance_id"]),
        execution_id=None if data.get("execution_id") is None else str(data["execution_id"]),
        event=dict(data["event"]),
        sequence_number=int(data.get("sequence_number", 0)),
        sender=None if data.get("sender") is None else str(data["sender"]),
    )


def clone_task_message(message: TaskMessage) -> TaskMessage:
    return decode_task_message(encode_task_message(message))


# --------------------------------------------------------------------------------------------------
# Instance rows


def normalize_record(record: InstanceRecord) -> InstanceRecord:
    """A private copy with every datetime in UTC (rejecting naive ones) and its own tags dict."""
    return replace(
        record,
        created_time=require_utc(record.created_time, "created_time"),
        last_updated_time=require_utc(record.last_updated_time, "last_updated_time"),
        completed_time=None if record.completed_time is None else require_utc(record.completed_time),
        scheduled_start_time=None if record.scheduled_start_time is None else require_utc(record.scheduled_start_time),
        tags=dict(record.tags),
    )


def copy_record(record: InstanceRecord) -> InstanceRecord:
    """A copy that shares nothing mutable with ``record`` (only ``tags`` is mutable)."""
    return replace(record, tags=dict(record.tags))


def encode_record(record: InstanceRecord) -> str:
    return dumps(
        {
            "instance_id": record.instance_id,
            "name": record.name,
            "execution_id": record.execution_id,
            "status": record.status.value,
            "created_time": format_utc(record.created_time),
            "last_updated_time": format_utc(record.last_updated_time),
            "version": record.version,
            "input": record.input,
            "output": record.output,
            "custom_status": record.custom_status,
            "completed_time": _opt_format(record.completed_time),
            "generation": record.generation,
            "parent_instance_id": record.parent_instance_id,
            "scheduled_start_time": _opt_format(record.scheduled_start_time),
            "tags": dict(record.tags),
        }
    )


def decode_record(text: str) -> InstanceRecord:
    data = json.loads(text)
    return InstanceRecord(
        instance_id=data["instance_id"],
        name=data["name"],
        execution_id=data["execution_id"],
        status=RuntimeStatus(int(data["status"])),
        created_time=parse_utc(data["created_time"]),
        last_updated_time=parse_utc(data["last_updated_time"]),
        version=data.get("version") or "",
        input=data.get("input"),
        output=data.get("output"),
        custom_status=data.get("custom_status"),
        completed_time=_opt_parse(data.get("completed_time")),
        generation=int(data.get("generation", 0)),
        parent_instance_id=data.get("parent_instance_id"),
        scheduled_start_time=_opt_parse(data.get("scheduled_start_time")),
        tags=dict(data.get("tags") or {}),
    )


# --------------------------------------------------------------------------------------------------
# Continuation tokens for instance queries (instances are listed in instance-id order)

_TOKEN_PREFIX = "dl1:"  # noqa: S105 - a format marker, not a secret


def encode_continuation(last_instance_id: str) -> str:
    """An opaque token meaning "continue after this instance id"."""
    raw = base64.urlsafe_b64encode(last_instance_id.encode("utf-8")).decode("ascii")
    return _TOKEN_PREFIX + raw


def decode_continuation(token: str) -> str:
    """The instance id a token continues after; ``ValueError`` for a token this module did not make."""
    if not token.startswith(_TOKEN_PREFIX):
        raise ValueError("invalid continuation token")
    try:
        raw = token[len(_TOKEN_PREFIX) :].encode("ascii")
        # validate=True: the lenient default silently drops foreign characters and accepts garbage.
        return base64.b64decode(raw, altchars=b"-_", validate=True).decode("utf-8")
    except (binascii.Error, UnicodeError) as exc:
        raise ValueError("invalid continuation token") from exc
