"""Both adapters against the emulator: exact record ids, fault storms, malformed records, caps, token expiry."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from activities.graph_export import GraphReads
from shared.audit.exchange import ExchangeAuditClient
from shared.audit.exchange_session import read_window
from shared.audit.graph import GraphAuditClient, parse_records_answer, split_records_body
from shared.audit.ports import AuditFilters, QueryState, TimeWindow
from shared.errors import NeedsSplitError
from shared.records.rules import parse_record_time, trim_to_window
from tests.audit.conftest import (
    FAST,
    OLD_EXCHANGE,
    QUERIES_THAT_FINISH,
    TENANT,
    Emu,
    collect,
    exchange_collect,
    graph_collect,
    register,
    start_emulator,
    wait_for_query,
    window,
)

FIXTURE = Path(__file__).parent / "fixtures" / "graph_list_records_documented.json"


def truth(emu: Emu, win: Any) -> list[str]:
    return sorted(emu.handle.ground_truth_ids(TENANT, win.start, win.end))


@pytest.mark.parametrize(("hours", "offset"), [(0.25, 1.0), (2.0, 3.5), (13.0, 6.0)])
def test_graph_exact_ids(emu: Emu, hours: float, offset: float) -> None:
    win = window(hours, offset_hours=offset)
    client = GraphAuditClient(emu.config(page_size=200), retry_wait_scale=FAST)
    got = graph_collect(client, win)
    expected = truth(emu, win)
    assert expected, "the synthetic tenant should have records in this window"
    assert sorted(got.ids) == expected
    assert len(got.ids) == len(set(got.ids))
    if hours >= 2:
        assert len(got.pages) > 1  # really paged through nextLink


@pytest.mark.parametrize(("hours", "offset"), [(0.25, 1.0), (2.0, 3.5), (13.0, 6.0)])
def test_exchange_exact_ids(emu: Emu, hours: float, offset: float) -> None:
    win = window(hours, offset_hours=offset)
    client = ExchangeAuditClient(emu.exchange_config(), retry_wait_scale=FAST, result_size=500)
    expected = truth(emu, win)
    probe = client.probe(win)  # one call of ResultSize 5,000: short, so it counts the window
    assert probe.short and probe.rows == len(expected)
    got = exchange_collect(client, win)
    assert sorted(got.ids) == expected
    assert got.trimmed == 0


def test_filters_reach_both_apis(emu: Emu) -> None:
    win = window(6.0, offset_hours=2.0)
    filters = AuditFilters(record_types=("sharePointFileOperation",), operations=("FileAccessed", "FileModified"))
    graph = graph_collect(GraphAuditClient(emu.config(), retry_wait_scale=FAST), win, filters)
    exchange = exchange_collect(ExchangeAuditClient(emu.exchange_config(), retry_wait_scale=FAST), win, filters)
    everything = truth(emu, win)
    assert graph.ids and sorted(graph.ids) == sorted(exchange.ids)
    assert len(graph.ids) < len(everything)
    assert {r["operation"] for p in graph.pages for r in p.records} <= {"FileAccessed", "FileModified"}
    assert {r["auditLogRecordType"] for p in exchange.pages for r in p.records} == {"sharePointFileOperation"}


def test_throttling_storm_still_exact(emu: Emu) -> None:
    win = window(8.0, offset_hours=12.0)
    expected = truth(emu, win)
    emu.handle.faults.rate_429 = 0.30
    emu.handle.faults.rate_5xx = 0.05
    graph = graph_collect(GraphAuditClient(emu.config(page_size=150), retry_wait_scale=FAST), win)
    exchange = exchange_collect(ExchangeAuditClient(emu.exchange_config(), retry_wait_scale=FAST, result_size=300), win)
    stats = emu.handle.stats
    assert sorted(graph.ids) == expected
    assert sorted(exchange.ids) == expected
    assert sum(stats.throttled_429.values()) > 0 and sum(stats.injected_5xx.values()) > 0  # the storm happened


def test_malformed_record_quarantined_rest_of_page_kept(emu: Emu) -> None:
    win = window(1.0, offset_hours=20.0)
    expected = truth(emu, win)
    bad = expected[len(expected) // 2]
    emu.handle.faults.malformed_record_ids = frozenset({bad})
    for got in (
        graph_collect(GraphAuditClient(emu.config(), retry_wait_scale=FAST), win),
        exchange_collect(ExchangeAuditClient(emu.exchange_config(), retry_wait_scale=FAST), win),
    ):
        malformed = [m for p in got.pages for m in p.malformed]
        assert len(malformed) == 1 and bad in malformed[0].raw and "not JSON" in malformed[0].reason
        assert sorted(got.ids) == sorted(set(expected) - {bad})


def test_token_expiry_mid_run_recovers(emu: Emu) -> None:
    win = window(6.0, offset_hours=14.0)
    client = GraphAuditClient(emu.config(page_size=100), retry_wait_scale=FAST)
    query_id = client.create_query(win, AuditFilters(), display_name="expiry")
    status = wait_for_query(client, query_id)
    assert status.state is QueryState.SUCCEEDED
    pages = GraphReads(client, query_id, status).pages()  # read again if the first read falls short
    first = next(pages)
    failures_before = sum(emu.handle.stats.auth_failures.values())
    tokens_before = emu.handle.stats.tokens_issued
    emu.handle.expire_tokens()  # every token issued so far is now rejected with 401
    rest = list(pages)
    kept = [r["id"] for p in [first, *rest] for r in trim_to_window(p.records, win)[0]]
    assert sorted(set(kept)) == truth(emu, win)
    assert sum(emu.handle.stats.auth_failures.values()) > failures_before  # a 401 really happened
    assert emu.handle.stats.tokens_issued > tokens_before  # and a fresh token was fetched
    exchange = ExchangeAuditClient(emu.exchange_config(), retry_wait_scale=FAST, result_size=200)
    calls = read_window(exchange, win, AuditFilters())
    first_ex = next(calls)  # one InvokeCommand call (a block of 200 rows)
    emu.handle.expire_tokens()
    ex_ids = [r["id"] for pages, _ in [first_ex, *calls] for p in pages for r in p.records]
    assert sorted(ex_ids) == truth(emu, win)


def test_documented_example_parses_like_the_emulator(emu: Emu) -> None:
    documented = json.loads(FIXTURE.read_text())
    documented["value"][0]["createdDateTime"] = "2024-03-04T10:00:00Z"  # the docs show a placeholder here
    body = json.dumps(documented, separators=(",", ":")).encode()  # read as the adapter reads a records response
    doc_page, _ = parse_records_answer(split_records_body(body))
    emu_page = next(iter(graph_collect(GraphAuditClient(emu.config()), window(0.5, offset_hours=9.0)).pages))
    (doc_record,) = doc_page.records
    emu_record = emu_page.records[0]
    assert set(doc_record) == set(emu_record)
    assert {k: type(v) for k, v in doc_record.items()} == {k: type(v) for k, v in emu_record.items()}
    # Records are written as the service sends them: the @odata.type annotation every record carries stays.
    assert emu_record["@odata.type"] == "#microsoft.graph.security.auditLogRecord"
    assert emu_record["createdDateTime"].endswith("Z")


def test_graph_limit_flag_and_exchange_cap_need_split() -> None:
    from m365_emulator import ExchangeSettings, GraphSettings

    with start_emulator(
        graph=GraphSettings(
            record_count_limit=50, completion_delay_seconds=0.05, limit_flag=True, **QUERIES_THAT_FINISH
        ),
        exchange=ExchangeSettings(session_cap=120, **OLD_EXCHANGE),  # type: ignore[arg-type]
    ) as handle:
        register(handle)
        emu = Emu(handle)
        win = window(3.0, offset_hours=2.0)
        assert len(truth(emu, win)) > 120
        graph = GraphAuditClient(emu.config(), retry_wait_scale=FAST)
        query_id = graph.create_query(win, AuditFilters(), display_name="limit")
        status = wait_for_query(graph, query_id)
        assert status.state is QueryState.SUCCEEDED and status.record_count_limit_exceeded
        graph.delete_query(query_id)
        small = window(0.1, offset_hours=2.0)
        assert 0 < len(truth(emu, small)) < 50
        small_query = graph.create_query(small, AuditFilters(), display_name="small")
        assert not wait_for_query(graph, small_query).record_count_limit_exceeded

        exchange = ExchangeAuditClient(emu.exchange_config(), retry_wait_scale=FAST, session_cap=120)
        with pytest.raises(NeedsSplitError) as info:
            next(read_window(exchange, win, AuditFilters()))
        assert info.value.limit == 120 and info.value.reported_count == len(truth(emu, win))
        assert sorted(exchange_collect(exchange, small).ids) == truth(emu, small)


def test_exchange_window_with_fractional_bounds_keeps_its_last_partial_second(emu: Emu) -> None:
    client = ExchangeAuditClient(emu.exchange_config(), retry_wait_scale=FAST, result_size=500)
    hour = window(1.0, offset_hours=2.0)
    first = exchange_collect(client, hour).pages[0].records[0]
    moment = parse_record_time(first)  # records carry whole seconds
    # [t - 0.5 s, t + 0.5 s): the record at t is inside; a truncated EndDate (t) would leave it out.
    win = TimeWindow(moment - timedelta(milliseconds=500), moment + timedelta(milliseconds=500))
    expected = truth(emu, win)
    assert first["id"] in expected
    assert sorted(exchange_collect(client, win).ids) == expected


def test_exchange_on_the_2026_service_defaults_is_exact_or_asks_for_a_split() -> None:
    """ResultCount capped at the ResultSize, sessions that start over, rows unsorted, disguised failures: a window one
    call holds is proven by that short call; a larger one cannot be proven by a session and asks for a split."""
    from m365_emulator import ExchangeSettings

    with start_emulator(exchange=ExchangeSettings(cancel_warning_rate=0.2, transient_400_rate=0.2)) as handle:
        register(handle)
        emu = Emu(handle)
        client = ExchangeAuditClient(emu.exchange_config(), retry_wait_scale=FAST)
        day = window(20.0)
        assert 4_000 < len(truth(emu, day)) < 5_000
        calls = list(read_window(client, day, AuditFilters()))
        got = collect((page for pages, _ in calls for page in pages), day)
        assert sorted(got.ids) == truth(emu, day) and got.duplicates == 0
        assert [e["closedBy"] for e in calls[-1][1].evidence] == ["short"]
        wide = window(24.0)
        with pytest.raises(NeedsSplitError, match="restarted at index 1"):
            list(read_window(client, wide, AuditFilters()))
        assert handle.stats.cancel_warnings[(TENANT, "exchange")] + handle.stats.transient_400s[(TENANT, "exchange")]
