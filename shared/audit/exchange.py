"""Exchange Online ``Search-UnifiedAuditLog`` via the REST ``InvokeCommand`` endpoint, as an :class:`AuditSearchApi`.

A window is read in one ``ReturnLargeSet`` session: the same ``SessionId`` is sent again until ``ResultIndex``
reaches ``ResultCount``. A session can deliver at most 50,000 records, so the count is probed first and a larger
window raises :class:`NeedsSplitError` before any page is produced.

Record types: the cmdlet takes a single ``RecordType``. When several are asked for, this client runs one session per
record type (probing all of them before the first page), so a multi-type filter stays exact without the caller
splitting it. ``service`` and ``administrative_unit_ids`` have no cmdlet parameter and are rejected
(:func:`validate_exchange_filters`) rather than silently ignored.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

from shared.audit.auth import EXCHANGE_SCOPE, TokenProvider, token_provider_for
from shared.audit.config import AuditApiConfig
from shared.audit.http import ApiIdentity, http_client_for
from shared.audit.normalise import normalise_exchange_row, page_of, pascal
from shared.audit.ports import AuditFilters, RecordPage, TimeWindow
from shared.errors import NeedsSplitError, PermanentApiError, RequestValidationError, TransientApiError

logger = logging.getLogger(__name__)

SESSION_CAP = 50_000
"""Most records one ReturnLargeSet session can page through (Search-UnifiedAuditLog docs)."""
RESULT_SIZE = 5000
PROBE_RESULT_SIZE = 1
EXCHANGE_PERMISSION = 'Exchange.ManageAsApp + the "View-Only Audit Logs" role'
EXCHANGE_API = ApiIdentity(name="Exchange InvokeCommand", scope=EXCHANGE_SCOPE, permission=EXCHANGE_PERMISSION)
_ANCHOR_MAILBOX = "SystemMailbox{bb558c35-97f1-4cb9-8ff7-d53741dc928c}"
_DATE_FORMAT = "%Y-%m-%dT%H:%M:%S"


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
    window: TimeWindow, filters: AuditFilters, *, record_type: str | None, session_id: str, result_size: int
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
    return params


def _int_field(row: dict[str, Any], name: str) -> int | None:
    value = row.get(name)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


class _SessionCursor:
    """Integrity checks of one session: contiguous ``ResultIndex`` and a stable ``ResultCount``."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.result_count: int | None = None
        self.next_index = 1
        self.limit: int | None = None
        """Stop after this many rows even when ``ResultCount`` is larger (paging a session up to its cap)."""

    @property
    def done(self) -> bool:
        if self.result_count is None:
            return False
        last = self.result_count if self.limit is None else min(self.result_count, self.limit)
        return self.next_index > last

    def accept(self, rows: list[Any]) -> None:
        indexes: list[int] = []
        for row in rows:
            count = _int_field(row, "ResultCount") if isinstance(row, dict) else None
            index = _int_field(row, "ResultIndex") if isinstance(row, dict) else None
            if count is None or index is None or index < 1:
                raise TransientApiError(f"session {self.session_id}: row without a valid ResultIndex/ResultCount")
            if self.result_count is None:
                self.result_count = count
            elif count != self.result_count:
                raise TransientApiError(
                    f"session {self.session_id}: ResultCount changed from {self.result_count} to {count}"
                )
            indexes.append(index)
        expected = list(range(self.next_index, self.next_index + len(indexes)))
        if sorted(indexes) != expected:
            raise TransientApiError(
                f"session {self.session_id}: ResultIndex not contiguous (expected {self.next_index}.."
                f"{self.next_index + len(indexes) - 1}, got {min(indexes)}..{max(indexes)})"
            )
        self.next_index += len(indexes)


