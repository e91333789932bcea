"""Exchange adapter: parameters, session integrity checks, empty results and the cap, over a scripted loopback API."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.audit.config import AuditApiConfig
from shared.audit.exchange import ExchangeAuditClient, build_parameters, validate_exchange_filters
from shared.audit.exchange_paging import SessionCursor
from shared.audit.exchange_session import read_window
from shared.audit.normalise import normalise_exchange_row
from shared.audit.ports import AuditFilters, MalformedRecord, RecordPage, TimeWindow
from shared.errors import NeedsSplitError, RequestValidationError, TransientApiError
from tests.audit.scripted_server import FakeTokens, Recorded, Reply, scripted_server

WINDOW = TimeWindow(datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 3, 1, 2, tzinfo=UTC))


def row(index: int, count: int, record_type: str = "ExchangeItem", *, data: str | None = None) -> dict[str, Any]:
    audit = {
        "Id": f"id-{record_type}-{index}",
        "CreationTime": "2024-03-01T00:10:00",
        "Operation": "Send",
        "RecordType": 2,
        "UserId": "adele@contoso.com",
        "UserType": 0,
        "Workload": "Exchange",
        "ClientIP": "203.0.113.5",
        "ObjectId": "<m@contoso.com>",
        "OrganizationId": "org",
    }
    return {
        "RecordType": record_type,
        "AuditData": data if data is not None else json.dumps(audit),
        "ResultIndex": index,
        "ResultCount": count,
        "Identity": f"id-{record_type}-{index}",
    }


def session_api(count: int, page: int, *, mutate: Callable[[int, list[dict[str, Any]]], None] | None = None) -> Any:
    """A handler modelling sessions: each SessionId walks 1..count in blocks of ResultSize (capped at ``page``)."""
    progress: dict[str, int] = {}
    calls = [0]

    def handle(request: Recorded) -> Reply:
        params = request.body["CmdletInput"]["Parameters"]
        record_type = params.get("RecordType", "ExchangeItem")
        done = progress.get(params["SessionId"], 0)
        size = min(int(params["ResultSize"]), page)
        rows = [row(i, count, record_type) for i in range(done + 1, min(done + size, count) + 1)]
        progress[params["SessionId"]] = done + len(rows)
        calls[0] += 1
        if mutate is not None:
            mutate(calls[0], rows)
        return Reply(200, {"value": rows})

    return handle


def client_for(base_url: str, **kwargs: Any) -> ExchangeAuditClient:
    config = AuditApiConfig(
        tenant_id="contoso.onmicrosoft.com", client_id="app", client_secret="s", exchange_base_url=base_url
    )
    return ExchangeAuditClient(config, tokens=FakeTokens(), sleep=lambda _: None, **kwargs)


def pages_of(client: ExchangeAuditClient, filters: AuditFilters | None = None) -> list[RecordPage]:
    """The window read as the lane reads a chunk: ``read_block`` call after call, the cursor carried."""
    return [page for pages, _ in read_window(client, WINDOW, filters or AuditFilters()) for page in pages]


def test_parameters_and_filters() -> None:
    filters = AuditFilters(
        operations=("Send", "MailItemsAccessed"),
        user_principal_names=("a@contoso.com",),
        ip_addresses=("203.0.113.5",),
        object_ids=("o",),
        keyword="budget",
    )
    params = build_parameters(WINDOW, filters, record_type="exchangeItem", session_id="S", result_size=5000)
    assert params == {
        "StartDate": "2024-03-01T00:00:00",
        "EndDate": "2024-03-01T02:00:00",
        "SessionId": "S",
        "SessionCommand": "ReturnLargeSet",
        "ResultSize": 5000,
        "RecordType": "ExchangeItem",
        "Operations": ["Send", "MailItemsAccessed"],
        "UserIds": ["a@contoso.com"],
        "IPAddresses": ["203.0.113.5"],
        "ObjectIds": ["o"],
        "FreeText": "budget",
    }


@pytest.mark.parametrize("filters", [AuditFilters(service="Exchange"), AuditFilters(administrative_unit_ids=("au",))])
def test_unsupported_filters_are_rejected(filters: AuditFilters) -> None:
    with pytest.raises(RequestValidationError):
        validate_exchange_filters(filters)


def test_row_maps_to_graph_shape() -> None:
    record = normalise_exchange_row(row(1, 1))
    assert not isinstance(record, MalformedRecord)
    assert record["id"] == "id-ExchangeItem-1"
    assert record["createdDateTime"] == "2024-03-01T00:10:00Z"
    assert record["auditLogRecordType"] == "exchangeItem"
    assert record["service"] == "Exchange" and record["clientIp"] == "203.0.113.5"
    assert record["userPrincipalName"] == "adele@contoso.com" and record["userType"] == "regular"
    assert record["auditData"]["Operation"] == "Send"
    bad = normalise_exchange_row(row(2, 2, data='{"Id": "x", "Cre'))
    assert isinstance(bad, MalformedRecord) and "not JSON" in bad.reason and "id-ExchangeItem-2" in bad.raw


def test_session_pages_until_a_short_call() -> None:
    with scripted_server(session_api(count=12, page=5)) as srv:
        pages = pages_of(client_for(srv.base_url, result_size=5))
    assert [len(p.records) for p in pages] == [5, 5, 2]
    ids = [r["id"] for p in pages for r in p.records]
    assert len(set(ids)) == 12
    assert len({r.body["CmdletInput"]["Parameters"]["SessionId"] for r in srv.requests}) == 1
    assert [r.body["CmdletInput"]["Parameters"]["ResultSize"] for r in srv.requests] == [5, 5, 5]
    headers = srv.requests[0].headers
    assert headers["X-CmdletName"] == "Search-UnifiedAuditLog" and headers["X-ResponseFormat"] == "json"
    assert (
        headers["X-AnchorMailbox"] == "APP:SystemMailbox{bb558c35-97f1-4cb9-8ff7-d53741dc928c}@contoso.onmicrosoft.com"
    )
    assert headers["Prefer"] == "odata.maxpagesize=1000"  # what public clients ask, whatever ResultSize is
    assert srv.requests[0].path == "/adminapi/beta/contoso.onmicrosoft.com/InvokeCommand"


def test_a_probe_is_one_call_that_counts_only_when_it_comes_back_short() -> None:
    with scripted_server(session_api(count=12, page=100)) as srv:
        client = client_for(srv.base_url, result_size=5)
        full = client.probe(WINDOW, result_size=5)
        short = client.probe(WINDOW, result_size=50, record_type="exchangeItem")
    assert (full.rows, full.short, full.describe()) == (5, False, "at least 5 records")
    assert (short.rows, short.short, short.describe()) == (12, True, "12 records")
    assert short.result_count == 12 and short.indexes == list(range(1, 13))
    params = [r.body["CmdletInput"]["Parameters"] for r in srv.requests]
    assert [p["ResultSize"] for p in params] == [5, 50]
    assert [p.get("RecordType") for p in params] == [None, "ExchangeItem"]
    assert len({p["SessionId"] for p in params}) == 2  # never a session a read goes on with
    assert srv.requests[0].headers["X-AnchorMailbox"].endswith("@contoso.onmicrosoft.com")


@pytest.mark.parametrize(
    ("empty", "answer"),
    [
        ([], "emptyAnswers"),
        ([{"ResultCount": 0, "ResultIndex": -1, "AuditData": None}], "emptyAnswers"),
        ([{"ResultCount": 40, "ResultIndex": -1, "Identity": "x", "AuditData": "{}"}], "bogusAnswers"),
    ],
)
def test_empty_result_forms_are_confirmed_in_a_fresh_session_before_the_window_closes(
    empty: list[dict[str, Any]], answer: str
) -> None:
    with scripted_server(lambda _: Reply(200, {"value": empty})) as srv:
        client = client_for(srv.base_url)
        probed = client.probe(WINDOW)
        assert probed.rows == 0 and probed.empty_answers == 3  # a throwaway probe asks an empty answer again, twice
        probe_requests = len(srv.requests)
        calls = list(read_window(client, WINDOW, AuditFilters()))
    pages = [pages for pages, _ in calls]
    evidence = calls[-1][1].evidence[0]
    if answer == "emptyAnswers":  # two agreeing empty answers, each from its own session, close the window
        assert pages == [[], []] and evidence["closedBy"] == "empty" and evidence["complete"]
        assert evidence["answers"]["emptyAnswers"] == 2 and evidence["sessions"] == 2
        assert len(srv.requests) - probe_requests == 2  # the first call and its confirmation
    else:  # bogus answers never confirm anything: the answers stay inconsistent and the type ends incomplete
        assert all(p == [] for p in pages) and not evidence["complete"] and evidence["closedBy"] == "incomplete"
        assert evidence["answers"]["bogusAnswers"] == 4 and "inconsistent answers" in evidence["detail"]
    sessions = {r.body["CmdletInput"]["Parameters"]["SessionId"] for r in srv.requests}
    assert len(sessions) == len(srv.requests)  # every answer from a fresh session


def test_a_first_call_announcing_more_than_the_session_cap_splits_before_any_page() -> None:
    with scripted_server(session_api(count=120, page=5)) as srv:
        client = client_for(srv.base_url, session_cap=100, result_size=5)
        cursor = SessionCursor("s-1")
        with pytest.raises(NeedsSplitError) as info:
            next(iter(client.read_block(WINDOW, AuditFilters(), cursor, record_type="exchangeItem")))
    assert info.value.limit == 100 and info.value.reported_count == 120
    assert "RecordType ExchangeItem" in str(info.value)
    assert len(srv.requests) == 1 and cursor.next_index == 1  # the first call: no page was yielded


def test_several_record_types_run_one_session_each() -> None:
    with scripted_server(session_api(count=3, page=5)) as srv:
        client = client_for(srv.base_url, result_size=5)
        filters = AuditFilters(record_types=("exchangeItem", "sharePointFileOperation", "exchangeItem"))
        pages = pages_of(client, filters)
    types = [r.body["CmdletInput"]["Parameters"]["RecordType"] for r in srv.requests]
    assert types == ["ExchangeItem", "SharePointFileOperation"]  # a type named twice is read once
    assert len({r.body["CmdletInput"]["Parameters"]["SessionId"] for r in srv.requests}) == 2
    assert (
        sorted(r["auditLogRecordType"] for p in pages for r in p.records)
        == ["exchangeItem"] * 3 + ["sharePointFileOperation"] * 3
    )


def _second_block(rows: list[dict[str, Any]]) -> bool:
    return bool(rows) and rows[0]["ResultIndex"] == 6


def _gap(call: int, rows: list[dict[str, Any]]) -> None:
    if _second_block(rows):  # every session's second block skips an index
        for r in rows:
            r["ResultIndex"] += 1


def _count_change(call: int, rows: list[dict[str, Any]]) -> None:
    if _second_block(rows):
        for r in rows:
            r["ResultCount"] += 1


def _early_end(call: int, rows: list[dict[str, Any]]) -> None:
    if _second_block(rows):
        rows.clear()


def test_a_session_that_keeps_moving_on_without_the_reader_starts_new_sessions_then_is_transient() -> None:
    with scripted_server(session_api(count=12, page=5, mutate=_gap)) as srv:
        calls = read_window(client_for(srv.base_url, result_size=5), WINDOW, AuditFilters())
        assert [len(p.records) for p in next(calls)[0]] == [5]
        with pytest.raises(TransientApiError, match="moved on") as info:
            list(calls)
    assert "new session(s) did not help" in str(info.value)
    sessions = [r.body["CmdletInput"]["Parameters"]["SessionId"] for r in srv.requests]
    # Every session skips at its second block: the first, then two new ones (each read block one again), then out.
    assert len(set(sessions)) == 3 and len(sessions) == 6


def test_a_changing_result_count_is_not_evidence_of_anything() -> None:
    with scripted_server(session_api(count=12, page=5, mutate=_count_change)) as srv:
        pages = pages_of(client_for(srv.base_url, result_size=5))
    assert sorted(r["id"] for p in pages for r in p.records) == sorted(f"id-ExchangeItem-{i}" for i in range(1, 13))


def test_a_session_that_ends_early_after_a_full_call_asks_for_a_split() -> None:
    with scripted_server(session_api(count=12, page=5, mutate=_early_end)) as srv:
        calls = read_window(client_for(srv.base_url, result_size=5), WINDOW, AuditFilters())
        next(calls)
        with pytest.raises(NeedsSplitError, match="call 2 returned no rows after 1 full call"):
            next(calls)
    assert len(srv.requests) == 2


def test_a_one_off_integrity_violation_is_healed_by_a_new_session() -> None:
    def once(call: int, rows: list[dict[str, Any]]) -> None:
        if call == 2:  # the first block, then this block skips an index
            for r in rows:
                r["ResultIndex"] += 1

    with scripted_server(session_api(count=12, page=5, mutate=once)) as srv:
        pages = pages_of(client_for(srv.base_url, result_size=5))
    ids = [r["id"] for p in pages for r in p.records]
    assert sorted(set(ids)) == sorted(f"id-ExchangeItem-{i}" for i in range(1, 13))
    assert len(ids) == 17  # the broken session's first 5 rows come again from the new one (removed by id later)


def test_malformed_row_is_quarantined_rest_kept() -> None:
    def corrupt(call: int, rows: list[dict[str, Any]]) -> None:
        if call == 1:
            rows[1]["AuditData"] = rows[1]["AuditData"][:20]

    with scripted_server(session_api(count=4, page=5, mutate=corrupt)) as srv:
        (page,) = pages_of(client_for(srv.base_url, result_size=5))
    assert len(page.records) == 3 and len(page.malformed) == 1
    assert "id-ExchangeItem-2" in page.malformed[0].raw


def test_fractional_window_bounds_round_outwards_to_whole_seconds() -> None:
    # A sub-second split (or a request with fractions) must still search its last partial second: the record
    # stamped 00:00:01 belongs to [00:00:00.5, 00:00:01.5) and a truncated EndDate of 00:00:01 would exclude it.
    start = datetime(2024, 3, 1, 0, 0, 0, 500_000, tzinfo=UTC)
    window = TimeWindow(start, start + timedelta(seconds=1))
    params = build_parameters(window, AuditFilters(), record_type=None, session_id="S", result_size=10)
    assert (params["StartDate"], params["EndDate"]) == ("2024-03-01T00:00:00", "2024-03-01T00:00:02")
    inner = TimeWindow(start, start + timedelta(milliseconds=200))  # inside one second: still a valid search
    params = build_parameters(inner, AuditFilters(), record_type=None, session_id="S", result_size=10)
    assert (params["StartDate"], params["EndDate"]) == ("2024-03-01T00:00:00", "2024-03-01T00:00:01")
