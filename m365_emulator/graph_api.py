"""Microsoft Graph ``/security/auditLog/queries``: asynchronous queries, their status and their record pages."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from m365_emulator.config import (
    GRAPH_FULL_PERMISSION,
    GRAPH_PERMISSIONS,
    GRAPH_WORKLOAD_PERMISSIONS,
    GraphSettings,
    TenantSpec,
)
from m365_emulator.graph_faults import GraphFaults
from m365_emulator.graph_model import (
    ACTIVE,
    DISPLAY_FILTER,
    FILTER_NOT_ALLOWED,
    LIST_FIELDS,
    VERSIONS,
    BadBodyError,
    GraphQuery,
    decode_token,
    encode_token,
    jitter,
    page_key,
    parse_create_body,
)
from m365_emulator.graph_quota import DailySubmissionQuota
from m365_emulator.ingestion import IngestionSettings, Visibility
from m365_emulator.state import FaultInjector, Stats, broken_json, corrupt_json
from m365_emulator.stream import count_matching, iter_matching
from m365_emulator.wire import Reply, Request, api_error, iso_z

logger = logging.getLogger(__name__)


def readable_workloads(roles: tuple[str, ...]) -> tuple[str, ...]:
    """The services a token's roles may read; ``()`` means all (it holds ``AuditLogsQuery.Read.All``)."""
    if GRAPH_FULL_PERMISSION in roles:
        return ()
    return tuple(service for role in roles for service in GRAPH_WORKLOAD_PERMISSIONS.get(role, ()))


def auditing_disabled(tenant_id: str, request: Request) -> Reply:
    """What a create answers when the tenant's unified auditing is off: a 400 ``UnknownError`` whose message is a
    JSON string carrying ``"Status":"AuditingDisabledTenant"`` (the shape public clients recognise; its other fields
    are not public, so these are placeholders)."""
    inner = {"TenantId": tenant_id, "Status": "AuditingDisabledTenant", "Message": "Auditing is disabled."}
    return api_error(400, "UnknownError", json.dumps(inner, separators=(",", ":")), request=request)


