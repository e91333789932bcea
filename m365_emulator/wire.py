"""What handlers receive and return, independent of the HTTP server, plus the shared error shapes."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    """Path without the query string, percent-decoded."""
    query: Mapping[str, str]
    headers: Mapping[str, str]
    """Lower-cased header names."""
    body: bytes
    base_url: str


@dataclass(frozen=True)
class Reply:
    """An HTTP answer: status, body (JSON-serialisable, or None for no body), extra headers.

    ``raw`` replaces the serialised body with these exact bytes (a broken JSON page, as the real services sometimes
    send one).
    """

    status: int
    body: Any
    headers: tuple[tuple[str, str], ...] = field(default=())
    raw: bytes | None = None


def api_error(
    status: int, code: str, message: str, *, retry_after: int | None = None, request: Request | None = None
) -> Reply:
    """An error in the Graph/Exchange REST JSON shape: ``{"error": {"code", "message", "innerError"}}``."""
    client_request_id = request.headers.get("client-request-id", "") if request is not None else ""
    body = {
        "error": {
            "code": code,
            "message": message,
            "innerError": {
                "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
                "request-id": str(uuid.uuid4()),
                "client-request-id": client_request_id or str(uuid.uuid4()),
            },
        }
    }
    headers: tuple[tuple[str, str], ...] = ()
    if retry_after is not None:
        headers = (("Retry-After", str(retry_after)),)
    return Reply(status, body, headers)


def iso_z(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: object) -> datetime:
    """ISO-8601 with or without offset/``Z`` (naive means UTC, as the services assume)."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"not a date/time: {value!r}")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
