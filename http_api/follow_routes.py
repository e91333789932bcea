"""The collections routes given a follower's ids: each answers 4xx naming what to use instead.

A follower (``follow-<source>-<12 hex>``) is no collection: ``cancel`` on it failed with a 500 (its input's spec is a
follower's) and its summary made no sense. Its passes (``<followId>-<yyyymmdd>-p<n>``) are collections with a live
page, but they write the follower's day collection: a ``retry-failed`` of a pass re-collected windows the follower
retries itself, into another prefix (547 record ids written twice), and a ``cancel`` of a pass would write a
``Cancelled`` manifest over the day's. Its day collections (``<followId>-<yyyymmdd>``) have no instance of their own.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from http_api.common import ApiResponse, error, json_field
from shared import names

Route = Literal["summary", "cancel", "retry-failed"]

_FOLLOWER = r"follow-[a-z]+-[0-9a-f]{12}"
_DAY = re.compile(rf"({_FOLLOWER})-(\d{{8}})")


def follower_of(status: Any) -> tuple[str, str] | None:
    """(``"follower"``, its id) for a follower's status, (``"pass"``, its follower's id) for one of its passes, else
    None."""
    if getattr(status, "name", None) == names.ORCHESTRATOR_FOLLOW:
        return "follower", str(getattr(status, "instance_id", ""))
    payload = json_field(getattr(status, "input_", None))
    request = payload.get("request") if isinstance(payload, dict) else None
    follow = request.get("follow") if isinstance(request, dict) else None
    if isinstance(follow, str) and follow:
        return "pass", follow
    return None


def refuse(instance_id: str, status: Any, route: Route) -> ApiResponse | None:
    """The answer of a collections route called with a follower's id (or one of its passes' where the route does
    not apply to a pass, or one of its day collections'), or None when the route applies."""
    found = follower_of(status) if status else None
    if found is None:
        day = _DAY.fullmatch(instance_id)
        if day is None or getattr(status, "runtime_status", None) is not None:
            return None
        follow = day.group(1)
        return error(
            404, "id", "follower_day",
            f"no collection {instance_id}: it is the day {day.group(2)} of follower {follow}, whose passes write its "
            f"manifest; see GET /api/follows/{follow}",
        )  # fmt: skip
    kind, follow = found
    if kind == "follower":
        what = {
            "summary": f"see GET /api/follows/{follow}",
            "cancel": f"stop it with POST /api/follows/{follow}/stop (it finishes the pass it runs, then ends)",
            "retry-failed": f"it retries its failed windows itself, on a back-off (GET /api/follows/{follow}: "
            "failures)",
        }[route]
        status_code = 404 if route == "summary" else 409
        return error(status_code, "id", "follower", f"{instance_id} is a follower, not a collection: {what}")
    if route == "summary":
        return None  # a pass is a collection: its summary and live page are its own
    what = {
        "cancel": "a pass is not cancelled alone (its day's manifest is the follower's): stop the follower with "
        f"POST /api/follows/{follow}/stop, which finishes this pass first",
        "retry-failed": "the follower retries this pass's failed windows itself, into the same day collection (a "
        f"retry here would collect them a second time); see GET /api/follows/{follow}",
    }[route]
    return error(409, "id", "follower_pass", f"{instance_id} is a pass of follower {follow}: {what}")