def _is_empty_result(rows: list[Any]) -> bool:
    """The service says "nothing" either with an empty list or with one row whose ResultCount is 0."""
    return not rows or (len(rows) == 1 and isinstance(rows[0], dict) and _int_field(rows[0], "ResultCount") == 0)


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
    ) -> None:
        self._config = config
        self._http = http_client_for(
            config,
            tokens or token_provider_for(config),
            EXCHANGE_API,
            sleep=sleep,
            clock=clock,
            retry_wait_scale=retry_wait_scale,
        )
        self._url = f"{config.exchange_root}/adminapi/beta/{quote(config.tenant_id, safe='')}/InvokeCommand"
        self.session_cap = session_cap
        self._result_size = result_size

    def close(self) -> None:
        self._http.close()

    def _invoke(self, parameters: dict[str, Any]) -> list[Any]:
        headers = {
            "X-CmdletName": "Search-UnifiedAuditLog",
            "X-ResponseFormat": "json",
            "X-ClientApplication": "ExoManagementModule",
            "X-AnchorMailbox": _ANCHOR_MAILBOX,
            "Prefer": f"odata.maxpagesize={self._result_size}",
        }
        body = {"CmdletInput": {"CmdletName": "Search-UnifiedAuditLog", "Parameters": parameters}}
        response = self._http.request_json("POST", self._url, json_body=body, headers=headers)
        rows = response.get("value") if response else []
        if not isinstance(rows, list):
            raise PermanentApiError("InvokeCommand response has no 'value' list")
        if response and response.get("@odata.nextLink"):
            # One call must fit one page (maxpagesize == ResultSize); a split page would break the index checks.
            raise PermanentApiError("InvokeCommand paged a single call; Prefer odata.maxpagesize was not honoured")
        return rows

    def _types(self, filters: AuditFilters) -> list[str | None]:
        validate_exchange_filters(filters)
        return list(dict.fromkeys(filters.record_types)) or [None]

    def _probe(self, window: TimeWindow, filters: AuditFilters, record_type: str | None) -> int:
        session_id = str(uuid.uuid4())
        params = build_parameters(
            window, filters, record_type=record_type, session_id=session_id, result_size=PROBE_RESULT_SIZE
        )
        rows = self._invoke(params)
        if _is_empty_result(rows):
            return 0
        count = _int_field(rows[0], "ResultCount") if isinstance(rows[0], dict) else None
        if count is None or count < 0:
            raise TransientApiError(f"probe session {session_id} returned no valid ResultCount")
        return count

    def count(self, window: TimeWindow, filters: AuditFilters) -> int:
        return sum(self._probe(window, filters, record_type) for record_type in self._types(filters))

    def iter_record_pages(self, window: TimeWindow, filters: AuditFilters) -> Iterator[RecordPage]:
        counts = [(record_type, self._probe(window, filters, record_type)) for record_type in self._types(filters)]
        for record_type, count in counts:
            self._check_cap(count, window, record_type)
        for record_type, count in counts:
            if count:
                yield from self._iter_session(window, filters, record_type, count)

    def iter_record_pages_up_to_cap(self, window: TimeWindow, filters: AuditFilters) -> Iterator[RecordPage]:
        """Like ``iter_record_pages``, but a window over the session cap is paged as far as the cap allows.

        For a window the caller cannot split any further: every page the session can give is yielded, then
        :class:`NeedsSplitError` says records were left out (so the caller reports the chunk incomplete).
        """
        counts = [(record_type, self._probe(window, filters, record_type)) for record_type in self._types(filters)]
        over: list[tuple[int, str | None]] = []
        for record_type, count in counts:
            if count:
                yield from self._iter_session(window, filters, record_type, count, up_to_cap=True)
            if count > self.session_cap:
                over.append((count, record_type))
        for count, record_type in over:
            self._check_cap(count, window, record_type)

    def _check_cap(self, count: int, window: TimeWindow, record_type: str | None) -> None:
        if count > self.session_cap:
            scope = f" (RecordType {pascal(record_type)})" if record_type else ""
            raise NeedsSplitError(
                f"{count} records in {window.start.isoformat()}..{window.end.isoformat()}{scope} exceed the "
                f"{self.session_cap}-record session cap",
                limit=self.session_cap,
                reported_count=count,
            )

    def _iter_session(
        self,
        window: TimeWindow,
        filters: AuditFilters,
        record_type: str | None,
        probed: int,
        *,
        up_to_cap: bool = False,
    ) -> Iterator[RecordPage]:
        cursor = _SessionCursor(str(uuid.uuid4()))
        if up_to_cap:
            cursor.limit = self.session_cap  # the service stops there: that is the end, not a broken session
        params = build_parameters(
            window, filters, record_type=record_type, session_id=cursor.session_id, result_size=self._result_size
        )
        # Records may arrive between probe and session; allow for growth but never loop forever.
        max_calls = math.ceil(max(probed, self.session_cap) / self._result_size) + 2
        for _ in range(max_calls):
            rows = self._invoke(params)
            if _is_empty_result(rows):
                if cursor.result_count is None:
                    return  # the window emptied between probe and session
                raise TransientApiError(
                    f"session {cursor.session_id} ended at index {cursor.next_index - 1} of {cursor.result_count}"
                )
            if cursor.limit is not None:
                rows = rows[: max(0, cursor.limit - cursor.next_index + 1)]  # a block may straddle the cap
            first = cursor.result_count is None
            cursor.accept(rows)
            if first and cursor.result_count is not None and not up_to_cap:
                self._check_cap(cursor.result_count, window, record_type)
            page = page_of(rows, normalise_exchange_row)
            if page.malformed:
                logger.warning("session %s: %d malformed row(s) quarantined", cursor.session_id, len(page.malformed))
            yield page
            if cursor.done:
                return
        raise TransientApiError(f"session {cursor.session_id} did not finish within {max_calls} calls")