class GraphApi:
    def __init__(
        self,
        tenants: Mapping[str, TenantSpec],
        settings: GraphSettings,
        faults: FaultInjector,
        stats: Stats,
        clock: Callable[[], float] = time.monotonic,
        *,
        visibility: Callable[[], Visibility] | None = None,
    ) -> None:
        self.tenants = tenants
        self.settings = settings
        self.faults = faults
        self.stats = stats
        self.clock = clock
        self.visibility = visibility or (lambda: IngestionSettings.immediate().snapshot(time.time()))
        """What a query created now can see (late records); its ``as_of`` is the emulator's "now"."""
        self._lock = threading.Lock()
        self._queries: dict[str, GraphQuery] = {}
        self._page_reads: Counter[str] = Counter()
        self._faults = GraphFaults()
        self.quota = DailySubmissionQuota(settings, lambda: self.visibility().as_of, self._created)
        """The tenant's daily submission quota (``m365_emulator.graph_quota``): every create goes through it."""

    def _created(self, tenant_id: str) -> int:
        return self.stats.queries_created[tenant_id]

    def query_windows(self, tenant_id: str) -> list[tuple[datetime, datetime]]:
        """The window of every query created in the tenant, in creation order (for tests: which days a client read
        by Graph)."""
        with self._lock:
            queries = [q for q in self._queries.values() if q.tenant.tenant_id == tenant_id]
        return [(q.start, q.end) for q in sorted(queries, key=lambda q: q.created)]

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

    def handle(self, request: Request, tenant_id: str, parts: list[str], roles: tuple[str, ...] = ()) -> Reply:
        """``parts`` is the path after ``/graph`` split on "/", e.g. ["beta", "security", "auditLog", "queries"];
        ``roles`` are the token's application roles (a per-workload one narrows what a query returns)."""
        if len(parts) < 4 or parts[0] not in VERSIONS or parts[1:4] != ["security", "auditLog", "queries"]:
            return api_error(
                400, "BadRequest", f"Resource not found for the segment '{'/'.join(parts)}'.", request=request
            )
        version, rest, method = parts[0], parts[4:], request.method
        fault = self._faults.request_fault(request, self.settings, self.faults.config.seed)
        if fault is not None:  # an UnknownError 400 or a gateway's HTML page: nothing was done
            counter = self.stats.unknown_errors if fault.status == 400 else self.stats.gateway_errors
            self.stats.bump(counter, (tenant_id, "graph"))
            return fault
        if not rest and method == "POST":
            return self.quota.gate(tenant_id, request, lambda: self._create(request, tenant_id, version, roles))
        if not rest and method == "GET":
            return self._list(request, tenant_id, version)
        query = self._find(tenant_id, rest[0])
        if query is None:
            return api_error(404, "NotFound", f"The audit log query '{rest[0]}' was not found.", request=request)
        if len(rest) == 1 and method == "GET":
            reply = Reply(200, self._render(query, request.base_url, version, entity=True))
            self.stats.log_query(tenant_id, "used", query.id, call="status")
            self.stats.set_concurrency((tenant_id, "graph"), self.active_count(tenant_id))  # polls see finished ones
            return reply
        if len(rest) == 1 and method == "DELETE":
            return self._delete(request, tenant_id, query)
        if len(rest) == 2 and rest[1] == "records" and method == "GET":
            reply = self._records(request, query, version)
            self.stats.log_query(tenant_id, "used", query.id, call="records")
            return reply
        return api_error(405, "MethodNotAllowed", f"{method} is not supported on this resource.", request=request)

    def _delete(self, request: Request, tenant_id: str, query: GraphQuery) -> Reply:
        if not self.settings.delete_supported:
            # What the service answers today (msgraph-sdk-powershell #3421, msgraph-beta-sdk-java #1162): the
            # route does not exist, in the ASP.NET Web API shape rather than an OData error.
            self.stats.bump(self.stats.deletes_refused, tenant_id)
            uri = f"{request.base_url}/security/auditLog/queries('{query.id}')"
            body = {
                "Message": f"No HTTP resource was found that matches the request URI '{uri}'.",
                "MessageDetail": "No type was found that matches the controller named 'queries'.",
            }
            return Reply(404, body)
        with self._lock:
            query.deleted = True
        self.stats.bump(self.stats.queries_deleted, tenant_id)
        self.stats.log_query(tenant_id, "deleted", query.id, call="delete")
        self.stats.set_concurrency((tenant_id, "graph"), self.active_count(tenant_id))
        return Reply(204, None)

    def _find(self, tenant_id: str, query_id: str) -> GraphQuery | None:
        with self._lock:
            query = self._queries.get(query_id)
        if query is None or query.deleted or query.tenant.tenant_id != tenant_id:
            return None
        if query.gone(self.clock(), self.settings.completion_delay_seconds):
            return None
        return query

    def _create(self, request: Request, tenant_id: str, version: str, roles: tuple[str, ...] = ()) -> Reply:
        seen = self.visibility()  # the query returns what had been ingested when it was created
        try:
            body, start, end, flt = parse_create_body(
                request.body,
                datetime.fromtimestamp(seen.as_of, UTC),
                reject_unknown=self.settings.reject_unknown_properties,
                service_filter=self.settings.service_filter,
            )
        except BadBodyError as exc:
            return api_error(400, "BadRequest", str(exc), request=request)
        if not self.tenants[tenant_id].auditing_enabled:
            return auditing_disabled(tenant_id, request)
        flt = replace(flt.leaking(self.settings.filter_leak_rate, self.faults.config.seed), visibility=seen)
        if self.settings.narrow_to_permissions:
            flt = flt.within(readable_workloads(roles))
        faults = self.faults.config
        outcome = "stuck" if faults.stuck_query else "failed" if faults.fail_query else "succeeded"
        if faults.cancel_query:
            outcome = "cancelled"
        if any(s < end and start < e for s, e in faults.fail_query_windows):
            outcome = "failed"
        query_key = f"{body.get('displayName') or ''}|{start.isoformat()}|{end.isoformat()}"
        drawn = GraphFaults.outcome(query_key, self.settings, faults.seed)
        if outcome == "succeeded" and drawn is not None:  # failed, vanished or stuck at a rate
            outcome = drawn
        extra = jitter(body, start, end, self.settings.completion_jitter_seconds)
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
                if faults.query_outcomes:  # a test's sequence decides, whatever the knobs and the draws say
                    outcome, faults.query_outcomes = faults.query_outcomes[0], faults.query_outcomes[1:]
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
            retry = self.settings.concurrency_retry_after_seconds if self.settings.retry_after_on_429 else None
            message = f"Too many queued or running audit log queries for this tenant (limit {limit}). Retry later."
            return api_error(429, "TooManyRequests", message, retry_after=retry, request=request)
        self.stats.bump(self.stats.queries_created, tenant_id)
        if outcome != "succeeded":  # a query a client must give up on (and submit again, if it resubmits)
            self.stats.bump(self.stats.query_faults, (tenant_id, outcome))
        self.stats.log_query(tenant_id, "created", query.id, call="create")
        if outcome != "stuck":
            self.stats.log_finish(query.id, query.created + self.settings.completion_delay_seconds + extra)
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
        """The tenant's queries, oldest first, ``list_page_size`` per page; ``$filter`` per ``list_filter``."""
        now, delay = self.clock(), self.settings.completion_delay_seconds
        with self._lock:
            mine = [
                q
                for q in self._queries.values()
                if q.tenant.tenant_id == tenant_id and not q.deleted and not q.gone(now, delay)
            ]
        wanted = request.query.get("$filter")
        mode = self.settings.list_filter
        if wanted and mode == "refuse":
            return api_error(400, "BadRequest", FILTER_NOT_ALLOWED, request=request)
        if wanted and mode == "honour":
            match = DISPLAY_FILTER.fullmatch(wanted.strip())
            if match is None:
                return api_error(400, "BadRequest", f"Unsupported $filter: {wanted}", request=request)
            name = match.group(1).replace("''", "'")
            mine = [q for q in mine if (q.body.get("displayName") or "") == name]
        try:
            skip = int(request.query.get("$skiptoken") or 0)
        except ValueError:
            return api_error(400, "BadRequest", "Invalid $skiptoken.", request=request)
        size = max(1, self.settings.list_page_size)
        page = mine[skip : skip + size]
        out: dict[str, Any] = {
            "@odata.context": f"{request.base_url}/graph/{version}/$metadata#security/auditLog/queries",
            "value": [self._render(q, request.base_url, version) for q in page],
        }
        if skip + size < len(mine):
            query = f"$skiptoken={skip + size}"
            if wanted:
                query = f"$filter={quote(wanted)}&{query}"
            out["@odata.nextLink"] = f"{request.base_url}/graph/{version}/security/auditLog/queries?{query}"
        return Reply(200, out)

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
                key = f"{query.body.get('displayName') or ''}|{query.start.isoformat()}|{query.end.isoformat()}"
                query.short_at = GraphFaults.short_at(key, query.returned, s, self.faults.config.seed)
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
                **{name: list(body.get(name) or []) for name in LIST_FIELDS},
                "keywordFilter": body.get("keywordFilter") or "",
                **({"serviceFilter": body["serviceFilter"]} if "serviceFilter" in body else {}),
                "status": status,
                "approximateReturnedRecordCount": returned,
            }
        )
        if self.settings.limit_flag:  # in the schema only since September 2026
            out["isRecordCountLimitExceeded"] = query.limit_exceeded if done else False
        if self.settings.send_record_count_limit:
            out["recordCountLimit"] = self.settings.record_count_limit
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
            if "$skiptoken" in request.query:
                emitted, cursor, read = decode_token(request.query["$skiptoken"])
            else:
                emitted, cursor, read = 0, None, 0
        except (ValueError, UnicodeDecodeError):
            return api_error(400, "BadRequest", "Invalid $top or $skiptoken.", request=request)
        if read == 0:  # a read of the records begins
            with query.lock:
                query.reads += 1
                read = query.reads
        if read == 1 and query.short_at is not None:  # the first read ends early (the next ones are whole)
            if emitted == 0:
                self.stats.bump(self.stats.short_reads, query.tenant.tenant_id)
            returned = query.short_at
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
            out["@odata.nextLink"] = f"{base}/records?$top={top}&$skiptoken={encode_token(emitted, cursor, read)}"
        at = page_key(request.query.get("$skiptoken"))  # the same page in every read
        page_key_text = f"{query.body.get('displayName') or ''}|{query.start.isoformat()}|{at}"
        with self._lock:
            reads = self._page_reads[f"{query.id}|{page_key_text}"]
            self._page_reads[f"{query.id}|{page_key_text}"] += 1
        if self.faults.is_broken_page(f"graph|{page_key_text}", reads):
            self.stats.bump(self.stats.broken_pages, (query.tenant.tenant_id, "graph"))
            return Reply(200, None, raw=broken_json(out))
        return Reply(200, out)
