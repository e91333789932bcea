"""Microsoft Graph ``/security/auditLog/queries``: asynchronous queries, their status and their record pages."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from m365_emulator.config import GRAPH_FULL_PERMISSION, GRAPH_PERMISSIONS, GraphSettings, TenantSpec
from m365_emulator.state import FaultInjector, Stats, corrupt_json
from m365_emulator.stream import RecordFilter, count_matching, iter_matching
from m365_emulator.synth import Cursor
from m365_emulator.wire import Reply, Request, api_error, iso_z, parse_time

logger = logging.getLogger(__name__)

VERSIONS = ("v1.0", "beta")
_LIST_FIELDS = (
    "recordTypeFilters",
    "operationFilters",
    "userPrincipalNameFilters",
    "ipAddressFilters",
    "objectIdFilters",
    "administrativeUnitIdFilters",
    "serviceFilters",
)
ACTIVE = frozenset({"notStarted", "queued", "running"})


class BadBodyError(ValueError):
    """The create body breaks a rule; the message says which."""


@dataclass
class GraphQuery:
    id: str
    tenant: TenantSpec
    body: dict[str, Any]
    start: datetime
    end: datetime
    flt: RecordFilter
    created: float
    outcome: str  # succeeded | failed | cancelled | stuck
    queued: bool
    deleted: bool = False
    extra_delay: float = 0.0
    """This query's share of ``completion_jitter_seconds``."""
    returned: int | None = None  # records the query yields (after cap), computed once it succeeds
    limit_exceeded: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def status(self, now: float, delay: float) -> str:
        elapsed = now - self.created
        delay += self.extra_delay
        if elapsed < delay * 0.3:
            return "queued" if self.queued else "notStarted"
        if self.outcome == "stuck" or elapsed < delay:
            return "running"
        return self.outcome


def parse_create_body(raw: bytes, now: datetime) -> tuple[dict[str, Any], datetime, datetime, RecordFilter]:
    try:
        body = json.loads(raw or b"{}")
    except json.JSONDecodeError as exc:
        raise BadBodyError(f"Invalid request data: the body is not valid JSON ({exc.msg}).") from exc
    if not isinstance(body, dict):
        raise BadBodyError("Invalid request data: the body must be a JSON object.")
    try:
        start = parse_time(body["filterStartDateTime"]) if body.get("filterStartDateTime") else now - timedelta(180)
        end = parse_time(body["filterEndDateTime"]) if body.get("filterEndDateTime") else now
    except ValueError as exc:
        raise BadBodyError(f"Invalid request data: {exc}") from exc
    if end <= start:
        raise BadBodyError("Invalid request data: filterEndDateTime must be later than filterStartDateTime.")
    for name in _LIST_FIELDS:
        value = body.get(name)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            raise BadBodyError(f"Invalid request data: {name} must be a collection of strings.")
    for name in ("keywordFilter", "serviceFilter", "displayName"):
        if body.get(name) is not None and not isinstance(body[name], str):
            raise BadBodyError(f"Invalid request data: {name} must be a string.")
    services = list(body.get("serviceFilters") or [])
    if body.get("serviceFilter"):
        services.append(body["serviceFilter"])
    flt = RecordFilter.build(
        record_types=body.get("recordTypeFilters"),
        operations=body.get("operationFilters"),
        user_ids=body.get("userPrincipalNameFilters"),
        ip_addresses=body.get("ipAddressFilters"),
        object_ids=body.get("objectIdFilters"),
        administrative_unit_ids=body.get("administrativeUnitIdFilters"),
        keyword=body.get("keywordFilter"),
        services=services,
    )
    return body, start, end, flt


_DISPLAY_FILTER = re.compile(r"displayName eq '((?:[^']|'')*)'")


def _jitter(body: dict[str, Any], start: datetime, end: datetime, spread: float) -> float:
    """A stable pseudo-random delay in [0, spread) for this query (same window and name, same delay)."""
    if spread <= 0:
        return 0.0
    key = f"{body.get('displayName') or ''}|{start.isoformat()}|{end.isoformat()}".encode()
    return spread * int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64


def _encode_token(emitted: int, cursor: Cursor) -> str:
    return base64.urlsafe_b64encode(f"{emitted}:{cursor[0]}:{cursor[1]}".encode()).decode().rstrip("=")


def _decode_token(token: str) -> tuple[int, Cursor]:
    emitted, hour, index = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode().split(":")
    return int(emitted), (int(hour), int(index))


