"""Exchange Online ``Search-UnifiedAuditLog`` through the REST ``InvokeCommand`` endpoint.

Sessions are keyed by (tenant, SessionId). A ReturnLargeSet session walks the same time-ordered stream as Graph:
each call takes the next block of at most ResultSize rows, no more than ``session_cap`` (50,000) per session; what
``ResultCount`` says and whether a later call continues, starts over or finds nothing are knobs
(``exchange_sessions``). A block goes out in HTTP pages with ``@odata.nextLink`` (``exchange_paging``), each page's
rows in no particular order by default; some answers are failures in disguise (``exchange_faults``: a 200 with a
cancel warning, a 400 naming a transient exception). Concurrency is counted per request in flight (like the Exchange
PowerShell throttling of concurrent commands), not per open session.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from m365_emulator.config import EXCHANGE_PERMISSION, EXCHANGE_ROLE, ExchangeSettings, TenantSpec
from m365_emulator.exchange_faults import (
    TRANSIENT_400_CODES,
    BlockCache,
    FalseAnswers,
    StableDraws,
    cancel_warning,
    false_answer,
    shuffled,
    transient_400,
)
from m365_emulator.exchange_paging import PageToken, ShuffledBlock, anchor_problem, body_hash, page_size, role_denied
from m365_emulator.exchange_sessions import Block, Session, announced, next_block
from m365_emulator.ingestion import IngestionSettings, Visibility
from m365_emulator.state import FaultInjector, Stats, broken_json, corrupt_json
from m365_emulator.stream import RecordFilter, count_matching, iter_matching
from m365_emulator.synth import SynthRecord
from m365_emulator.wire import Reply, Request, api_error, parse_time

logger = logging.getLogger(__name__)

CMDLET = "Search-UnifiedAuditLog"
PREVIEW_CAP = 5000  # ReturnNextPreviewPage sessions stop at 5,000 (documented)


class BadParametersError(ValueError):
    pass


def _strings(value: object, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise BadParametersError(f"Cannot bind parameter '{name}': expected a string or an array of strings.")


def parse_parameters(
    params: Mapping[str, Any], max_size: int, *, high_completeness: bool = True
) -> tuple[datetime, datetime, RecordFilter, int]:
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
    high = params.get("HighCompleteness")
    if high is not None and not high_completeness:  # not available in this organization
        raise BadParametersError("A parameter cannot be found that matches parameter name 'HighCompleteness'.")
    if high is not None and not isinstance(high, bool):
        raise BadParametersError(
            "Cannot bind parameter 'HighCompleteness': it is a switch; send true or false, or leave it out."
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


def _answer_key(params: Mapping[str, Any], window: str) -> str:
    """What makes two calls ask the same question (window, record type, filters), whatever their session."""
    asked = {k: v for k, v in params.items() if k not in ("SessionId", "SessionCommand", "ResultSize")}
    return f"{window}|{json.dumps(asked, sort_keys=True, default=str)}"


def _window_key(request: Request) -> str:
    """``StartDate|EndDate`` of a call (what one collector chunk searches); "" when the body is unreadable."""
    try:
        params = json.loads(request.body or b"{}")["CmdletInput"].get("Parameters") or {}
        return f"{params.get('StartDate')}|{params.get('EndDate')}"
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
        return ""


class ExchangeApi:
    def __init__(
        self,
        tenants: Mapping[str, TenantSpec],
        settings: ExchangeSettings,
        faults: FaultInjector,
        stats: Stats,
        *,
        visibility: Callable[[], Visibility] | None = None,
    ) -> None:
        self.visibility = visibility or (lambda: IngestionSettings.immediate().snapshot(time.time()))
        """What a session started now can see (late records); fixed at the session's first call."""
        self.tenants = tenants
        self.settings = settings
        self.faults = faults
        self.stats = stats
        self._lock = threading.Lock()
        self._sessions: dict[tuple[str, str], Session] = {}
        self._in_flight: dict[str, int] = {}
        self._page_reads: Counter[str] = Counter()
        self._draws = StableDraws()
        self._false = FalseAnswers()
        self._blocks = BlockCache()

    def authorize(
        self, request: Request, tenant_id: str, roles: tuple[str, ...], has_role: bool, client_id: str
    ) -> Reply | None:
        """Routing first (the front door reads the anchor before any backend sees the call), then permissions."""
        misrouted = anchor_problem(request, self.tenants[tenant_id], self.settings)
        self.stats.bump(self.stats.anchors, request.headers.get("x-anchormailbox", ""))
        if misrouted is not None:
            return misrouted
        if EXCHANGE_PERMISSION not in roles:
            message = (
                f"The application lacks the Office 365 Exchange Online '{EXCHANGE_PERMISSION}' application permission "
                f"(and needs an Exchange role such as '{EXCHANGE_ROLE}')."
            )
            return api_error(403, "AccessDenied", message, request=request)
        if not has_role:
            return role_denied(request, client_id, self.settings, EXCHANGE_ROLE)
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
        self.stats.log_query(tenant_id, "created", call_id, "exchange", call="start")
        try:
            self._wait_latency(request)
            return self._invoke(request, tenant_id)
        finally:
            self.stats.log_query(tenant_id, "deleted", call_id, "exchange", call="end")
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
            start, end, flt, size = parse_parameters(
                params, self.settings.max_result_size, high_completeness=self.settings.high_completeness
            )
        except BadParametersError as exc:
            return api_error(400, "BadRequest", str(exc), request=request)
        flt = replace(flt, visibility=self.visibility())  # a session keeps the view of its first call
        if any(s < end and start < e for s, e in self.faults.config.fail_query_windows):
            return api_error(400, "BadRequest", self.faults.config.fail_query_message, request=request)
        if self.faults.config.slow_page_seconds > 0:
            time.sleep(self.faults.config.slow_page_seconds)
        if params.get("HighCompleteness"):
            self.stats.bump(self.stats.high_completeness_calls, (tenant_id, "exchange"))
        spec = self.tenants[tenant_id]
        token_text = request.query.get("$skiptoken")
        if token_text is not None:
            return self._next_page(
                request, tenant_id, spec=spec, token_text=token_text, window=(start, end), flt=flt, params=params
            )
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
                    session = Session(start, end, flt, cap)
                    self._sessions[(tenant_id, str(session_id))] = session
        else:  # no session: the first block only, every time
            session = Session(start, end, flt, min(size, self.settings.max_result_size))
        key = (tenant_id, "exchange")
        self.stats.bump(self.stats.cmdlet_calls, key)
        draw = f"{_window_key(request)}|{params.get('RecordType')}|call {session.calls + 1}"
        if self._draws.hit(self.faults.config.seed, f"400|{draw}", self.settings.transient_400_rate):
            self.stats.bump(self.stats.transient_400s, key)
            return transient_400(request, self._draws.pick(self.faults.config.seed, draw, TRANSIENT_400_CODES))
        false = None
        if session.calls == 0:  # a session's first call may answer "nothing" falsely (a server timeout)
            false = self._false.draw(self.faults.config.seed, _answer_key(params, _window_key(request)), self.settings)
        if false is not None:
            self.stats.bump(self.stats.false_answers, key)
            bogus = self._bogus_row(session, spec, size) if false == "bogus" else None
            return false_answer(self._context(request, tenant_id), bogus)
        block = next_block(session, spec, size, self.settings, self._row)
        if self._draws.hit(self.faults.config.seed, f"cancel|{draw}", self.settings.cancel_warning_rate):
            self.stats.bump(self.stats.cancel_warnings, key)
            return cancel_warning(self._context(request, tenant_id))  # the block is lost: the session moved on
        return self._page_reply(request, tenant_id, session_id=str(session_id or ""), block=block)

    def _bogus_row(self, session: Session, spec: TenantSpec, size: int) -> dict[str, Any] | None:
        """A row that looks like the window's first record but carries ``ResultIndex`` -1 (None: an empty window)."""
        start, end = session.start.timestamp(), session.end.timestamp()
        for record, _ in iter_matching(spec, start, end, session.flt):
            count = announced(self.settings, count_matching(spec, start, end, session.flt), size)
            return self._row(record, session.runspace, -1, max(1, count))
        return None

    @property
    def _across_pages(self) -> bool:
        return self.settings.unsorted and self.settings.unsorted_across_pages

    def _page_reply(self, request: Request, tenant_id: str, *, session_id: str, block: Block) -> Reply:
        """The first page of a block, with a nextLink to the rest when the block is larger than one page."""
        rows = block.rows
        first_index = rows[0]["ResultIndex"] if rows else 1
        # Keyed by the window, not the session id (a client's random choice): the same run pages the same way.
        size = page_size(self.settings, self.faults.config.seed, _window_key(request), first_index)
        whole = None
        if self._across_pages and rows:  # the block shuffled as a whole, then cut into pages
            rows = shuffled(rows, self.faults.config.seed, f"{_window_key(request)}|block {first_index}")
            whole = ShuffledBlock(block.start, first_index, len(rows), size)
            self._blocks.put((tenant_id, session_id, first_index, body_hash(request.body)), rows)
        page, rest = rows[:size], rows[size:]
        out = self._page_body(request, tenant_id, page, first_index, block.more, shuffle=whole is None)
        if rest:
            token = PageToken(
                session_id, first_index + len(page), len(rest), block.result_count, block.afters[len(page) - 1],
                body_hash(request.body), block.more, whole,
            )  # fmt: skip
            out["@odata.nextLink"] = self._link(request, tenant_id, token)
        return Reply(200, out)

    def _page_body(
        self,
        request: Request,
        tenant_id: str,
        rows: list[dict[str, Any]],
        first_index: int,
        more: bool,
        *,
        shuffle: bool = True,
    ) -> dict[str, Any]:
        if self.settings.unsorted and shuffle:
            rows = shuffled(rows, self.faults.config.seed, f"{_window_key(request)}|{first_index}")
        out: dict[str, Any] = {"@odata.context": self._context(request, tenant_id), "value": rows}
        if self.settings.more_records_available == "present":
            out["AuditSearchRequestMetadata"] = {"moreRecordsAvailable": more}
        return out

    def _next_page(
        self,
        request: Request,
        tenant_id: str,
        *,
        spec: TenantSpec,
        token_text: str,
        window: tuple[datetime, datetime],
        flt: RecordFilter,
        params: Mapping[str, Any],
    ) -> Reply:
        """A nextLink page: rebuilt from its token, the same rows every time it is read."""
        try:
            token = PageToken.decode(token_text)
        except (ValueError, TypeError, json.JSONDecodeError, UnicodeDecodeError):
            return api_error(400, "BadRequest", "The $skiptoken is not valid.", request=request)
        if token.body_hash != body_hash(request.body) or token.session_id != str(params.get("SessionId") or ""):
            message = "The request body does not match the command this page continues; send the same body again."
            return api_error(400, "BadRequest", message, request=request)
        draw = f"{_window_key(request)}|{params.get('RecordType')}|page {token.first_index}"
        key = (tenant_id, "exchange")
        if self._draws.hit(self.faults.config.seed, f"400|{draw}", self.settings.transient_400_rate):
            self.stats.bump(self.stats.transient_400s, key)
            return transient_400(request, self._draws.pick(self.faults.config.seed, draw, TRANSIENT_400_CODES))
        if self._draws.hit(self.faults.config.seed, f"cancel|{draw}", self.settings.cancel_warning_rate):
            self.stats.bump(self.stats.cancel_warnings, key)
            return cancel_warning(self._context(request, tenant_id))
        with self._lock:
            session = self._sessions.get((tenant_id, token.session_id))
        runspace = session.runspace if session is not None else str(uuid.uuid4())
        if session is not None:
            flt = session.flt  # the rest of a block: what the session saw when it started
        size = min(
            token.remaining, page_size(self.settings, self.faults.config.seed, _window_key(request), token.first_index)
        )
        rows: list[dict[str, Any]] = []
        afters = []
        start, end = window
        whole = token.block
        if whole is not None:  # a page of a block shuffled as a whole: the same block, the next slice of it
            block_rows = self._block_rows(
                tenant_id, token, whole, spec=spec, window=window, flt=flt, runspace=runspace, request=request
            )
            rows = block_rows[whole.offset : whole.offset + size]
            afters = [token.cursor] * len(rows)
            whole = ShuffledBlock(whole.start, whole.first_index, whole.length, whole.offset + len(rows))
        else:
            for record, after in iter_matching(spec, start.timestamp(), end.timestamp(), flt, token.cursor):
                rows.append(self._row(record, runspace, token.first_index + len(rows), token.result_count))
                afters.append(after)
                if len(rows) >= size:
                    break
        out = self._page_body(request, tenant_id, rows, token.first_index, token.more, shuffle=whole is None)
        if rows and token.remaining > len(rows):
            following = PageToken(
                token.session_id, token.first_index + len(rows), token.remaining - len(rows), token.result_count,
                afters[-1], token.body_hash, token.more, whole,
            )  # fmt: skip
            out["@odata.nextLink"] = self._link(request, tenant_id, following)
        with self._lock:
            reads = self._page_reads[token_text]
            self._page_reads[token_text] += 1
        if self.faults.is_broken_page(f"exchange|{_window_key(request)}|{token.first_index}", reads):
            self.stats.bump(self.stats.broken_pages, (tenant_id, "exchange"))
            return Reply(200, None, raw=broken_json(out))
        return Reply(200, out)

    def _block_rows(
        self,
        tenant_id: str,
        token: PageToken,
        whole: ShuffledBlock,
        *,
        spec: TenantSpec,
        window: tuple[datetime, datetime],
        flt: RecordFilter,
        runspace: str,
        request: Request,
    ) -> list[dict[str, Any]]:
        """The shuffled rows of a call's whole block: remembered from its first page, else rebuilt from the token."""
        key = (tenant_id, token.session_id, whole.first_index, token.body_hash)
        rows = self._blocks.get(key)
        if rows is not None:
            return rows
        start, end = window
        built: list[dict[str, Any]] = []
        for record, _ in iter_matching(spec, start.timestamp(), end.timestamp(), flt, whole.start):
            built.append(self._row(record, runspace, whole.first_index + len(built), token.result_count))
            if len(built) >= whole.length:
                break
        rows = shuffled(built, self.faults.config.seed, f"{_window_key(request)}|block {whole.first_index}")
        self._blocks.put(key, rows)
        return rows

    @staticmethod
    def _context(request: Request, tenant_id: str) -> str:
        return f"{request.base_url}/exchange/adminapi/beta/{tenant_id}/$metadata#Collection(Exchange.GenericHashTable)"

    @staticmethod
    def _link(request: Request, tenant_id: str, token: PageToken) -> str:
        parts = [p for p in request.path.split("/") if p]  # exchange/adminapi/beta/{tenant}/InvokeCommand
        segment = parts[3] if len(parts) > 3 else tenant_id
        return f"{request.base_url}/exchange/adminapi/beta/{segment}/InvokeCommand?$skiptoken={token.encode()}"

    def _row(self, record: SynthRecord, runspace: str, index: int, count: int) -> dict[str, Any]:
        text = record.audit_text()
        if self.faults.is_malformed(record.id):
            text = corrupt_json(text)
        return {
            "RunspaceId": runspace,
            "RecordType": record.template.exchange_type,
            "CreationDate": record.created_text,
            "UserIds": record.user.upn,
            "Operations": record.template.operation,
            "AuditData": text,
            "ResultIndex": index,
            "ResultCount": count,
            "Identity": record.id,
            "IsValid": True,
            "ObjectState": "Unchanged",
        }
