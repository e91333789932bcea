"""The follows API as plain async functions over a Durable client: start (or find, or resume) a follower, its
summary, stop it, list the followers (every one, paging with the management API's continuation token:
``http_api.instance_pages``). The triggers (``http_api.follows``) stay one-liners.

A follower's instance id is its key's digest (``shared.follow.state.follow_id``) over the tenant's GUID (resolved
like a collection's tenant, ``http_api.tenants``: a tenant the sign-in authority does not know is refused), so a second
start for the same (tenant, source, filters), whatever spelling names the tenant, finds the running one: 200 with it
when the request agrees, 409 ``conflict`` naming the first field that differs. Concurrent starts of a new follower
claim it first (``http_api.chain_claim``), so exactly one answers 202. A follower that stopped (or was terminated) is
resumed under the same id from where its coverage ends, its provisional windows and failures kept: a restart never
leaves a gap. What starts is sealed (``shared.requests.admission``), and a stopped follower's state is resumed only
from an input or output the collector made.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol

from http_api.chain_claim import claim_link
from http_api.common import ACTIVE, ApiResponse, error, json_field, runtime_status
from http_api.follow_reads import AccessCheck, feed_use, search_load
from http_api.follow_request import FollowRequest, validate_follow_request
from http_api.instance_pages import PAGE_SIZE, InstancePages, ListingError
from http_api.plan_report import follow_plan, follow_refusal, tenant_quota
from http_api.request_json import parse_request_json
from http_api.tenants import TenantResolver, guid_or_error
from shared import names
from shared.chain_claim import ROOT
from shared.follow.plan import status as follow_status
from shared.follow.state import FOLLOW_PREFIX, FollowSpec, FollowState
from shared.models import JsonDict, iso, parse_iso
from shared.requests.admission import RUN, sealed, unsealed_reason
from shared.requests.validation import InvalidRequest
from shared.settings import Settings
from shared.sinks.base import ChunkSink

logger = logging.getLogger(__name__)

_COMPARED = ("intervalMinutes", "everyMinutes", "maxConcurrency", "highCompleteness")


class FollowClient(Protocol):
    """The subset of ``DurableOrchestrationClient`` the follows API uses."""

    async def start_new(self, orchestration_function_name: str, instance_id: str | None, client_input: Any) -> str: ...

    async def get_status(self, instance_id: str, show_history: bool = ..., show_history_output: bool = ...,
                         show_input: bool = ...) -> Any: ...  # fmt: skip

    async def raise_event(self, instance_id: str, event_name: str, event_data: Any = ...) -> None: ...

    async def signal_entity(self, entity_id: Any, operation_name: str, operation_input: Any = ..., /) -> None: ...

    async def read_entity_state(self, entity_id: Any, /) -> Any: ...


def output_prefix(tenant_id: str, follow: str) -> str:
    """Every object of a follower starts with this: ``<tenant>/<followId>-`` (one collection per day after it)."""
    return f"{names.tenant_component(tenant_id)}/{follow}-"


async def start_follow(
    client: FollowClient,
    body: bytes,
    settings: Settings,
    now: datetime,
    *,
    sink: ChunkSink,
    resolve: TenantResolver,
    feed_check: AccessCheck | None = None,
) -> ApiResponse:
    """Validate and resolve the tenant's GUID; then start the follower, answer with the running one, or resume a
    stopped one."""
    try:
        request = validate_follow_request(parse_request_json(body), settings, now)
    except InvalidRequest as exc:
        return ApiResponse(400, exc.to_json())
    guid = await guid_or_error(resolve, request.tenant_id)
    if isinstance(guid, ApiResponse):
        return guid
    request = replace(request, tenant_guid=guid)
    follow = request.follow_id
    if request.spelled_follow_id != follow:  # a follower started before followers were keyed by the GUID
        legacy = await client.get_status(request.spelled_follow_id, False, False, True)
        if runtime_status(legacy) in ACTIVE:
            return _running(request.spelled_follow_id, legacy, request)
    existing = await client.get_status(follow, False, False, True)
    runtime = runtime_status(existing)
    if runtime in ACTIVE:
        return _running(follow, existing, request)
    secret = settings.budget_secret or ""
    resumed: tuple[FollowSpec, FollowState] | None = None
    if runtime is not None:
        unsealed = unsealed_reason(secret, follow, json_field(getattr(existing, "input_", None)))
        if unsealed is not None:
            return error(
                409, "tenantId", "not_sealed",
                f"follower {follow} ({runtime}) was not started by this app's API ({unsealed}); its state is not "
                "resumed: purge that instance to start the follower anew",
            )  # fmt: skip
        resumed = _last_state(existing, resuming=True)
        if resumed is not None and resumed[0].interval.total_seconds() != request.interval_minutes * 60:
            was = resumed[0].interval.total_seconds() / 60
            return error(
                409, "intervalMinutes", "conflict",
                f"follower {follow} ran with {was:g}-minute windows; it resumes with the same windows (its output "
                "is one object per window)",
            )  # fmt: skip
    else:
        found = sink.list_names(output_prefix(request.tenant_id, follow))
        if found:
            return error(
                409, "tenantId", "output_exists",
                f"{len(found)} objects already lie under {output_prefix(request.tenant_id, follow)} from a follower "
                f"{follow} that no longer exists (its instance was purged, or it ran in another task hub); delete "
                "that output first",
            )  # fmt: skip
    start = resumed[0].start if resumed else None
    spec = request.spec(settings, now, start=start)
    feed, why = await feed_use(
        asked=request.feed,
        search=request.source,
        filters=request.filters,
        max_concurrency=request.max_concurrency,
        high_completeness=request.high_completeness,
        settings=settings,
        tenant=guid,
        check=feed_check,
    )
    spec = replace(spec, feed=feed, reads_why=why)
    state = resumed[1] if resumed else FollowState(covered_until=spec.start)
    # judged on what its search source will read: the feed's plan when it reads the feed, else every window by search
    load = search_load(
        search=request.source, feed=feed, covered_until=state.covered_until, interval=spec.interval, now=now
    )
    refused = follow_refusal(settings, request.source, request.interval_minutes, load)
    if refused is not None:
        return error(400, "intervalMinutes", "daily_quota", refused)
    raced = await client.get_status(follow, False, False, True)
    if runtime_status(raced) in ACTIVE:
        return _running(follow, raced, request)
    if runtime is None:  # a new follower: of concurrent starts, exactly one starts it
        claimed = await claim_link(client, follow, ROOT, follow, secret=secret)
        if not claimed.won:
            if runtime_status(claimed.link) in ACTIVE:
                return _running(follow, claimed.link, request)
            return error(
                409, "tenantId", "starting",
                f"another request is starting follower {follow}; GET /api/follows/{follow} in a few seconds shows it",
            )  # fmt: skip
    state.stopped, state.paused = False, None
    payload = {
        "spec": spec.to_json(),
        "state": state.to_json(),
        "request": request.to_json(),
        "startedAt": iso(now),
        RUN: uuid.uuid4().hex,
    }
    try:
        await client.start_new(names.ORCHESTRATOR_FOLLOW, follow, sealed(secret, follow, payload))
    except Exception:
        raced = await client.get_status(follow, False, False, True)
        if runtime_status(raced) not in ACTIVE:
            raise
        return _running(follow, raced, request)
    logger.info("started follower %s from %s (resumed: %s)", follow, iso(state.covered_until), resumed is not None)
    quota = await tenant_quota(client, guid, request.source, settings, now)
    plan = follow_plan(
        source=request.source,
        interval_minutes=request.interval_minutes,
        every_minutes=request.every_minutes,
        settings=settings,
        quota=quota,
        load=load,
    )
    body_out = {
        "followId": follow,
        "existing": False,
        "resumed": resumed is not None,
        "coveredFrom": iso(spec.start),
        "coveredUntil": iso(state.covered_until),
        "outputPrefix": output_prefix(spec.tenant_id, follow),
        "reads": spec.reads(),
        "plan": plan,
    }
    return ApiResponse(202, body_out, follow)


def _running(follow: str, status: Any, request: FollowRequest) -> ApiResponse:
    """The running follower of this key: 200 when started with the same options, else 409 naming the first
    difference."""
    payload = json_field(getattr(status, "input_", None))
    stored = payload.get("request") if isinstance(payload, dict) else None
    if isinstance(stored, dict):
        asked = request.to_json()
        fields = [*_COMPARED, *(["startDate"] if request.start is not None else [])]
        differing = [
            (name, stored.get(name), asked.get(name)) for name in fields if stored.get(name) != asked.get(name)
        ]
        if differing:
            listed = "; ".join(f"{name}: {old} → {new}" for name, old, new in differing)
            return error(
                409, differing[0][0], "conflict",
                f"follower {follow} already runs for this tenant, source and filters with other options ({listed}); "
                f"stop it first (POST /api/follows/{follow}/stop) to start it again with these",
            )  # fmt: skip
    return ApiResponse(200, {"followId": follow, "existing": True}, follow)


PASS_NUMBER_GAP = 1000
"""A follower resumed from its input (it was terminated mid-cycle) numbers its passes this far on: the passes its last
cycle started may still run, and a new pass must not take one of their instance ids."""


def _last_state(status: Any, *, resuming: bool = False) -> tuple[FollowSpec, FollowState] | None:
    """A stopped follower's spec and state from its output; a terminated one's from its input (the state its last
    cycle began with: a pass it was running is read again, which changes nothing but the time)."""
    sources = ((json_field(getattr(status, "output", None)), 0), (json_field(getattr(status, "input_", None)), 1))
    for source, from_input in sources:
        if isinstance(source, dict) and isinstance(source.get("spec"), dict) and isinstance(source.get("state"), dict):
            try:
                spec, state = FollowSpec.from_json(source["spec"]), FollowState.from_json(source["state"])
            except (KeyError, TypeError, ValueError):
                return None
            state.passes += PASS_NUMBER_GAP * from_input * resuming
            return spec, state
    return None


async def follow_summary(client: FollowClient, follow: str, now: datetime) -> ApiResponse:
    """What a follower covers, what is provisional, failures, pause, last error and lag behind ``now``."""
    return summary_of(follow, await client.get_status(follow, False, False, True), now)


def summary_of(follow: str, status: Any, now: datetime) -> ApiResponse:
    """``follow_summary`` over a status already read (a list page's, or ``get_status``'s with its input)."""
    runtime = runtime_status(status)
    if runtime is None or getattr(status, "name", names.ORCHESTRATOR_FOLLOW) not in (names.ORCHESTRATOR_FOLLOW, None):
        return error(404, "id", "not_found", f"no follower {follow}")
    progress = json_field(getattr(status, "custom_status", None))
    output = json_field(getattr(status, "output", None))
    view: JsonDict = output if isinstance(output, dict) and output.get("followId") else {}
    if not view and isinstance(progress, dict) and progress.get("followId"):
        view = progress
    if not view:  # it has not published a status yet: the state it started with
        last = _last_state(status)
        if last is None:
            return error(404, "id", "not_found", f"no follower {follow}")
        view = follow_status(last[0], last[1], now)
    view = {key: value for key, value in view.items() if key not in ("spec", "state")}
    covered = view.get("covered") or {}
    lag = (now - parse_iso(covered["end"])).total_seconds() if covered.get("end") else None
    if runtime not in ACTIVE and view.get("status") != "stopped":
        view["status"] = runtime.lower()  # terminated or failed: it does nothing until started again
    body = {
        **view,
        "followId": follow,
        "runtimeStatus": runtime,
        "lagSeconds": lag,
        "outputPrefix": output_prefix(str(view.get("tenantId")), follow) if view.get("tenantId") else None,
        "manifests": "<outputPrefix><yyyymmdd>/manifest.json: one collection manifest per day",
        "lastUpdatedTime": str(getattr(status, "last_updated_time", "") or ""),
    }
    return ApiResponse(200, body)


async def stop_follow(client: FollowClient, follow: str) -> ApiResponse:
    """Ask the follower to stop: it finishes the pass it runs, then ends with its state in its output."""
    status = await client.get_status(follow, False, False, False)
    runtime = runtime_status(status)
    if runtime is None or getattr(status, "name", names.ORCHESTRATOR_FOLLOW) not in (names.ORCHESTRATOR_FOLLOW, None):
        return error(404, "id", "not_found", f"no follower {follow}")
    if runtime not in ACTIVE:
        return error(409, "id", "not_running", f"follower {follow} is {runtime}; start it again with POST /api/follows")
    from orchestrators.follow import STOP_EVENT

    await client.raise_event(follow, STOP_EVENT, None)
    progress = json_field(getattr(status, "custom_status", None))
    running = progress.get("running") if isinstance(progress, dict) else None
    after = running.get("instanceId") if isinstance(running, dict) else None
    message = (
        f"the follower finishes its pass {after} (its windows are applied), then ends"
        if after
        else "the follower ends at once (it waits for its next wake), or after the pass it starts meanwhile"
    )
    return ApiResponse(202, {"followId": follow, "stopping": True, "after": after, "message": message})


LIST_TOP = 100
"""Followers one ``GET /api/follows`` answers by default (at least: it never cuts a page of the management API)."""
MAX_LIST_TOP = 1000
_FOLLOWER_ID = re.compile(rf"{FOLLOW_PREFIX}[a-z]+-[0-9a-f]{{12}}")


async def list_follows(
    client: FollowClient, pages: InstancePages, now: datetime, *, top: int = LIST_TOP, token: str | None = None
) -> ApiResponse:
    """The hub's followers, whatever their age or state, a page at a time: the instances whose id starts with
    ``follow-`` (followers and their passes), a management API page after another, until ``top`` followers are
    listed or the pages end. A page is never cut, so the next call (``continuationToken``) misses none."""
    rows: list[JsonDict] = []
    while True:
        try:
            statuses, token = await pages.page(prefix=FOLLOW_PREFIX, top=min(PAGE_SIZE, top), token=token)
        except ListingError as exc:
            return error(502, "continuationToken", "listing_failed", str(exc))
        for status in statuses:
            if not _is_follower(status):
                continue
            follow = str(status.instance_id)
            found = summary_of(follow, status, now)
            if found.status != 200:  # nothing published yet (its first episode has not run): read its input
                found = await follow_summary(client, follow, now)
            if found.status == 200:
                rows.append(found.body)
        if token is None or len(rows) >= top:
            break
    rows.sort(key=lambda row: str(row.get("followId")))
    return ApiResponse(200, {"follows": rows, "continuationToken": token})


def _is_follower(status: Any) -> bool:
    return getattr(status, "name", None) == names.ORCHESTRATOR_FOLLOW and bool(
        _FOLLOWER_ID.fullmatch(str(getattr(status, "instance_id", "")))
    )
