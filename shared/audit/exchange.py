"""Exchange Online ``Search-UnifiedAuditLog`` via the REST ``InvokeCommand`` endpoint, as an :class:`AuditSearchApi`.

A window is read in one ``ReturnLargeSet`` session per record type: the same ``SessionId`` is sent again, each cmdlet
call (:meth:`ExchangeAuditClient.read_block`) taking the session's next block of ``ResultSize`` (5,000) rows; the
caller carries the session's cursor from call to call (``shared.audit.exchange_session``) and judges after each call
whether the session is complete *by evidence* (``shared.audit.exchange_evidence``): since 2026 ``ResultCount`` no
longer reports the window's total, so it is read only as a hint that there is more (a first call announcing more
than the 50,000-row session cap splits the window at once).

The service sends a block in HTTP pages of its own choosing with an ``@odata.nextLink``: the client asks
``Prefer: odata.maxpagesize=1000`` and POSTs each link, pinned to the configured origin (scheme and host: the bearer
token never goes over plain HTTP or elsewhere), with the same body (as CIPP and ExoHelper do), checking that
``ResultIndex`` runs on across pages and calls. A page read again after a failure is safe (its link names it); the
first page of a call is not (the call advances the session), so when its outcome is unknown the caller starts a new
session (bounded). A 200 whose ``@adminapi.warnings`` say the task was cancelled or the request failed is such an
unknown outcome too, never an empty window. Rows a new session delivers again repeat records already read: callers
de-duplicate by id, as the chunk writer does.

Calls are routed by ``X-AnchorMailbox: APP:SystemMailbox{bb558c35-...}@<tenant>``, the app-only form public clients
send, with the tenant's initial domain (``contoso.onmicrosoft.com``) or its GUID (what CIPP since 2025-02 and ExoHelper
send).

Record types: the cmdlet takes a single ``RecordType``. When several are asked for, the window is read in one
session per record type (:meth:`ExchangeAuditClient.record_types`), so a multi-type filter stays exact without the
caller splitting it. ``service`` and ``administrative_unit_ids`` have no cmdlet parameter and are rejected
(:func:`validate_exchange_filters`) rather than silently ignored. :meth:`ExchangeAuditClient.probe` is one call of a
throwaway session, for the ``doctor`` preflight and the benchmark's warm-up: it counts a window only when the call
came back short (fewer rows than asked); otherwise it is a lower bound and says so.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlsplit

from shared.audit.auth import EXCHANGE_SCOPE, TokenProvider, token_provider_for
from shared.audit.config import AuditApiConfig, is_initial_domain
from shared.audit.exchange_paging import (
    RESULT_SIZE,
    SESSION_CAP,
    SessionBrokenError,
    SessionCursor,
    failed_warning,
    int_field,
    is_empty_result,
    more_records_flag,
    warnings_of,
)
from shared.audit.http import ApiIdentity, http_client_for
from shared.audit.normalise import pascal
from shared.audit.ports import AuditFilters, RecordPage, TimeWindow
from shared.audit.record_lines import exchange_page
from shared.errors import (
    ConfigError,
    NeedsSplitError,
    PermanentApiError,
    RequestValidationError,
)
from shared.values import is_tenant_guid

logger = logging.getLogger(__name__)

PROBE_EMPTY_RETRIES = 2
"""Fresh sessions a throwaway probe asks again after an empty or bogus answer."""
PAGE_SIZE_PREFERENCE = 1000
"""Rows per HTTP page asked with ``Prefer: odata.maxpagesize`` (what every public client asks; the service decides)."""
EXCHANGE_PERMISSION = 'Exchange.ManageAsApp + the "View-Only Audit Logs" role'
EXCHANGE_API = ApiIdentity(
    name="Exchange InvokeCommand",
    scope=EXCHANGE_SCOPE,
    permission=EXCHANGE_PERMISSION,
    routing_fix=(
        "give tenantId as the tenant's GUID or its initial domain <name>.onmicrosoft.com (the anchor mailbox names it)"
    ),
)
SYSTEM_MAILBOX = "SystemMailbox{bb558c35-97f1-4cb9-8ff7-d53741dc928c}"
_DATE_FORMAT = "%Y-%m-%dT%H:%M:%S"


def anchor_mailbox(tenant: str) -> str:
    """``X-AnchorMailbox`` of an app-only call: the tenant's arbitration system mailbox at its initial domain or at
    its GUID (both forms are sent by public app-only clients)."""
    text = tenant.strip().lower()
    if not (is_initial_domain(text) or is_tenant_guid(text)):
        raise ConfigError(
            "tenant_id",
            "Exchange needs the tenant's GUID or its initial domain <name>.onmicrosoft.com: app-only calls are routed "
            f"by the anchor mailbox APP:{SYSTEM_MAILBOX}@<tenant>, and {tenant!r} is neither",
        )
    return f"APP:{SYSTEM_MAILBOX}@{text}"


def validate_exchange_filters(filters: AuditFilters) -> None:
    """Raises :class:`RequestValidationError` for filters Search-UnifiedAuditLog cannot apply."""
    if filters.service:
        raise RequestValidationError(
            "filters.service", "Search-UnifiedAuditLog has no workload filter; use record_types"
        )
    if filters.administrative_unit_ids:
        raise RequestValidationError(
            "filters.administrative_unit_ids", "Search-UnifiedAuditLog cannot filter by administrative unit"
        )


def build_parameters(
    window: TimeWindow,
    filters: AuditFilters,
    *,
    record_type: str | None,
    session_id: str,
    result_size: int,
    high_completeness: bool = False,
) -> dict[str, Any]:
    """Cmdlet parameters for one call of a session (dates as UTC without offset, as the cmdlet expects)."""
    # The cmdlet takes whole seconds: the start rounds down and the end rounds *up*, so a window with a fractional
    # bound never loses the records of its last partial second (the extra ones are trimmed by the chunk writer).
    end = window.end.astimezone(UTC)
    if end.microsecond:
        end = end.replace(microsecond=0) + timedelta(seconds=1)
    params: dict[str, Any] = {
        "StartDate": window.start.astimezone(UTC).strftime(_DATE_FORMAT),
        "EndDate": end.strftime(_DATE_FORMAT),
        "SessionId": session_id,
        "SessionCommand": "ReturnLargeSet",
        "ResultSize": result_size,
    }
    if record_type:
        params["RecordType"] = pascal(record_type)
    lists = {
        "Operations": filters.operations,
        "UserIds": filters.user_principal_names,
        "IPAddresses": filters.ip_addresses,
        "ObjectIds": filters.object_ids,
    }
    for name, values in lists.items():
        if values:
            params[name] = list(values)
    if filters.keyword:
        params["FreeText"] = filters.keyword
    if high_completeness:
        params["HighCompleteness"] = True  # a switch: completeness over speed (slower)
    return params


@dataclass
class ProbeCall:
    """What one call of a session showed (``ExchangeAuditClient.probe``): rows, indexes, the service's own words."""

    asked: int
    rows: int = 0
    indexes: list[int] = field(default_factory=list)
    result_count: int | None = None
    more: bool | None = None
    more_present: bool = False
    warnings: list[str] = field(default_factory=list)
    page_sizes: list[int] = field(default_factory=list)
    bogus: int = 0
    """Rows without a valid ``ResultIndex`` (not counted in ``rows``)."""
    empty_answers: int = 0
    """Throwaway sessions that answered no rows before this answer (and this one, when it has none either)."""

    @property
    def short(self) -> bool:
        """Fewer rows than asked: the window holds exactly ``rows`` (for this session's filters)."""
        return self.rows < self.asked

    def describe(self) -> str:
        """``1,234 records`` when the call proves it, else ``at least 5,000 records``."""
        return f"{self.rows:,} records" if self.short else f"at least {self.rows:,} records"


