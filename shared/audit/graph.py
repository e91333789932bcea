"""Microsoft Graph audit log query API (``/security/auditLog/queries``) as an :class:`AuditQueryApi`.

Lifecycle: ``create_query`` (POST) → ``get_query`` polled by the orchestrator with durable timers →
``iter_record_pages`` following ``@odata.nextLink`` one page at a time → ``delete_query`` (optional: the service
answers 404 "No HTTP resource was found" today, which is reported as such, never as a deletion).

Finding a query by its deterministic name works whatever the service does with ``$filter`` on the list: honoured,
refused (400; this client then stops sending it) or ignored (every query comes back). Names and windows are matched
here, over a bounded number of list pages, and a list that cannot be read at all means "not found", never a failed
submit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

from shared.audit.auth import GRAPH_SCOPE, TokenProvider, token_provider_for
from shared.audit.config import AuditApiConfig
from shared.audit.http import ApiIdentity, http_client_for
from shared.audit.normalise import graph_item, page_of
from shared.audit.ports import AuditFilters, DeleteOutcome, QueryState, QueryStatus, RecordPage, TimeWindow
from shared.audit.record_lines import graph_page, graph_record_page
from shared.errors import CollectorError, PermanentApiError, QueryFailedError
from shared.records.json_codec import JsonDecodeError
from shared.records.json_codec import loads as json_loads
from shared.records.raw_json import SplitPage, is_utf8, split_page
from shared.records.rules import format_timestamp

logger = logging.getLogger(__name__)

GRAPH_PERMISSION = "AuditLogsQuery.Read.All"
GRAPH_API = ApiIdentity(name="Graph audit log query API", scope=GRAPH_SCOPE, permission=GRAPH_PERMISSION)

_MAX_LIST_PAGES = 50
"""List pages a look-up by name reads at most (then it gives up: "not found", with a warning)."""


def _normal_time(value: object) -> str | None:
    """A Graph timestamp in ``format_timestamp`` form (the service may echo fractions or offsets differently)."""
    if not isinstance(value, str):
        return None
    try:
        return format_timestamp(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None


_STATES = {
    "notstarted": QueryState.PENDING,
    "queued": QueryState.PENDING,
    "running": QueryState.PENDING,
    "succeeded": QueryState.SUCCEEDED,
    "failed": QueryState.FAILED,
    "cancelled": QueryState.CANCELLED,
}


def build_query_body(
    window: TimeWindow, filters: AuditFilters, *, display_name: str, api_version: str
) -> dict[str, Any]:
    """The create-query body: camelCase fields from the Graph docs; empty filters are left out."""
    body: dict[str, Any] = {
        "displayName": display_name,
        "filterStartDateTime": format_timestamp(window.start),
        "filterEndDateTime": format_timestamp(window.end),
    }
    lists = {
        "recordTypeFilters": filters.record_types,
        "operationFilters": filters.operations,
        "userPrincipalNameFilters": filters.user_principal_names,
        "ipAddressFilters": filters.ip_addresses,
        "objectIdFilters": filters.object_ids,
        "administrativeUnitIdFilters": filters.administrative_unit_ids,
    }
    for name, values in lists.items():
        if values:
            body[name] = list(values)
    if filters.keyword:
        body["keywordFilter"] = filters.keyword
    if filters.service:
        # Both names (docs/real-services.md, 2.2): the service metadata has the collection, while the v1.0 create
        # doc's example and production clients (Microsoft-Extractor-Suite, microsoft/PAX) send the single-valued
        # serviceFilter, so the service accepts both; which one it honours is unknown (the doctor finds out). A
        # filter the service ignores costs only transfer: the chunk writer trims what the filter excludes.
        body["serviceFilter"] = filters.service
        body["serviceFilters"] = [filters.service]
    return body


def parse_query_status(body: dict[str, Any]) -> QueryStatus:
    """Maps an auditLogQuery resource to :class:`QueryStatus`; unknown states count as pending (with a warning)."""
    raw = str(body.get("status") or "")
    state = _STATES.get(raw.lower())
    if state is None:
        logger.warning("audit query %s has unknown status %r; treating it as pending", body.get("id"), raw)
        state = QueryState.PENDING
    approx = body.get("approximateReturnedRecordCount")
    limit = body.get("recordCountLimit")
    return QueryStatus(
        state=state,
        raw_status=raw,
        record_count_limit_exceeded=bool(body.get("isRecordCountLimitExceeded") or False),
        approximate_record_count=_count(approx),
        record_count_limit=_count(limit) or None,
    )


def _count(value: object) -> int | None:
    """A count the service sent as a JSON number (None: absent or not a number)."""
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def parse_records_page(body: dict[str, Any]) -> tuple[RecordPage, str | None]:
    """One ``records`` response → (page of normalised records + quarantined ones, next link)."""
    items = body.get("value")
    if not isinstance(items, list):
        raise PermanentApiError("Graph records page has no 'value' list")
    page = page_of(items, graph_item)
    next_link = body.get("@odata.nextLink")
    return page, next_link if isinstance(next_link, str) and next_link else None


_NEXT_LINK = "@odata.nextLink"


def split_records_body(body: bytes) -> tuple[SplitPage, bytes] | dict[str, Any]:
    """A ``records`` response's bytes cut into its records' bytes (with the body); a body that is not valid UTF-8 is
    decoded whole instead, as before (invalid sequences read as U+FFFD).

    Raises:
        JsonDecodeError: the body is not a JSON object.
    """
    if not is_utf8(body):
        value = json_loads(body)
        if not isinstance(value, dict):
            raise JsonDecodeError("the page is not a JSON object")
        return value
    return split_page(body, items_key="value", members=(_NEXT_LINK,)), body


def parse_records_answer(answer: tuple[SplitPage, bytes] | dict[str, Any]) -> tuple[RecordPage, str | None]:
    """One ``records`` response as :func:`split_records_body` read it → (page, next link): a page of the records'
    bytes (``shared.audit.normalise.graph_page``)."""
    if isinstance(answer, dict):
        if not isinstance(answer.get("value"), list):
            raise PermanentApiError("Graph records page has no 'value' list")
        link = answer.get(_NEXT_LINK)
        return graph_record_page(answer), link if isinstance(link, str) and link else None
    split, body = answer
    if split.items is None:
        raise PermanentApiError("Graph records page has no 'value' list")
    multiline = b"\n" in body or b"\r" in body
    next_link = split.members[_NEXT_LINK]
    page = graph_page(split.items, body=body, multiline=multiline)
    return page, next_link if isinstance(next_link, str) and next_link else None


class GraphAuditClient:
    """:class:`AuditQueryApi` over Microsoft Graph. Thread-compatible; one ``requests.Session`` per instance."""

    def __init__(
        self,
        config: AuditApiConfig,
        *,
        tokens: TokenProvider | None = None,
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], datetime] | None = None,
        retry_wait_scale: float = 1.0,
    ) -> None:
        self._config = config
        self._http = http_client_for(
            config,
            tokens or token_provider_for(config),
            replace(GRAPH_API, scope=config.graph_scope),  # the configured cloud's audience
            sleep=sleep,
            clock=clock,
            retry_wait_scale=retry_wait_scale,
        )
        self._root = f"{config.graph_root}/security/auditLog/queries"
        self._origin = urlsplit(config.graph_base_url)
        self._filter_supported = True
        """False once the list refused ``$filter``: later look-ups list without it."""

    def close(self) -> None:
        self._http.close()

    def _query_url(self, query_id: str) -> str:
        return f"{self._root}/{quote(query_id, safe='')}"

    def create_query(self, window: TimeWindow, filters: AuditFilters, *, display_name: str) -> str:
        body = build_query_body(window, filters, display_name=display_name, api_version=self._config.graph_api_version)

        def recover() -> dict[str, Any] | None:
            # A lost response may hide a created query: reuse it rather than spend quota on a duplicate.
            found = self.find_query(window, display_name=display_name)
            return {"id": found} if found else None

        created = self._http.request_json("POST", self._root, json_body=body, recover=recover)
        query_id = created.get("id") if created else None
        if not isinstance(query_id, str) or not query_id:
            raise PermanentApiError("Graph created an audit query but returned no id")
        logger.info("created audit query %s (%s) for %s..%s", query_id, display_name, window.start, window.end)
        return query_id

    def find_query(self, window: TimeWindow, *, display_name: str) -> str | None:
        """The id of a live (not failed or cancelled) query with this displayName and window, if one exists.

        The collector names each chunk's query deterministically, so this finds what an earlier attempt created.
        A list the service will not give (any refusal but a missing permission or bad credentials) is "not found".
        """
        try:
            return self._find_query(window, display_name)
        except CollectorError as exc:
            if exc.dooms_collection or not isinstance(exc, PermanentApiError):
                raise
            logger.warning("cannot look audit queries up by name (%s); treating %s as not found", exc, display_name)
            return None

    def _find_query(self, window: TimeWindow, display_name: str) -> str | None:
        wanted = (format_timestamp(window.start), format_timestamp(window.end))
        escaped = display_name.replace("'", "''")
        url = self._root
        params: dict[str, str] | None = None
        if self._filter_supported:
            params = {"$filter": f"displayName eq '{escaped}'"}
        for _ in range(_MAX_LIST_PAGES):
            try:
                body = self._http.request_json("GET", url, params=params)
            except PermanentApiError as exc:
                if params is None or exc.status != 400 or exc.dooms_collection:
                    raise
                logger.info("the query list refused $filter (%s); matching names here from now on", exc)
                self._filter_supported = False
                url, params = self._root, None
                continue
            items = body.get("value") if body else None
            for item in items if isinstance(items, list) else []:
                if not isinstance(item, dict) or item.get("displayName") != display_name:
                    continue
                window_of = (_normal_time(item.get("filterStartDateTime")), _normal_time(item.get("filterEndDateTime")))
                state = _STATES.get(str(item.get("status") or "").lower(), QueryState.PENDING)
                if window_of == wanted and state in (QueryState.PENDING, QueryState.SUCCEEDED) and item.get("id"):
                    logger.info("found existing audit query %s for %s", item["id"], display_name)
                    return str(item["id"])
            next_link = body.get("@odata.nextLink") if body else None
            following = self._checked_next_link(next_link if isinstance(next_link, str) and next_link else None)
            if following is None:
                return None
            url, params = following, None
        logger.warning(
            "looked through %d pages of audit queries without finding %s; the list is longer than the look-up reads",
            _MAX_LIST_PAGES,
            display_name,
        )
        return None

    def get_query(self, query_id: str) -> QueryStatus:
        body = self._http.request_json("GET", self._query_url(query_id), not_found_ok=True)
        if body is None:
            # PAX calls a 404 on poll a dead query; polling it again will not bring it back.
            raise QueryFailedError(f"audit query {query_id} no longer exists", status=404)
        return parse_query_status(body)

    def iter_record_pages(self, query_id: str) -> Iterator[RecordPage]:
        url: str | None = f"{self._query_url(query_id)}/records"
        params: dict[str, str] | None = {"$top": str(self._config.page_size)}
        while url is not None:
            answer = self._http.request_page(url, params=params, split=split_records_body)
            if answer is None:
                raise PermanentApiError(f"Graph returned an empty records response for query {query_id}")
            page, next_link = parse_records_answer(answer)
            del answer
            if page.malformed:
                logger.warning("query %s: %d malformed record(s) quarantined", query_id, len(page.malformed))
            yield page
            url = self._checked_next_link(next_link)
            params = None  # the next link already carries $top and the skip token

    def _checked_next_link(self, link: str | None) -> str | None:
        if link is None:
            return None
        parts = urlsplit(link)
        # The bearer token goes wherever the link points: follow it only on the configured Graph origin.
        if (parts.scheme, parts.netloc.lower()) != (self._origin.scheme, self._origin.netloc.lower()):
            raise PermanentApiError(f"Graph nextLink points outside {self._origin.scheme}://{self._origin.netloc}")
        return link

    def delete_query(self, query_id: str) -> DeleteOutcome:
        """Deleted only on a 2xx; a 404 (no such route today, or the query is gone) deletes nothing."""
        try:
            self._http.request_json("DELETE", self._query_url(query_id))
        except PermanentApiError as exc:
            if exc.status == 404:
                return DeleteOutcome(deleted=False, detail=str(exc))
            raise
        return DeleteOutcome(deleted=True)
