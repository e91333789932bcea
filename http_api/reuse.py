"""Reusing a ``collectionId``: a second POST must ask for exactly what the existing collection collects, and a new
collection must not start into a prefix that already holds another run's output.

The stored orchestration input keeps the validated request (``request``), so a re-POST is compared with it field by
field once both are normalised (the same instant or number spelled another way is the same request). No field of a
validated request is derived from the clock (``now`` only bounds ``endDate`` and the retention), so an identical
re-POST stays identical however late it comes.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from http_api.common import ApiResponse, error, json_field
from shared import names
from shared.models import JsonDict
from shared.requests.validation import CollectionRequest
from shared.sinks.base import ChunkSink

_FIELDS = ("tenantId", "startDate", "endDate", "intervalMinutes", "maxConcurrency", "source")
_FILTERS = {
    "record_types": "recordTypes",
    "operations": "operations",
    "user_principal_names": "userIds",
    "ip_addresses": "ipAddresses",
    "object_ids": "objectIds",
    "keyword": "keyword",
    "service": "service",
}
"""Filter keys of the stored request -> their names in the request body."""


def _normalised(request: JsonDict) -> dict[str, Any]:
    """The request as the body names its fields; filter values as sets (a filter matches any of its values)."""
    with contextlib.suppress(KeyError, TypeError, ValueError):
        request = CollectionRequest.from_json(request).to_json()  # fills defaults an older input may lack
    flat: dict[str, Any] = {name: request.get(name) for name in _FIELDS}
    filters = request.get("filters") or {}
    for key, name in _FILTERS.items():
        value = filters.get(key)
        flat[f"filters.{name}"] = value if key in ("keyword", "service") else sorted(set(value or ()))
    flat["highCompleteness"] = bool(request.get("highCompleteness", False))
    flat["settle"] = bool(request.get("settle", False))
    return flat


def differences(stored: JsonDict, new: JsonDict) -> list[tuple[str, Any, Any]]:
    """(field, stored value, new value) for every field that differs, in the body's order; ``collectionId`` and the
    derived ``chunkCount`` are not compared."""
    old, now = _normalised(stored), _normalised(new)
    return [(name, old[name], now[name]) for name in old if old[name] != now[name]]


def conflict(collection_id: str, status: Any, request: JsonDict) -> ApiResponse | None:
    """409 when the existing collection ``collection_id`` (its Durable status, read with its input) was started with
    another request than ``request``; None when they agree (or the stored request cannot be read: an instance this
    API did not start, for which only existence can be answered)."""
    payload = json_field(getattr(status, "input_", None))
    stored = payload.get("request") if isinstance(payload, dict) else None
    if not isinstance(stored, dict):
        return None
    found = differences(stored, request)
    if not found:
        return None
    listed = "; ".join(f"{name}: {_shown(old)} → {_shown(new)}" for name, old, new in found)
    return error(
        409,
        found[0][0],
        "conflict",
        f"collection {collection_id} already exists with another request ({listed}); a collectionId names one "
        "request: pick another collectionId for this one",
    )


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def output_exists(
    sink: ChunkSink,
    tenant_id: str,
    collection_id: str,
    *,
    hint: str = "choose another collectionId, or delete that output first",
) -> ApiResponse | None:
    """409 when objects already lie under the collection's output prefix although no instance exists (a purged or
    lost instance, another task hub): a new run would reuse or count them (queries, parts, chunk summaries)."""
    prefix = names.collection_prefix(tenant_id, collection_id)
    found = sink.list_names(prefix)
    if not found:
        return None
    return error(
        409,
        "collectionId",
        "output_exists",
        f"{len(found)} objects already lie under {prefix} ({sink.location(prefix.rstrip('/'))}) from an earlier "
        f"collection {collection_id} that no longer exists (its instance was purged, or it ran in another task "
        f"hub); a new run would reuse or count them: {hint}",
    )
