"""Exchange Online ``Search-UnifiedAuditLog`` via the REST ``InvokeCommand`` endpoint, as an :class:`AuditSearchApi`.

A window is read in one ``ReturnLargeSet`` session: the same ``SessionId`` is sent again until ``ResultIndex``
reaches ``ResultCount``. Each cmdlet call (:meth:`ExchangeAuditClient.read_block`) takes the session's next block of
``ResultSize`` (5,000) rows; the caller carries the session's cursor from call to call
(``shared.audit.exchange_session``). A session can deliver at most 50,000 records, so a first call that learns a
larger ``ResultCount`` raises :class:`NeedsSplitError` (or pages up to the cap when the window cannot be split).

The service sends a block in HTTP pages of its own choosing with an ``@odata.nextLink``: the client asks
``Prefer: odata.maxpagesize=1000`` and POSTs each link, pinned to the configured host, with the same body (as CIPP
and ExoHelper do), checking that ``ResultIndex`` runs on across pages and calls. A page read again after a failure
is safe (its link names it); the first page of a call is not (the call advances the session), so when its outcome is
unknown, or the rows stop adding up, the caller starts a new session (bounded). Rows a new session delivers again
repeat records already read: callers de-duplicate by id, as the chunk writer does.

Calls are routed by ``X-AnchorMailbox: APP:SystemMailbox{bb558c35-...}@<initial domain>``, the app-only form public
clients send, so the tenant must be given as its initial domain (``contoso.onmicrosoft.com``).

Record types: the cmdlet takes a single ``RecordType``. When several are asked for, the window is read in one
session per record type (:meth:`ExchangeAuditClient.record_types`), so a multi-type filter stays exact without the
caller splitting it. ``service`` and ``administrative_unit_ids`` have no cmdlet parameter and are rejected
(:func:`validate_exchange_filters`) rather than silently ignored. :meth:`ExchangeAuditClient.count` is a one-row call
of a throwaway session per record type, for the ``doctor`` preflight and the benchmark's warm-up.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlsplit

from shared.audit.auth import EXCHANGE_SCOPE, TokenProvider, token_provider_for
from shared.audit.config import AuditApiConfig, is_initial_domain
from shared.audit.exchange_paging import SessionBrokenError, SessionCursor, int_field, is_empty_result
from shared.audit.http import ApiIdentity, http_client_for
from shared.audit.normalise import exchange_item, page_of, pascal
from shared.audit.ports import AuditFilters, RecordPage, TimeWindow
from shared.errors import (
    ConfigError,
    NeedsSplitError,
    PermanentApiError,
    RequestValidationError,
    TransientApiError,
)

logger = logging.getLogger(__name__)

SESSION_CAP = 50_000
"""Most records one ReturnLargeSet session can page through (Search-UnifiedAuditLog docs)."""
RESULT_SIZE = 5000
PROBE_RESULT_SIZE = 1
PAGE_SIZE_PREFERENCE = 1000
"""Rows per HTTP page asked with ``Prefer: odata.maxpagesize`` (what every public client asks; the service decides)."""
EXCHANGE_PERMISSION = 'Exchange.ManageAsApp + the "View-Only Audit Logs" role'
EXCHANGE_API = ApiIdentity(
    name="Exchange InvokeCommand",
    scope=EXCHANGE_SCOPE,
    permission=EXCHANGE_PERMISSION,
    routing_fix="give tenantId as the tenant's initial domain <name>.onmicrosoft.com (the anchor mailbox names it)",
)
SYSTEM_MAILBOX = "SystemMailbox{bb558c35-97f1-4cb9-8ff7-d53741dc928c}"
_DATE_FORMAT = "%Y-%m-%dT%H:%M:%S"


def anchor_mailbox(tenant: str) -> str:
    """``X-AnchorMailbox`` of an app-only call: the tenant's arbitration system mailbox at its initial domain."""
    if not is_initial_domain(tenant):
        raise ConfigError(
            "tenant_id",
            "Exchange needs the tenant's initial domain <name>.onmicrosoft.com: app-only calls are routed by the "
            f"anchor mailbox APP:{SYSTEM_MAILBOX}@<initial domain>, and {tenant!r} is not one",
        )
    return f"APP:{SYSTEM_MAILBOX}@{tenant.strip().lower()}"


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
            EXCHANGE_API,
            sleep=sleep,
            clock=clock,
            retry_wait_scale=retry_wait_scale,
        )
        self._url = f"{config.exchange_root}/adminapi/beta/{quote(config.tenant_id, safe='')}/InvokeCommand"
        self._origin = urlsplit(config.exchange_base_url)
        self.session_cap = session_cap
        self._result_size = result_size

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
        probe: bool,
    ) -> Iterator[list[Any]]:
        """The rows of one cmdlet call, one HTTP page at a time (following ``@odata.nextLink``).

        A ``probe`` asks one row of a throwaway session: sending it again is harmless. Any other call advances its
        session, so its first request is not sent again when its outcome is unknown.
        """
        parameters = build_parameters(
            window,
            filters,
            record_type=record_type,
            session_id=session_id,
            result_size=PROBE_RESULT_SIZE if probe else self._result_size,
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
        resend = probe  # a nextLink page names itself: reading it again is safe
        while url is not None:
            try:
                response = self._http.request_json(
                    "POST", url, json_body=body, headers=headers, resend_if_ambiguous=resend
                )
            except PermanentApiError as exc:
                if url == self._url and exc.status in (404, 410):
                    raise ConfigError(
                        "exchange_base_url",
                        f"{self._url} answered {exc.status}: no InvokeCommand endpoint there (the undocumented beta "
                        "admin API may have moved); check AUDIT_EXCHANGE_BASE_URL",
                    ) from None
                raise
            rows = response.get("value") if response else []
            if not isinstance(rows, list):
                raise PermanentApiError("InvokeCommand response has no 'value' list")
            link = (response.get("@odata.nextLink") or response.get("odata.nextLink")) if response else None
            if link and not rows:
                raise SessionBrokenError("InvokeCommand sent an empty page with a nextLink")
            yield rows
            url = self._checked_next_link(link if isinstance(link, str) and link else None)
            resend = True

    def _checked_next_link(self, link: str | None) -> str | None:
        if link is None:
            return None
        parts = urlsplit(link)
        # The bearer token goes wherever the link points: follow it only on the configured Exchange origin.
        if (parts.scheme, parts.netloc.lower()) != (self._origin.scheme, self._origin.netloc.lower()):
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

        The call's HTTP pages are followed here (``@odata.nextLink``) and ``cursor`` advances as rows arrive, so the
        caller can carry it to the next call (another activity, maybe another process). The first call of a session
        learns its ``ResultCount``: over the session cap it raises :class:`NeedsSplitError`, unless
        ``allow_over_cap``, which pages the session up to the cap (the caller reports the window incomplete).
        Rows that do not continue the session (a gap, a repeat, a changed count, an early end) raise
        :class:`SessionBrokenError`, and a first page whose outcome is unknown :class:`AmbiguousResponseError`: the
        caller starts a new session (rows it repeats are removed by id).
        """
        in_call = 0
        rows_of_call = self._call(
            window, filters, cursor.session_id, record_type=record_type, high=high_completeness, probe=False
        )
        for rows in rows_of_call:
            if in_call == 0 and is_empty_result(rows):
                if cursor.result_count is None:
                    cursor.result_count = 0  # nothing in the window (or it emptied)
                    return
                raise SessionBrokenError(
                    f"session {cursor.session_id} ended at index {cursor.next_index - 1} of {cursor.result_count}"
                )
            in_call += len(rows)
            if in_call > self._result_size:
                raise SessionBrokenError(f"a call of session {cursor.session_id} gave more than ResultSize rows")
            if cursor.result_count is None and isinstance(rows[0], dict):
                count = int_field(rows[0], "ResultCount")
                if count is not None and count > self.session_cap:
                    if not allow_over_cap:
                        scope = f" (RecordType {pascal(record_type)})" if record_type else ""
                        raise NeedsSplitError(
                            f"{count} records in {window.start.isoformat()}..{window.end.isoformat()}{scope} exceed "
                            f"the {self.session_cap}-record session cap",
                            limit=self.session_cap,
                            reported_count=count,
                        )
                    cursor.limit = self.session_cap  # page as far as the cap allows; the caller reports the rest
            kept = cursor.within_limit(rows)
            cursor.accept(kept)
            page = page_of(kept, exchange_item)
            if page.malformed:
                logger.warning("session %s: %d malformed row(s) quarantined", cursor.session_id, len(page.malformed))
            yield page
            if cursor.done:
                return

    def count(self, window: TimeWindow, filters: AuditFilters, *, high_completeness: bool = False) -> int:
        """How many records the window holds: the ``ResultCount`` of a one-row call per record type."""
        total = 0
        for record_type in self._types(filters):
            session_id = str(uuid.uuid4())
            probe = self._call(window, filters, session_id, record_type=record_type, high=high_completeness, probe=True)
            rows = next(probe, [])
            if is_empty_result(rows):
                continue
            count = int_field(rows[0], "ResultCount") if isinstance(rows[0], dict) else None
            if count is None or count < 0:
                raise TransientApiError(f"probe session {session_id} returned no valid ResultCount")
            total += count
        return total
