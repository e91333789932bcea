"""Graph adapter against a query API that behaves as the evidence says: both service filter names, DELETE answered 404
"No HTTP resource was found", ``$filter`` on the query list refused or ignored, and record pages that are sometimes
broken JSON."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from activities import bodies
from shared import names
from shared.audit.config import AuditApiConfig
from shared.audit.graph import GraphAuditClient, build_query_body
from shared.audit.ports import AuditFilters, TimeWindow
from shared.errors import TransientApiError
from shared.models import ActivityResult, Chunk
from shared.sinks.base import write_bytes
from shared.sinks.memory import MemorySink
from tests.audit.scripted_server import FakeTokens, Recorded, Reply, replies, scripted_server

WINDOW = TimeWindow(datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 3, 1, 1, tzinfo=UTC))
NO_CONTROLLER = {
    "Message": "No HTTP resource was found that matches the request URI "
    "'https://o365adtsearchapi.example/security/auditLog/queries('q-1')'.",
    "MessageDetail": "No type was found that matches the controller named 'queries'.",
}


def client_for(base_url: str) -> GraphAuditClient:
    config = AuditApiConfig(
        tenant_id="contoso.onmicrosoft.com", client_id="app", client_secret="s", graph_base_url=base_url
    )
    return GraphAuditClient(config, tokens=FakeTokens(), sleep=lambda _: None)


@pytest.mark.parametrize("version", ["beta", "v1.0"])
def test_the_service_filter_goes_under_both_names(version: str) -> None:
    """The metadata has serviceFilters, production clients send serviceFilter: whichever the service honours
    applies (and what it does not apply is trimmed by the chunk writer)."""
    body = build_query_body(WINDOW, AuditFilters(service="Exchange"), display_name="c", api_version=version)
    assert body["serviceFilters"] == ["Exchange"]
    assert body["serviceFilter"] == "Exchange"


def test_delete_answered_404_is_not_reported_as_deleted() -> None:
    with scripted_server(replies(Reply(404, NO_CONTROLLER))) as srv:
        client = client_for(srv.base_url)
        outcome = client.delete_query("q-1")
        assert outcome.deleted is False and "No HTTP resource was found" in outcome.detail
        result = ActivityResult.from_json(bodies.graph_delete(client, {"queryId": "q-1"}))
    assert result.ok and result.data["deleted"] is False
    assert result.data["disposition"] == "deleteUnsupported"
    assert "No HTTP resource" in result.data["reason"]


def test_delete_answered_204_is_deleted() -> None:
    with scripted_server(replies(Reply(204))) as srv:
        client = client_for(srv.base_url)
        result = ActivityResult.from_json(bodies.graph_delete(client, {"queryId": "q-1"}))
    assert result.ok and result.data["deleted"] is True and result.data["disposition"] == "deleted"


def _query(name: str, window: TimeWindow, query_id: str, status: str = "running") -> dict[str, Any]:
    return {
        "id": query_id,
        "displayName": name,
        "filterStartDateTime": window.start.isoformat().replace("+00:00", "Z"),
        "filterEndDateTime": window.end.isoformat().replace("+00:00", "Z"),
        "status": status,
    }


class QueryList:
    """A query list that refuses ``$filter`` (400), ignores it, or cannot be listed at all; paged by ``per_page``."""

    def __init__(self, items: list[dict[str, Any]], *, filter_mode: str, per_page: int = 2, list_status: int = 200):
        self.items = items
        self.filter_mode = filter_mode
        self.per_page = per_page
        self.list_status = list_status
        self.base = ""
        self.created = 0

    def handle(self, request: Recorded) -> Reply:
        split = urlsplit(request.path)
        query = parse_qs(split.query)
        if request.method == "POST":
            self.created += 1
            return Reply(201, {"id": f"new-{self.created}", "status": "notStarted"})
        if self.list_status != 200:
            return Reply(self.list_status, {"error": {"code": "BadRequest", "message": "Listing is not supported."}})
        if "$filter" in query and self.filter_mode == "refuse":
            message = (
                "The query specified in the URI is not valid. Query option 'Filter' is not allowed. To allow it, set "
                "the 'AllowedQueryOptions' property on EnableQueryAttribute or QueryValidationSettings."
            )
            return Reply(400, {"error": {"code": "BadRequest", "message": message}})
        skip = int(query.get("$skiptoken", ["0"])[0])
        page = self.items[skip : skip + self.per_page]
        body: dict[str, Any] = {"value": page}
        if skip + self.per_page < len(self.items):
            body["@odata.nextLink"] = f"{self.base}/beta/security/auditLog/queries?$skiptoken={skip + self.per_page}"
        return Reply(200, body)


def _others(n: int) -> list[dict[str, Any]]:
    return [_query(f"other-{i}", WINDOW, f"o-{i}", "succeeded") for i in range(n)]


@pytest.mark.parametrize("mode", ["refuse", "ignore"])
def test_find_by_name_matches_client_side_when_filter_is_refused_or_ignored(mode: str) -> None:
    mine = _query("ual-c-chunk", WINDOW, "mine-1")
    other_window = _query("ual-c-chunk", TimeWindow(WINDOW.end, WINDOW.end.replace(hour=2)), "mine-other-window")
    api = QueryList([*_others(5), other_window, mine], filter_mode=mode)
    with scripted_server(api.handle) as srv:
        api.base = srv.base_url
        assert client_for(srv.base_url).find_query(WINDOW, display_name="ual-c-chunk") == "mine-1"


def test_a_refused_filter_is_not_sent_again_by_the_same_client() -> None:
    api = QueryList(_others(1), filter_mode="refuse", per_page=10)
    with scripted_server(api.handle) as srv:
        api.base = srv.base_url
        client = client_for(srv.base_url)
        assert client.find_query(WINDOW, display_name="a") is None
        assert client.find_query(WINDOW, display_name="b") is None
    with_filter = [r for r in srv.requests if "filter" in r.path]
    assert len(with_filter) == 1 and len(srv.requests) == 3


@pytest.mark.parametrize("status", [400, 404, 405, 501])
def test_submit_creates_the_query_when_the_list_cannot_be_read_at_all(status: int) -> None:
    api = QueryList([], filter_mode="refuse", list_status=status)
    with scripted_server(api.handle) as srv:
        api.base = srv.base_url
        payload = {"collectionId": "c", "tenantId": "t", "chunk": Chunk(WINDOW.start, WINDOW.end).to_json()}
        # An earlier run recorded its intent and died before the create answered: only then is the list searched.
        sink = MemorySink()
        chunk_name = names.chunk_object_name("t", "c", WINDOW.start, WINDOW.end)
        write_bytes(sink, names.query_record_name(chunk_name), b'{"displayName": "earlier"}')
        result = ActivityResult.from_json(bodies.graph_submit(client_for(srv.base_url), sink, payload))
    assert result.ok, result.error
    assert result.data["queryId"] == "new-1" and api.created == 1
    assert any(r.method == "GET" for r in srv.requests)  # the list was tried (and could not be read)


def test_the_fallback_scan_is_bounded() -> None:
    api = QueryList(_others(500), filter_mode="ignore", per_page=2)
    with scripted_server(api.handle) as srv:
        api.base = srv.base_url
        assert client_for(srv.base_url).find_query(WINDOW, display_name="absent") is None
    assert 1 < len(srv.requests) < 250  # stopped by its page bound, not by the end of a 250-page list


def _page(ids: list[str], next_link: str | None) -> dict[str, Any]:
    items = [{"id": i, "createdDateTime": "2024-03-01T00:10:00Z", "auditData": {"Id": i}} for i in ids]
    return {"value": items, **({"@odata.nextLink": next_link} if next_link else {})}


def test_a_broken_json_record_page_is_read_again() -> None:
    first_pages: list[int] = []

    def handle(request: Recorded) -> Reply:
        second = "page=2" in request.path
        if second:
            first_pages.append(1)
            if len(first_pages) == 1:
                return Reply(200, raw=b'{"value": [{"id": "r3", "createdDateTime": "2024-03-01T00:10:00Z"')
            return Reply(200, _page(["r3", "r4"], None))
        return Reply(200, _page(["r1", "r2"], f"{base[0]}/beta/security/auditLog/queries/q/records?page=2"))

    base: list[str] = []
    with scripted_server(handle) as srv:
        base.append(srv.base_url)
        pages = list(client_for(srv.base_url).iter_record_pages("q"))
    assert [r["id"] for p in pages for r in p.records] == ["r1", "r2", "r3", "r4"]


def test_a_page_that_never_parses_fails_with_that_reason() -> None:
    def handle(request: Recorded) -> Reply:
        if "page=2" in request.path:
            return Reply(200, raw=b'{"value": [{"id": "r3"')
        return Reply(200, _page(["r1"], f"{base[0]}/beta/security/auditLog/queries/q/records?page=2"))

    base: list[str] = []
    with scripted_server(handle) as srv:
        base.append(srv.base_url)
        pages = client_for(srv.base_url).iter_record_pages("q")
        assert [r["id"] for r in next(pages).records] == ["r1"]
        with pytest.raises(TransientApiError, match="unreadable JSON"):
            next(pages)
