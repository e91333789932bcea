"""Exchange Online ``Search-UnifiedAuditLog`` through the REST ``InvokeCommand`` endpoint.

Sessions are keyed by (tenant, SessionId). A ReturnLargeSet session walks the same time-ordered stream as Graph:
each call returns the next block of at most ResultSize rows; ``ResultCount`` is everything that matched, but only the
first ``session_cap`` rows (50,000) can ever be paged. Concurrency is counted per request in flight (like the
Exchange PowerShell throttling of concurrent commands), not per open session.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from m365_emulator.config import EXCHANGE_PERMISSION, EXCHANGE_ROLE, ExchangeSettings, TenantSpec
from m365_emulator.state import FaultInjector, Stats, corrupt_json
from m365_emulator.stream import RecordFilter, count_matching, iter_matching
from m365_emulator.synth import Cursor
from m365_emulator.wire import Reply, Request, api_error, parse_time

logger = logging.getLogger(__name__)

CMDLET = "Search-UnifiedAuditLog"
PREVIEW_CAP = 5000  # ReturnNextPreviewPage sessions stop at 5,000 (documented)


class BadParametersError(ValueError):
    pass


@dataclass
class Session:
    start: datetime
    end: datetime
    flt: RecordFilter
    result_count: int
    cap: int
    cursor: Cursor | None = None
    returned: int = 0
    runspace: str = field(default_factory=lambda: str(uuid.uuid4()))
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def _strings(value: object, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise BadParametersError(f"Cannot bind parameter '{name}': expected a string or an array of strings.")


def parse_parameters(params: Mapping[str, Any], max_size: int) -> tuple[datetime, datetime, RecordFilter, int]:
    missing = [name for name in ("StartDate", "EndDate") if not params.get(name)]
    if missing:
        raise BadParametersError(
            f"Cannot process command because of one or more missing mandatory parameters: {' '.join(missing)}."
        )
    try:
        start, end = parse_time(params["StartDate"]), parse_time(params["EndDate"])
    except ValueError as exc:
        raise BadParametersError(f"Cannot bind parameter 'StartDate'/'EndDate': {exc}") from exc
    if end <= start:
        raise BadParametersError("The EndDate value must be later than the StartDate value.")
    raw_size = params.get("ResultSize", 100)
    try:
        size = int(raw_size)
    except (TypeError, ValueError) as exc:
        raise BadParametersError(
            f'Cannot bind parameter \'ResultSize\'. Cannot convert value "{raw_size}" to type "System.Int32".'
        ) from exc
    if not 1 <= size <= max_size:
        raise BadParametersError(
            f"Cannot validate argument on parameter 'ResultSize'. "
            f"The {size} argument is outside the range 1 to {max_size}."
        )
    record_types = _strings(params.get("RecordType"), "RecordType")
    if len(record_types) > 1:
        raise BadParametersError("Cannot bind parameter 'RecordType'. RecordType accepts a single value.")
    flt = RecordFilter.build(
        record_types=record_types,
        operations=_strings(params.get("Operations"), "Operations"),
        user_ids=_strings(params.get("UserIds"), "UserIds"),
        ip_addresses=_strings(params.get("IPAddresses"), "IPAddresses"),
        object_ids=_strings(params.get("ObjectIds"), "ObjectIds"),
        keyword=params.get("FreeText") if isinstance(params.get("FreeText"), str) else None,
    )
    return start, end, flt, size


def _window_key(request: Request) -> str:
    """``StartDate|EndDate`` of a call (what one collector chunk searches); "" when the body is unreadable."""
    try:
        params = json.loads(request.body or b"{}")["CmdletInput"].get("Parameters") or {}
        return f"{params.get('StartDate')}|{params.get('EndDate')}"
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
        return ""


class ExchangeApi:
    def __init__(
        self, tenants: Mapping[str, TenantSpec], settings: ExchangeSettings, faults: FaultInjector, stats: Stats
    ) -> None:
        self.tenants = tenants
        self.settings = settings
        self.faults = faults
        self.stats = stats
        self._lock = threading.Lock()
        self._sessions: dict[tuple[str, str], Session] = {}
        self._in_flight: dict[str, int] = {}

    def authorize(self, request: Request, roles: tuple[str, ...], has_role: bool) -> Reply | None:
        if EXCHANGE_PERMISSION not in roles:
            message = (
                f"The application lacks the Office 365 Exchange Online '{EXCHANGE_PERMISSION}' application permission "
                f"(and needs an Exchange role such as '{EXCHANGE_ROLE}')."
            )
            return api_error(403, "AccessDenied", message, request=request)
        if not has_role:
            message = (
                f"The role assigned to the application isn't supported in this scenario: assign the '{EXCHANGE_ROLE}' "
                f"(or 'Audit Logs') role to the app's service principal; {EXCHANGE_PERMISSION} alone is not enough."
            )
            return api_error(403, "AccessDenied", message, request=request)
        return None

    def handle(self, request: Request, tenant_id: str) -> Reply:
        key = (tenant_id, "exchange")
        limit = self.settings.max_concurrent_sessions
        with self._lock:
            running = self._in_flight.get(tenant_id, 0)
            if running < limit:
                self._in_flight[tenant_id] = running + 1
        if running >= limit:
            self.stats.bump(self.stats.throttled_429, key)
            self.stats.bump(self.stats.concurrency_429, key)
            wait = self.settings.concurrency_retry_after_seconds
            message = (
                "Fail to create a runspace because you have exceeded the maximum number of connections allowed: "
                f"{limit} for the policy party: MaxConcurrency. "
                f"Please close existing runspace and try again after {wait} seconds."
            )
            return api_error(429, "TooManyRequests", message, retry_after=wait, request=request)
        self.stats.set_concurrency(key, running + 1)
        call_id = _window_key(request)
        self.stats.log_query(tenant_id, "created", call_id, "exchange")
        try:
            self._wait_latency(request)
            return self._invoke(request, tenant_id)
        finally:
            self.stats.log_query(tenant_id, "deleted", call_id, "exchange")
            with self._lock:
                self._in_flight[tenant_id] -= 1
                now = self._in_flight[tenant_id]
            self.stats.set_concurrency(key, now)

    def _wait_latency(self, request: Request) -> None:
        """Sleep the configured call latency; the jitter is a stable draw per (StartDate, EndDate)."""
        s = self.settings
        delay = s.latency_seconds
        if s.latency_jitter_seconds > 0:
            key = _window_key(request).encode()
            delay += s.latency_jitter_seconds * int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64
        if delay > 0:
            time.sleep(delay)

    def _invoke(self, request: Request, tenant_id: str) -> Reply:
        try:
            body = json.loads(request.body or b"{}")
            cmdlet = body["CmdletInput"]
            name, params = cmdlet["CmdletName"], cmdlet.get("Parameters") or {}
            if not isinstance(params, dict):
                raise TypeError("Parameters must be an object")
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            return api_error(400, "BadRequest", f"The request body is not a valid CmdletInput: {exc}", request=request)
        if name != CMDLET:
            return api_error(
                400, "BadRequest", f"The term '{name}' is not recognized as a supported cmdlet.", request=request
            )
        try:
            start, end, flt, size = parse_parameters(params, self.settings.max_result_size)
        except BadParametersError as exc:
            return api_error(400, "BadRequest", str(exc), request=request)
        if any(s < end and start < e for s, e in self.faults.config.fail_query_windows):
            return api_error(400, "BadRequest", self.faults.config.fail_query_message, request=request)
        if self.faults.config.slow_page_seconds > 0:
            time.sleep(self.faults.config.slow_page_seconds)
        spec = self.tenants[tenant_id]
        command = params.get("SessionCommand")
        session_id = params.get("SessionId")
        if command in ("ReturnLargeSet", "ReturnNextPreviewPage") and session_id:
            cap = (
                self.settings.session_cap
                if command == "ReturnLargeSet"
                else min(PREVIEW_CAP, self.settings.session_cap)
            )
            with self._lock:
                session = self._sessions.get((tenant_id, str(session_id)))
                if session is None:
                    session = Session(start, end, flt, -1, cap)
                    self._sessions[(tenant_id, str(session_id))] = session
        else:  # no session: the first block only, every time
            session = Session(start, end, flt, -1, min(size, self.settings.max_result_size))
        rows = self._next_block(session, spec, size)
        context = (
            f"{request.base_url}/exchange/adminapi/beta/{tenant_id}/$metadata#Collection(Exchange.GenericHashTable)"
        )
        return Reply(200, {"@odata.context": context, "value": rows})

    def _next_block(self, session: Session, spec: TenantSpec, size: int) -> list[dict[str, Any]]:
        with session.lock:  # two calls on one SessionId get consecutive blocks, never the same one
            start, end = session.start.timestamp(), session.end.timestamp()
            if session.result_count < 0:
                session.result_count = count_matching(spec, start, end, session.flt)
            want = min(size, min(session.cap, session.result_count) - session.returned)
            rows: list[dict[str, Any]] = []
            if want <= 0:
                return rows
            for record, after in iter_matching(spec, start, end, session.flt, session.cursor):
                text = record.audit_text()
                if self.faults.is_malformed(record.id):
                    text = corrupt_json(text)
                session.returned += 1
                rows.append(
                    {
                        "RunspaceId": session.runspace,
                        "RecordType": record.template.exchange_type,
                        "CreationDate": record.created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "UserIds": record.user.upn,
                        "Operations": record.template.operation,
                        "AuditData": text,
                        "ResultIndex": session.returned,
                        "ResultCount": session.result_count,
                        "Identity": record.id,
                        "IsValid": True,
                        "ObjectState": "Unchanged",
                    }
                )
                session.cursor = after
                if len(rows) >= want:
                    break
            return rows
