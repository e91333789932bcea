"""Paging through the task hub's instances with the Durable list API's continuation token.

The SDK's list calls (``get_status_by``, ``get_status_all``) send no page size and follow no continuation token, so
they return one page (docs/design.md, "Listing"): 5 of 100 followers were listed. The management API pages with the
``x-ms-continuation-token`` header: each answer carries the next page's token, empty (or null) on the last page
(``HttpApiHandler`` in ``Azure/azure-functions-durable-extension``; docs/durable-protocol.md, "Continuation token").
``RpcInstancePages`` sends that header on the same RPC base URL the SDK's own client uses.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, Protocol
from urllib.parse import quote

import requests
from azure.durable_functions.models.DurableOrchestrationStatus import DurableOrchestrationStatus

CONTINUATION_HEADER = "x-ms-continuation-token"
PAGE_SIZE = 100
"""Instances per page asked of the management API (``top``): the extension's default page size."""
_LAST_PAGE = {"", "null", "bnVsbA=="}
"""What a last page's token looks like: empty (a null header value), or, before Azure/durabletask#372, base64 of
``null``."""
_TOKEN = re.compile(r"[\x21-\x7e]{1,4096}")
"""A continuation token as the caller may hand one back: printable ASCII without spaces, at most 4,096 characters
(DTFx's are base64 of a small JSON object)."""


class ListingError(RuntimeError):
    """The management API did not answer a list call with a page (the list route answers 502 with why)."""


class InstancePages(Protocol):
    """One page of the hub's instances whose id starts with ``prefix``, and the next page's token (None: last)."""

    async def page(self, *, prefix: str, top: int, token: str | None) -> tuple[list[Any], str | None]: ...


def valid_token(token: str) -> bool:
    return _TOKEN.fullmatch(token) is not None


def next_token(value: str | None) -> str | None:
    """The next page's token from a list answer's header, None on the last page."""
    return None if value is None or value.strip() in _LAST_PAGE else value


class RpcInstancePages:
    """``InstancePages`` over the client binding's RPC base URL (the one every SDK client call uses)."""

    def __init__(self, client: Any, *, timeout: float = 30.0) -> None:
        # The SDK keeps the binding's URLs private; its own list calls build their URL from this one.
        self._base = str(client._orchestration_bindings.rpc_base_url)
        self._timeout = timeout

    async def page(self, *, prefix: str, top: int, token: str | None) -> tuple[list[Any], str | None]:
        url = f"{self._base}instances/?instanceIdPrefix={quote(prefix, safe='')}&top={int(top)}&showInput=false"
        headers = {CONTINUATION_HEADER: token} if token else {}
        try:
            response = await asyncio.to_thread(requests.get, url, headers=headers, timeout=self._timeout)
        except requests.RequestException as exc:
            raise ListingError(f"the Durable list API could not be reached: {type(exc).__name__}") from exc
        if response.status_code != 200:
            raise ListingError(f"the Durable list API answered {response.status_code}: {response.text[:200]}")
        body = response.json()
        if not isinstance(body, list):
            raise ListingError("the Durable list API answered something other than a list of instances")
        statuses = [DurableOrchestrationStatus.from_json(item) for item in body if isinstance(item, dict)]
        return statuses, next_token(response.headers.get(CONTINUATION_HEADER))