class GraphApi:
    def __init__(
        self,
        tenants: Mapping[str, TenantSpec],
        settings: GraphSettings,
        faults: FaultInjector,
        stats: Stats,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tenants = tenants
        self.settings = settings
        self.faults = faults
        self.stats = stats
        self.clock = clock
        self._lock = threading.Lock()
        self._queries: dict[str, GraphQuery] = {}

    def active_count(self, tenant_id: str) -> int:
        now, delay = self.clock(), self.settings.completion_delay_seconds
        with self._lock:
            queries = [q for q in self._queries.values() if q.tenant.tenant_id == tenant_id and not q.deleted]
        return sum(1 for q in queries if q.status(now, delay) in ACTIVE)

    @staticmethod
    def authorize(request: Request, roles: tuple[str, ...]) -> Reply | None:
        if set(roles) & GRAPH_PERMISSIONS:
            return None
        message = (
            "Insufficient privileges to complete the operation. The application needs the "
            f"{GRAPH_FULL_PERMISSION} application permission (or a workload-specific AuditLogsQuery-*.Read.All)."
        )
        return api_error(403, "Authorization_RequestDenied", message, request=request)

    def handle(self, request: Request, tenant_id: str, parts: list[str]) -> Reply:
        """``parts`` is the path after ``/graph`` split on "/", e.g. ["beta", "security", "auditLog", "queries"]."""
        if len(parts) < 4 or parts[0] not in VERSIONS or parts[1:4] != ["security", "auditLog", "queries"]:
            return api_error(
                400, "BadRequest", f"Resource not found for the segment '{'/'.join(parts)}'.", request=request
            )
        version, rest, method = parts[0], parts[4:], request.method
        if not rest and method == "POST":
            return self._create(request, tenant_id, version)
        if not rest and method == "GET":
            return self._list(request, tenant_id, version)
        query = self._find(tenant_id, rest[0])
        if query is None:
            return api_error(404, "NotFound", f"The audit log query '{rest[0]}' was not found.", request=request)
        if len(rest) == 1 and method == "GET":
            reply = Reply(200, self._render(query, request.base_url, version, entity=True))
            self.stats.set_concurrency((tenant_id, "graph"), self.active_count(tenant_id))  # polls see finished ones
            return reply
        if len(rest) == 1 and method == "DELETE":
            with self._lock:
                query.deleted = True
            self.stats.bump(self.stats.queries_deleted, tenant_id)
            self.stats.log_query(tenant_id, "deleted", query.id)
            self.stats.set_concurrency((tenant_id, "graph"), self.active_count(tenant_id))
            return Reply(204, None)
        if len(rest) == 2 and rest[1] == "records" and method == "GET":
            return self._records(request, query, version)
        return api_error(405, "MethodNotAllowed", f"{method} is not supported on this resource.", request=request)

    def _find(self, tenant_id: str, query_id: str) -> GraphQuery | None:
        with self._lock:
            query = self._queries.get(query_id)
        if query is None or query.deleted or query.tenant.tenant_id != tenant_id:
            return None
        return query

    def _create(self, request: Request, tenant_id: str, version: str) -> Reply:
        try:
            body, start, end, flt = parse_create_body(request.body, datetime.now(UTC))
        except BadBodyError as exc:
            return api_error(400, "BadRequest", str(exc), request=request)
        faults = self.faults.config
        outcome = "stuck" if faults.stuck_query else "failed" if faults.fail_query else "succeeded"
        if faults.cancel_query:
            outcome = "cancelled"
        if any(s < end and start < e for s, e in faults.fail_query_windows):
            outcome = "failed"
        extra = _jitter(body, start, end, self.settings.completion_jitter_seconds)
        limit = self.settings.max_concurrent_queries
        key = (tenant_id, "graph")
        with self._lock:  # check-and-insert atomically so parallel creates cannot overshoot the limit
            now, delay = self.clock(), self.settings.completion_delay_seconds
            active = sum(
                1
                for q in self._queries.values()
                if q.tenant.tenant_id == tenant_id and not q.deleted and q.status(now, delay) in ACTIVE
            )
            if active >= limit:
                rejected = True
            else:
                rejected = False
                query = GraphQuery(
                    str(uuid.uuid4()),
                    self.tenants[tenant_id],
                    body,
                    start,
                    end,
                    flt,
                    now,
                    outcome,
                    faults.queued_status,
                    extra_delay=extra,
                )
                self._queries[query.id] = query
        if rejected:
            self.stats.bump(self.stats.throttled_429, key)
            self.stats.bump(self.stats.concurrency_429, key)
            retry = self.settings.concurrency_retry_after_seconds
            message = f"Too many queued or running audit log queries for this tenant (limit {limit}). Retry later."
            return api_error(429, "TooManyRequests", message, retry_after=retry, request=request)
        self.stats.bump(self.stats.queries_created, tenant_id)
        self.stats.log_query(tenant_id, "created", query.id)
        self.stats.set_concurrency(key, active + 1)
        if self._take_lost_response():
            self.stats.bump(self.stats.injected_5xx, key)
            return api_error(503, "ServiceUnavailable", "The service is temporarily unavailable.", request=request)
        location = f"{request.base_url}/graph/{version}/security/auditLog/queries/{query.id}"
        return Reply(201, self._render(query, request.base_url, version, entity=True), (("Location", location),))

    def _take_lost_response(self) -> bool:
        """Counts ``create_then_5xx_count`` down: True when this create's response is to be "lost"."""
        faults = self.faults.config
        with self._lock:
            if faults.create_then_5xx_count > 0:
                faults.create_then_5xx_count -= 1
                return True
        return False

    def _list(self, request: Request, tenant_id: str, version: str) -> Reply:
        with self._lock:
            mine = [q for q in self._queries.values() if q.tenant.tenant_id == tenant_id and not q.deleted]
        wanted = request.query.get("$filter")
        if wanted:
            match = _DISPLAY_FILTER.fullmatch(wanted.strip())
            if match is None:
                return api_error(400, "BadRequest", f"Unsupported $filter: {wanted}", request=request)
            name = match.group(1).replace("''", "'")
            mine = [q for q in mine if (q.body.get("displayName") or "") == name]
        context = f"{request.base_url}/graph/{version}/$metadata#security/auditLog/queries"
        return Reply(
            200, {"@odata.context": context, "value": [self._render(q, request.base_url, version) for q in mine]}
        )

    def _finish(self, query: GraphQuery) -> int:
        """Count what a succeeded query returns: in-window matches plus the boundary bleed, capped."""
        with query.lock:
            if query.returned is None:
                spec, s = query.tenant, self.settings
                start, end = query.start.timestamp(), query.end.timestamp()
                in_window = count_matching(spec, start, end, query.flt)
                target = round(in_window * s.bleed_fraction)
                bleed = 0
                if target:
                    for _ in iter_matching(spec, end, end + s.bleed_max_seconds, query.flt):
                        bleed += 1
                        if bleed >= target:
                            break
                available = in_window + bleed
                query.limit_exceeded = available > s.record_count_limit
                query.returned = min(available, s.record_count_limit)
            return query.returned

    def _render(self, query: GraphQuery, base_url: str, version: str, *, entity: bool = False) -> dict[str, Any]:
        status = query.status(self.clock(), self.settings.completion_delay_seconds)
        done = status == "succeeded"
        returned = self._finish(query) if done else None
        body = query.body
        out: dict[str, Any] = {}
        if entity:
            out["@odata.context"] = f"{base_url}/graph/{version}/$metadata#security/auditLog/queries/$entity"
        out.update(
            {
                "@odata.type": "#microsoft.graph.security.auditLogQuery",
                "id": query.id,
                "displayName": body.get("displayName") or "",
                "filterStartDateTime": iso_z(query.start),
                "filterEndDateTime": iso_z(query.end),
                **{name: list(body.get(name) or []) for name in _LIST_FIELDS},
                "keywordFilter": body.get("keywordFilter") or "",
                "serviceFilter": body.get("serviceFilter") or "",
                "status": status,
                "isRecordCountLimitExceeded": query.limit_exceeded if done else False,
                "recordCountLimit": self.settings.record_count_limit,
                "approximateReturnedRecordCount": returned,
            }
        )
        return out

    def _records(self, request: Request, query: GraphQuery, version: str) -> Reply:
        status = query.status(self.clock(), self.settings.completion_delay_seconds)
        if status in ACTIVE:
            return api_error(400, "BadRequest", "The query is not ready.", request=request)
        if status != "succeeded":
            return api_error(400, "BadRequest", f"The query is {status}; it has no records.", request=request)
        returned = self._finish(query)
        try:
            top = int(request.query.get("$top") or self.settings.page_size)
            emitted, cursor = _decode_token(request.query["$skiptoken"]) if "$skiptoken" in request.query else (0, None)
        except (ValueError, UnicodeDecodeError):
            return api_error(400, "BadRequest", "Invalid $top or $skiptoken.", request=request)
        if top < 1:
            return api_error(
                400, "BadRequest", "Invalid value for $top; it must be a positive integer.", request=request
            )
        top = min(top, self.settings.max_page_size)
        if self.faults.config.slow_page_seconds > 0:
            time.sleep(self.faults.config.slow_page_seconds)
        spec, s = query.tenant, self.settings
        stop = query.end.timestamp() + s.bleed_max_seconds
        page: list[dict[str, Any]] = []
        want = min(top, returned - emitted)
        if want > 0:
            for record, after in iter_matching(spec, query.start.timestamp(), stop, query.flt, cursor):
                item = record.graph_record()
                if self.faults.is_malformed(record.id):
                    item["auditData"] = corrupt_json(json.dumps(item["auditData"]))
                page.append(item)
                cursor = after
                if len(page) >= want:
                    break
        emitted += len(page)
        base = f"{request.base_url}/graph/{version}/security/auditLog/queries/{query.id}"
        metadata = f"{request.base_url}/graph/{version}/$metadata"
        out: dict[str, Any] = {
            "@odata.context": f"{metadata}#security/auditLog/queries('{query.id}')/records",
            "value": page,
        }
        if emitted < returned and cursor is not None and page:
            out["@odata.nextLink"] = f"{base}/records?$top={top}&$skiptoken={_encode_token(emitted, cursor)}"
        return Reply(200, out)
