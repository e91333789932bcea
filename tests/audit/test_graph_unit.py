"""Graph adapter: request body, status mapping, record normalisation and paging over a scripted loopback API."""

from __future__ import annotations

import copy
import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from shared.audit.config import AuditApiConfig
from shared.audit.graph import GraphAuditClient, build_query_body, parse_query_status, parse_records_page
from shared.audit.ports import AuditFilters, QueryState, TimeWindow
from shared.errors import PermanentApiError, QueryFailedError
from tests.audit.scripted_server import FakeTokens, Recorded, Reply, replies, scripted_server

FIXTURE = Path(__file__).parent / "fixtures" / "graph_list_records_documented.json"
WINDOW = TimeWindow(datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 3, 1, 6, 30, tzinfo=UTC))


def documented_page() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


def client_for(base_url: str, **overrides: Any) -> GraphAuditClient:
    settings: dict[str, Any] = {
        "tenant_id": "contoso.onmicrosoft.com",
        "client_id": "app",
        "client_secret": "s",
        "graph_base_url": base_url,
        "page_size": 3,
    }
    settings.update(overrides)
    return GraphAuditClient(AuditApiConfig(**settings), tokens=FakeTokens(), sleep=lambda _: None)


def test_body_has_every_filter_in_camel_case() -> None:
    filters = AuditFilters(
        record_types=("exchangeItem",),
        operations=("Send",),
        user_principal_names=("a@contoso.com",),
        ip_addresses=("203.0.113.9",),
        object_ids=("obj",),
        administrative_unit_ids=("au",),
        keyword="budget",
        service="Exchange",
    )
    body = build_query_body(WINDOW, filters, display_name="chunk-1", api_version="beta")
    assert body == {
        "displayName": "chunk-1",
        "filterStartDateTime": "2024-03-01T00:00:00Z",
        "filterEndDateTime": "2024-03-01T06:30:00Z",
        "recordTypeFilters": ["exchangeItem"],
        "operationFilters": ["Send"],
        "userPrincipalNameFilters": ["a@contoso.com"],
        "ipAddressFilters": ["203.0.113.9"],
        "objectIdFilters": ["obj"],
        "administrativeUnitIdFilters": ["au"],
        "keywordFilter": "budget",
        "serviceFilter": "Exchange",
        "serviceFilters": ["Exchange"],
    }
    assert build_query_body(WINDOW, filters, display_name="c", api_version="v1.0")["serviceFilters"] == ["Exchange"]
    assert set(build_query_body(WINDOW, AuditFilters(), display_name="c", api_version="beta")) == {
        "displayName",
        "filterStartDateTime",
        "filterEndDateTime",
    }


@pytest.mark.parametrize(
    ("raw", "state"),
    [
        ("notStarted", QueryState.PENDING),
        ("queued", QueryState.PENDING),
        ("running", QueryState.PENDING),
        ("succeeded", QueryState.SUCCEEDED),
        ("failed", QueryState.FAILED),
        ("cancelled", QueryState.CANCELLED),
    ],
)
def test_status_mapping(raw: str, state: QueryState) -> None:
    assert parse_query_status({"id": "q", "status": raw}).state is state


def test_unknown_status_is_pending_with_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    status = parse_query_status({"id": "q", "status": "unknownFutureValue"})
    assert status.state is QueryState.PENDING and status.raw_status == "unknownFutureValue"
    assert "unknownFutureValue" in caplog.text


def test_limit_flag_and_approximate_count() -> None:
    status = parse_query_status(
        {"status": "succeeded", "isRecordCountLimitExceeded": True, "approximateReturnedRecordCount": 1000321}
    )
    assert status.record_count_limit_exceeded and status.approximate_record_count == 1000321
    assert not parse_query_status({"status": "succeeded"}).record_count_limit_exceeded


def test_documented_example_placeholder_time_is_quarantined_not_dropped() -> None:
    page, next_link = parse_records_page(documented_page())
    assert page.records == [] and next_link is None
    assert len(page.malformed) == 1 and "createdDateTime" in page.malformed[0].reason
    assert "40706737-7eca-f9a1-97a5-dedd3260e24a" in page.malformed[0].raw


def test_documented_example_with_a_real_time_normalises() -> None:
    body = documented_page()
    body["value"][0]["createdDateTime"] = "2024-03-01T01:02:03.1234567Z"
    page, _ = parse_records_page(body)
    (record,) = page.records
    assert record["createdDateTime"] == "2024-03-01T01:02:03.123456Z"
    assert "@odata.type" not in record and record["auditData"] == {"@odata.type": "microsoft.graph.security.auditData"}


