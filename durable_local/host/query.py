"""Query strings as the extension reads them: parameter names are case-insensitive.

``HttpRequestMessageExtensions.GetQueryNameValuePairs`` (Azure/azure-functions-durable-extension) collects the
query into ``new NameValueCollection(StringComparer.OrdinalIgnoreCase)``, so ``showhistory=true`` and
``RUNTIMESTATUS=Running`` work on Azure; aiohttp's ``request.query`` is case-sensitive.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from durable_local.model import RuntimeStatus

_KEY = "durable_local.query"


def query_of(request: web.Request) -> CIMultiDictProxy[str]:
    """The request's query with case-insensitive names (built once per request)."""
    cached = request.get(_KEY)
    if isinstance(cached, CIMultiDictProxy):
        return cached
    query: CIMultiDictProxy[str] = CIMultiDictProxy(CIMultiDict(request.query))
    request[_KEY] = query
    return query


def query_bool(value: str | None) -> bool | None:
    if value is None:
        return None
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    return None


def query_int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def query_float(value: str | None) -> float | None:
    """A finite number of seconds, else None: ``timeout=nan`` would make a wait loop never end."""
    try:
        number = float(value) if value is not None else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) else None


def query_time(value: str | None) -> datetime | None:
    """Query timestamps; the SDK can send years without leading zeros, which are padded like the extension."""
    if not value:
        return None
    text = value.strip()
    year, dash, rest = text.partition("-")
    if dash and year.isdigit() and len(year) < 4:
        text = year.zfill(4) + "-" + rest
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a valid timestamp") from exc
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def query_statuses(values: list[str]) -> list[RuntimeStatus]:
    found: list[RuntimeStatus] = []
    for value in values:
        for part in value.split(","):
            if part.strip():
                try:
                    found.append(RuntimeStatus.from_display(part))
                except ValueError:
                    continue  # the extension ignores names it cannot parse
    return found