class ExchangeAuditClient:
    """:class:`AuditSearchApi` over ``Search-UnifiedAuditLog`` (one ``requests.Session`` per instance)."""

    def __init__(
        self,
        config: AuditApiConfig,
        *,
        tokens: TokenProvider | None = None,
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], datetime] | None = None,
        retry_wait_scale: float = 1.0,
        session_cap: int = SESSION_CAP,
        result_size: int = RESULT_SIZE,
        anchor: str | None = None,
    ) -> None:
        self._config = config
        # ``anchor`` replaces the routing hint only for a preflight that asks which forms the service accepts.
        self._anchor = anchor if anchor is not None else anchor_mailbox(config.tenant_id)
        self._http = http_client_for(
            config,
            tokens or token_provider_for(config),
            replace(EXCHANGE_API, scope=config.exchange_scope),  # the configured cloud's audience
            sleep=sleep,
            clock=clock,
            retry_wait_scale=retry_wait_scale,
        )
        self._url = f"{config.exchange_root}/adminapi/beta/{quote(config.tenant_id, safe='')}/InvokeCommand"
        self._origin = urlsplit(config.exchange_base_url)
        self.session_cap = session_cap
        self.result_size = result_size
        self.warnings_seen: list[str] = []
        """Every ``@adminapi.warnings`` text this client received (the ``doctor`` reports them), newest last."""

    def close(self) -> None:
        self._http.close()

    # --- one cmdlet call -----------------------------------------------------------------------------------------
    def _call(
        self,
        window: TimeWindow,
        filters: AuditFilters,
        session_id: str,
        *,
        record_type: str | None,
        high: bool,
        result_size: int,
        resend_first: bool = False,
    ) -> Iterator[tuple[list[Any], dict[str, Any]]]:
        """The rows of one cmdlet call, one HTTP page at a time (following ``@odata.nextLink``), with each response.

        A call advances its session, so its first request is not sent again when its outcome is unknown, unless
        ``resend_first`` (a throwaway session's only call). A 200 whose warnings say the cmdlet was cancelled or
        failed is such an unknown outcome (a nextLink page is read again; a first page raises
        ``AmbiguousResponseError``).
        """
        parameters = build_parameters(
            window,
            filters,
            record_type=record_type,
            session_id=session_id,
            result_size=result_size,
            high_completeness=high,
        )
        headers = {
            "X-CmdletName": "Search-UnifiedAuditLog",
            "X-ResponseFormat": "json",
            "X-ClientApplication": "ExoManagementModule",
            "X-AnchorMailbox": self._anchor,
            "Prefer": f"odata.maxpagesize={PAGE_SIZE_PREFERENCE}",
        }
        body = {"CmdletInput": {"CmdletName": "Search-UnifiedAuditLog", "Parameters": parameters}}
        url: str | None = self._url
        resend = resend_first  # a nextLink page names itself: reading it again is safe
        while url is not None:
            try:
                response = self._http.request_json(
                    "POST",
                    url,
                    json_body=body,
                    headers=headers,
                    resend_if_ambiguous=resend,
                    failed_if=self._failed_warning,
                )
            except PermanentApiError as exc:
                if url == self._url and exc.status in (404, 410):
                    raise ConfigError(
                        "exchange_base_url",
                        f"{self._url} answered {exc.status}: no InvokeCommand endpoint there (the undocumented beta "
                        "admin API may have moved); check AUDIT_EXCHANGE_BASE_URL",
                    ) from None
                raise
            response = response or {}
            rows = response.get("value", [])
            if not isinstance(rows, list):
                raise PermanentApiError("InvokeCommand response has no 'value' list")
            link = response.get("@odata.nextLink") or response.get("odata.nextLink")
            if link and not rows:
                raise SessionBrokenError("InvokeCommand sent an empty page with a nextLink")
            yield rows, response
            url = self._checked_next_link(link if isinstance(link, str) and link else None)
            resend = True

    def _failed_warning(self, response: dict[str, Any]) -> str | None:
        """Every answer's warnings are kept and logged; one saying the cmdlet did not finish fails the answer."""
        warnings = warnings_of(response)
        self.warnings_seen = [*self.warnings_seen, *warnings][-20:]
        for warning in warnings:
            logger.warning("InvokeCommand warned: %s", warning[:300])
        return failed_warning(response)

    def _checked_next_link(self, link: str | None) -> str | None:
        if link is None:
            return None
        parts = urlsplit(link)
        # The bearer token goes wherever the link points: follow it only on the configured Exchange origin (the same
        # scheme too: an http:// link on the right host would send the token in clear).
        if (parts.scheme.lower(), parts.netloc.lower()) != (self._origin.scheme.lower(), self._origin.netloc.lower()):
            raise PermanentApiError(
                f"InvokeCommand nextLink points outside {self._origin.scheme}://{self._origin.netloc}"
            )
        return link

    # --- the port ------------------------------------------------------------------------------------------------
    def _types(self, filters: AuditFilters) -> list[str | None]:
        validate_exchange_filters(filters)
        return list(dict.fromkeys(filters.record_types)) or [None]

    def record_types(self, filters: AuditFilters) -> list[str | None]:
        """The sessions a window needs, one per record type (``[None]``: one session for every type)."""
        return self._types(filters)

    def read_block(
        self,
        window: TimeWindow,
        filters: AuditFilters,
        cursor: SessionCursor,
        *,
        record_type: str | None,
        high_completeness: bool = False,
        allow_over_cap: bool = False,
    ) -> Iterator[RecordPage]:
        """One cmdlet call of the session ``cursor`` names: its next block of up to ResultSize rows, page by page.

        The call's HTTP pages are followed here (``@odata.nextLink``) and ``cursor`` notes their rows; once the last
        page is read, the call's indexes are checked over all its pages and ``cursor.last`` holds its facts for the
        judge (rows without a valid ``ResultIndex`` are counted there, never yielded). The first call of a session whose
        first row announces a ``ResultCount`` over the session cap raises :class:`NeedsSplitError` before any page
        (a claim of "more" can only cost a split), unless ``allow_over_cap`` (the window cannot be split). Rows that
        do not continue the session raise :class:`SessionBrokenError`, and a first page whose outcome is unknown
        :class:`AmbiguousResponseError`.
        """
        cursor.start_call(self.result_size)
        rows_of_call = self._call(
            window,
            filters,
            cursor.session_id,
            record_type=record_type,
            high=high_completeness,
            result_size=self.result_size,
        )
        first = True
        for rows, response in rows_of_call:
            cursor.note(more=more_records_flag(response))
            if first and is_empty_result(rows):
                break
            lead = rows[0] if isinstance(rows[0], dict) else {}
            if first and cursor.calls == 0 and not allow_over_cap:
                count = int_field(lead, "ResultCount")
                if count is not None and count > self.session_cap:
                    scope = f" (RecordType {pascal(record_type)})" if record_type else ""
                    raise NeedsSplitError(
                        f"{window.start.isoformat()}..{window.end.isoformat()}{scope}: the service announces {count} "
                        f"records, over the {self.session_cap}-record session cap",
                        limit=self.session_cap,
                        reported_count=count,
                    )
            first = False
            cursor.note(more=more_records_flag(rows[-1]), result_count=int_field(lead, "ResultCount"))
            good = cursor.accept(rows)  # rows without a valid ResultIndex are no records: counted, never written
            if not good:
                continue
            page = exchange_page(good)
            if page.malformed:
                logger.warning("session %s: %d malformed row(s) quarantined", cursor.session_id, len(page.malformed))
            yield page
        cursor.end_call()

    def probe(
        self,
        window: TimeWindow,
        filters: AuditFilters | None = None,
        *,
        result_size: int = RESULT_SIZE,
        record_type: str | None = None,
        session_id: str | None = None,
        high_completeness: bool = False,
    ) -> ProbeCall:
        """One call of a session (a throwaway one unless ``session_id`` names it): what it returned, unchecked.

        It counts the window only when the call is short (``ProbeCall.short``); a full call is a lower bound. A
        throwaway session's empty (or bogus) answer is no evidence (a first call can answer "nothing" falsely): it is
        asked again in a fresh session, at most ``PROBE_EMPTY_RETRIES`` times (``ProbeCall.empty_answers``).
        """
        seen = self._probe_once(
            window,
            filters,
            result_size=result_size,
            record_type=record_type,
            session_id=session_id,
            high_completeness=high_completeness,
        )
        empties = 0
        while session_id is None and seen.rows == 0 and empties < PROBE_EMPTY_RETRIES:
            empties += 1
            seen = self._probe_once(
                window,
                filters,
                result_size=result_size,
                record_type=record_type,
                session_id=None,
                high_completeness=high_completeness,
            )
        seen.empty_answers = empties + int(seen.rows == 0)
        return seen

    def _probe_once(
        self,
        window: TimeWindow,
        filters: AuditFilters | None,
        *,
        result_size: int,
        record_type: str | None,
        session_id: str | None,
        high_completeness: bool,
    ) -> ProbeCall:
        seen = ProbeCall(asked=result_size)
        rows_of_call = self._call(
            window,
            filters or AuditFilters(),
            session_id or str(uuid.uuid4()),
            record_type=record_type,
            high=high_completeness,
            result_size=result_size,
            resend_first=session_id is None,
        )
        for rows, response in rows_of_call:
            seen.warnings += warnings_of(response)
            more = more_records_flag(response)
            if more is None and rows:
                more = more_records_flag(rows[-1])
            if more is not None:
                seen.more, seen.more_present = more, True
            if is_empty_result(rows):
                break
            seen.page_sizes.append(len(rows))
            for row in rows:
                index = int_field(row, "ResultIndex") if isinstance(row, dict) else None
                if index is None or index < 1:  # a bogus row (ResultIndex -1) is no record
                    seen.bogus += 1
                    continue
                seen.rows += 1
                seen.indexes.append(index)
                if seen.result_count is None and isinstance(row, dict):
                    seen.result_count = int_field(row, "ResultCount")
        return seen