def test_malformed_records_are_quarantined_rest_of_page_kept() -> None:
    good = documented_page()["value"][0] | {"createdDateTime": "2024-03-01T01:00:00Z"}
    items = [
        good | {"id": "good-1"},
        good | {"id": "bad-json", "auditData": '{"Id": "x", "Creat'},
        {k: v for k, v in good.items() if k != "id"},
        good | {"id": "string-data", "auditData": '{"Id": "y"}'},
        "not an object",
    ]
    page, _ = parse_records_page({"value": items})
    assert [r["id"] for r in page.records] == ["good-1", "string-data"]
    assert page.records[1]["auditData"] == {"Id": "y"}
    reasons = [m.reason for m in page.malformed]
    assert len(reasons) == 3
    assert "bad-json" in reasons[0] and "not JSON" in reasons[0]
    assert "no id" in reasons[1] and "not a JSON object" in reasons[2]


def _records_handler(base: list[str]) -> Any:
    def handle(request: Recorded) -> Reply:
        if request.method == "POST":
            return Reply(201, {"id": "q-1", "status": "notStarted"})
        if request.path.endswith("/q-1") and request.method == "GET":
            return Reply(200, {"id": "q-1", "status": "succeeded"})
        if request.method == "DELETE":
            return Reply(404, {"error": {"code": "NotFound"}})
        template = documented_page()["value"][0] | {"createdDateTime": "2024-03-01T01:00:00Z"}
        page_no = 0 if "top=" in request.path else int(request.path.rsplit("page=", 1)[1])
        items = [template | {"id": f"r{page_no}-{n}"} for n in range(3 if page_no < 2 else 1)]
        body: dict[str, Any] = {"value": items}
        if page_no < 2:
            body["@odata.nextLink"] = f"{base[0]}/beta/security/auditLog/queries/q-1/records?page={page_no + 1}"
        return Reply(200, body)

    return handle


def test_lifecycle_and_paging_over_http() -> None:
    base: list[str] = []
    with scripted_server(_records_handler(base)) as srv:
        base.append(srv.base_url)
        client = client_for(srv.base_url)
        query_id = client.create_query(WINDOW, AuditFilters(operations=("Send",)), display_name="chunk-7")
        assert query_id == "q-1"
        assert client.get_query(query_id).state is QueryState.SUCCEEDED
        pages = list(client.iter_record_pages(query_id))
        client.delete_query(query_id)  # 404 is not an error
    assert [len(p.records) for p in pages] == [3, 3, 1]
    assert srv.requests[0].body["displayName"] == "chunk-7"
    assert srv.requests[0].body["operationFilters"] == ["Send"]
    record_calls = [r.path for r in srv.requests if "/records" in r.path]
    assert record_calls[0].endswith("/records?%24top=3") or record_calls[0].endswith("/records?$top=3")
    assert record_calls[1].endswith("page=1") and "top" not in record_calls[1]


def test_next_link_to_another_origin_is_refused() -> None:
    evil = documented_page() | {"@odata.nextLink": "https://evil.example.com/steal"}
    evil["value"][0]["createdDateTime"] = "2024-03-01T01:00:00Z"
    with scripted_server(replies(Reply(200, evil))) as srv:
        pages = client_for(srv.base_url).iter_record_pages("q-1")
        assert len(next(pages).records) == 1
        with pytest.raises(PermanentApiError, match="outside"):
            next(pages)
    assert len(srv.requests) == 1


def test_poll_of_missing_query_is_query_failed() -> None:
    with scripted_server(replies(Reply(404, {"error": {"code": "NotFound"}}))) as srv, pytest.raises(QueryFailedError):
        client_for(srv.base_url).get_query("gone")


def test_create_without_id_is_an_error() -> None:
    with scripted_server(replies(Reply(201, {"status": "notStarted"}))) as srv, pytest.raises(PermanentApiError):
        client_for(srv.base_url).create_query(WINDOW, AuditFilters(), display_name="x")


def test_emulator_independent_copy_is_not_mutated() -> None:
    body = documented_page()
    before = copy.deepcopy(body)
    body["value"][0]["createdDateTime"] = "2024-03-01T01:00:00Z"
    parse_records_page(body)
    assert body["value"][0]["auditData"] == before["value"][0]["auditData"]
    assert WINDOW.end - WINDOW.start == timedelta(hours=6, minutes=30)
