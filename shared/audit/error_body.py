"""Reading the reason out of an audit API error body, wherever the service put it, and what kind of problem it is.

The services nest the useful part:

* Exchange ``InvokeCommand`` answers a failing cmdlet with ``error.message`` = "Error executing cmdlet"; the reason is
  in ``error.details[].message`` (often ``code|exception type|text``, sometimes a JSON string with ``Message``) and in
  ``error.innererror.internalException.message`` — what CIPP's ``New-ExoRequest.ps1`` and GreyCorbel's ExoHelper
  (``Get-ExoException.ps1``) read.
* Graph puts a more specific code in ``error.innerError.code``.
* Some routes answer in the ASP.NET Web API shape ``{"Message": ..., "MessageDetail": ...}`` (the audit query DELETE,
  msgraph-sdk-powershell #3421).

:func:`classify` maps the texts to a problem class by markers; ``None`` leaves the HTTP status to decide.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_MAX_DETAIL = 300
THROTTLED = "throttled (429)"
"""How the message of a call still answered 429 after its HTTP retries begins (the window retries such a step without
spending an attempt: ``shared.window.machine``)."""


class Problem(enum.Enum):
    AUDITING_DISABLED = "auditing_disabled"
    """The tenant's unified auditing is off (Graph: a 400 ``UnknownError`` whose message is a JSON string with
    ``"Status":"AuditingDisabledTenant"``, CIPP-API ``New-CippAuditLogSearch.ps1``): every query fails alike."""
    PERMISSION = "permission"
    """A permission or role is missing: retrying cannot help, and every chunk fails alike."""
    ROUTING = "routing"
    """The anchor mailbox routing hint is wrong."""
    TRANSIENT = "transient"
    """Throttling or a passing failure, whatever the status code."""


# Markers are matched case-insensitively against every text of the body (the service's own spelling varies:
# "Maximum number of concurrent requests" and "maximum number of concurrent requests" are one throttle).
_MARKERS: tuple[tuple[Problem, tuple[str, ...]], ...] = (
    (Problem.AUDITING_DISABLED, ("AuditingDisabledTenant",)),
    (Problem.ROUTING, ("ErrorIncorrectRoutingHint", "does not match the target of the request")),
    (
        Problem.PERMISSION,
        (
            "Authorization_RequestDenied",
            "InsufficientPrivileges",
            "AccessDenied",
            "CmdletAccessDenied",
            "isn't supported in this scenario",  # Exchange: the app's role does not cover the cmdlet
            "is not recognized as the name of a cmdlet",  # the session's roles do not include the cmdlet at all
        ),
    ),
    (
        Problem.TRANSIENT,
        (
            "maximum number of concurrent requests",  # Exchange tenant throttling (ExoHelper retries on it)
            "issue may be transient",
            "A task was canceled",  # Exchange sync search timing out (Microsoft-Extractor-Suite #199)
            # Exchange exceptions behind a 400 that a public InvokeCommand client retries (jflieben/M365Permissions
            # ExchangeRestClient.cs): the cmdlet proxy or its backend was busy or unreachable, nothing was done.
            "CmdletProxyNotAvailableFailure",
            "ServerBusyException",
            "TransientException",
            "BackendCommunicationException",
            # Graph audit queries: a 400 "UnknownError" that is not auditing turned off (matched before) is what
            # CIPP-API retries (New-CippAuditLogSearchV2.ps1, Push-AuditLogDownloadV2.ps1).
            "UnknownError",
        ),
    ),
)


@dataclass(frozen=True)
class ErrorBody:
    code: str
    """The most specific code found (``error.code``, else the inner one)."""
    message: str
    """The most telling text: a nested reason when the outer message is generic, truncated."""
    texts: tuple[str, ...]
    """Every code and message found, outermost first."""


def _detail_texts(message: str) -> Iterator[str]:
    """A details message, plus what it wraps: ``code|type|text`` or a JSON string with a ``Message``."""
    yield message
    parts = message.split("|")
    if len(parts) >= 3:
        yield parts[-1]
    if message.lstrip().startswith("{"):
        try:
            inner = json.loads(message)
        except ValueError:
            return
        if isinstance(inner, dict):
            for key in ("Message", "message"):
                if isinstance(inner.get(key), str):
                    yield inner[key]


def _texts(error: dict[str, Any]) -> Iterator[str]:
    for key in ("code", "message"):
        if isinstance(error.get(key), str):
            yield error[key]
    details = error.get("details")
    for item in details if isinstance(details, list) else []:
        if isinstance(item, dict):
            if isinstance(item.get("code"), str):
                yield item["code"]
            if isinstance(item.get("message"), str):
                yield from _detail_texts(item["message"])
    inner = error.get("innerError") or error.get("innererror")
    if isinstance(inner, dict):
        for key in ("code", "message"):
            if isinstance(inner.get(key), str):
                yield inner[key]
        internal = inner.get("internalException")
        if isinstance(internal, dict) and isinstance(internal.get("message"), str):
            yield internal["message"]


def html_text(text: str) -> str | None:
    """The title (or first words) of an HTML error page, as a gateway answers; None when ``text`` is not HTML."""
    lowered = text.lstrip()[:200].lower()
    if not (lowered.startswith("<!doctype html") or lowered.startswith("<html") or "<body" in lowered):
        return None
    start, end = text.lower().find("<title>"), text.lower().find("</title>")
    inner = text[start + 7 : end] if 0 <= start < end else re.sub(r"<[^>]*>", " ", text)
    words = " ".join(inner.split())
    return f"an HTML error page ({words[:120]})" if words else "an HTML error page"


def parse_error_body(body: Any, fallback: str) -> ErrorBody:
    """The parts of an error body (a parsed JSON value); ``fallback`` (text or reason phrase) when it has none."""
    texts: list[str] = []
    code = ""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            texts = [t for t in _texts(error) if t.strip()]
            code = str(error.get("code") or "")
            inner = error.get("innerError") or error.get("innererror")
            if not code and isinstance(inner, dict):
                code = str(inner.get("code") or "")
        elif isinstance(error, str):  # OAuth-style {"error": "...", "error_description": "..."}
            code = error
            texts = [error, str(body.get("error_description") or body.get("message") or "")]
        else:
            # The Web API shape; and a bare status object ({"Status": "AuditingDisabledTenant", ...}), which CIPP-API
            # also looks for at the top level.
            keys = ("Message", "MessageDetail", "message", "Status")
            texts = [str(body[k]) for k in keys if isinstance(body.get(k), str)]
    if not texts:
        texts = [html_text(fallback) or fallback[:_MAX_DETAIL]]
    return ErrorBody(code=code, message=_telling(texts, code)[:_MAX_DETAIL], texts=tuple(texts))


def _telling(texts: list[str], code: str) -> str:
    """The outer message, or the deepest reason when the outer one only says a cmdlet failed."""
    messages = [t for t in texts if t != code]
    if not messages:
        return code
    outer = messages[0]
    if outer.strip().rstrip(".").lower() in ("error executing cmdlet", "an error has occurred") and len(messages) > 1:
        return f"{outer}: {messages[-1]}"
    return outer


def classify(body: ErrorBody) -> Problem | None:
    """The problem the body's texts name, first match in auditing-disabled, routing, permission, transient order;
    else None."""
    haystack = "\n".join(body.texts).lower()
    for problem, markers in _MARKERS:
        if any(marker.lower() in haystack for marker in markers):
            return problem
    return None
