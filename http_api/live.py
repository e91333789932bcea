"""What the live page needs beyond the plain summary: the collection's header, its chunk grid, failures while it
runs (with the fix for each kind), and the hub's recent collections. Pure functions over Durable status objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from http_api import grid_cells
from http_api.common import cancelled_reason, json_field
from shared import names
from shared.fixes import with_fix
from shared.models import JsonDict, iso, parse_iso
from shared.window.machine import CollectionSpec

_LIST_SPANS: tuple[timedelta | None, ...] = (
    timedelta(days=1),
    timedelta(days=7),
    timedelta(days=31),
    timedelta(days=366),
    None,
)
LIST_PAGE = 100
"""Instances one list call returns: the default page size of the extension's ``OrchestrationStatusQueryCondition``
(``Azure/azure-functions-durable-extension``), used when no ``top`` is sent. The SDK's list calls send none and follow
no continuation token, so a list that long may have been cut short."""
MAX_TOP = LIST_PAGE
_OLDEST = datetime(1970, 1, 1, tzinfo=UTC)


class ListingClient(Protocol):
    async def get_status_by(
        self, created_time_from: datetime | None = ..., created_time_to: datetime | None = ...,
        runtime_status: Any = ..., instance_id_prefix: str | None = ...,
    ) -> list[Any]: ...  # fmt: skip

    async def get_status_all(self) -> list[Any]: ...


def spec_of(payload: Any) -> CollectionSpec | None:
    if isinstance(payload, dict) and isinstance(payload.get("spec"), dict):
        try:
            return CollectionSpec.from_json(payload["spec"])
        except (KeyError, TypeError, ValueError):
            return None
    return None


def header(payload: Any, spec: CollectionSpec | None) -> JsonDict:
    """Tenant, range, source, K and start time, from the orchestration input (kept across continue-as-new)."""
    payload = payload if isinstance(payload, dict) else {}
    found = payload.get("request")
    request: JsonDict = found if isinstance(found, dict) else {}
    out: JsonDict = {
        "tenantId": spec.tenant_id if spec else request.get("tenantId"),
        "source": spec.source if spec else request.get("source"),
        "maxConcurrency": spec.options.max_concurrency if spec else request.get("maxConcurrency"),
        "startedAt": payload.get("startedAt"),
        "filters": spec.filters if spec else {},
    }
    if isinstance(request.get("follow"), str):  # a follower's pass: the follower retries and stops it, not its page
        out["follow"] = request["follow"]
        out["pass"] = request.get("pass")
    if spec is not None and spec.plan is not None:
        out["startDate"], out["endDate"] = iso(spec.plan.start), iso(spec.plan.end)
        out["intervalMinutes"] = spec.plan.interval.total_seconds() / 60
    elif spec is not None and spec.explicit:
        out["startDate"] = iso(min(c.start for c in spec.explicit))
        out["endDate"] = iso(max(c.end for c in spec.explicit))
        out["windows"] = len(spec.explicit)
    return out


def grid(spec: CollectionSpec | None, published: Any) -> JsonDict | None:
    if spec is None:
        return None
    snapshot = published if isinstance(published, dict) else None
    return grid_cells.encode(grid_cells.Cells.of(spec), snapshot)


def stopped(progress: JsonDict) -> JsonDict:
    """The last custom status of a collection that ended without a result (terminated): nothing is in flight any
    more, so its lanes' windows show as pending (what a retry collects) and no lane holds or waits for a slot (the
    tenant budget takes its slots back when their leases run out)."""
    out = {**progress, "inFlight": 0, "windowsInFlight": []}
    published = progress.get("grid")
    if isinstance(published, dict):
        lanes = published.get("lanes") or []
        requeued = [*(published.get("requeued") or []), *([lane[0], lane[1]] for lane in lanes)]
        out["grid"] = {**published, "lanes": [], "requeued": requeued}
    budget = progress.get("budget")
    if isinstance(budget, dict):
        out["budget"] = {**budget, "held": 0, "asking": 0, "state": None}
    return out


def running_failures(published: Any) -> list[JsonDict]:
    """The latest failures the orchestrator published (all of them are in the output once it ends)."""
    if not isinstance(published, dict):
        return []
    origin = datetime.fromisoformat(str(published.get("origin", "")).replace("Z", "+00:00"))
    found = []
    for item in published.get("recent") or []:
        start, end = (origin + timedelta(seconds=float(x)) for x in item["w"])
        failure = {
            "window": f"{iso(start)}/{iso(end)}",
            "kind": item.get("kind"),
            "reason": item.get("reason"),
            "attempts": item.get("attempts"),
        }
        found.append(with_fix(failure))
    return found


def _when(value: Any) -> str | None:
    return iso(value) if isinstance(value, datetime) else (str(value) if value else None)


def collection_row(status: Any) -> JsonDict:
    """One line of the recent-collections list."""
    output = json_field(getattr(status, "output", None))
    output = output if isinstance(output, dict) else {}
    progress = json_field(getattr(status, "custom_status", None))
    progress = progress if isinstance(progress, dict) else {}
    source = output or progress
    runtime = getattr(status, "runtime_status", None)
    runtime_text = str(getattr(runtime, "value", runtime)) if runtime is not None else None
    payload = json_field(getattr(status, "input_", None))
    spec = spec_of(payload)
    head = header(payload, spec)
    return {
        "collectionId": getattr(status, "instance_id", None),
        "runtimeStatus": runtime_text,
        "status": output.get("status") or ("Cancelled" if cancelled_reason(status) else runtime_text),
        "percent": source.get("percent"),
        "records": source.get("records"),
        "failed": source.get("failed"),
        "tenantId": head.get("tenantId"),
        "source": head.get("source"),
        "startDate": head.get("startDate"),
        "endDate": head.get("endDate"),
        "parentCollectionId": spec.parent_collection_id if spec else None,
        "startedAt": head.get("startedAt"),
        "createdTime": _when(getattr(status, "created_time", None)),
        "lastUpdatedTime": _when(getattr(status, "last_updated_time", None)),
    }


async def recent_collections(client: ListingClient, now: datetime, top: int) -> JsonDict:
    """The hub's newest collections first. The SDK lists one page without ordering it, so the list widens a
    created-time window (a day, a week, a month, a year, all) until it holds ``top`` collections; a window whose
    page came back full may have been cut, and then the narrower, complete answer is kept and ``more`` is set."""
    found: Sequence[Any] = []
    more = False
    for span in _LIST_SPANS:
        if span is None:
            statuses = await client.get_status_all()
        else:
            statuses = await client.get_status_by(created_time_from=now - span)
        cut = len(statuses) >= LIST_PAGE
        if cut and found:
            more = True
            break
        found, more = statuses, cut
        if cut or sum(1 for s in found if _is_collection(s)) >= top:
            break
    collections = sorted((s for s in found if _is_collection(s)), key=_created, reverse=True)
    return {"collections": [collection_row(s) for s in collections[:top]], "more": more or len(collections) > top}


def _created(status: Any) -> datetime:
    """When the collection started: ``startedAt`` of its input (the instance's created time moves on with every
    continue-as-new), else the created time."""
    payload = json_field(getattr(status, "input_", None))
    started = payload.get("startedAt") if isinstance(payload, dict) else None
    if isinstance(started, str):
        try:
            return parse_iso(started)
        except ValueError:
            pass
    value = getattr(status, "created_time", None)
    return value if isinstance(value, datetime) else _OLDEST


def _is_collection(status: Any) -> bool:
    """A collection started through the API; a follower's passes are listed under their follower instead."""
    if getattr(status, "name", None) not in (names.ORCHESTRATOR_COLLECT, None):
        return False
    payload = json_field(getattr(status, "input_", None))
    request = payload.get("request") if isinstance(payload, dict) else None
    return not (isinstance(request, dict) and request.get("follow"))
