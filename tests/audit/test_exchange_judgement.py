"""The Exchange session rules one at a time, on the pure cursor and judge (and, where only the adapter shows it, over a
scripted loopback service): each test holds one rule a hand mutation showed no other test held (docs/testing.md,
"Mutation")."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.audit.config import AuditApiConfig
from shared.audit.exchange import ExchangeAuditClient
from shared.audit.exchange_evidence import CLOSED, GO_ON, UNTRUSTED, EmptyRule, judge
from shared.audit.exchange_paging import SessionBrokenError, SessionCursor, failed_warning, more_records_flag
from shared.audit.exchange_session import BlockRead, ExchangeCursor, read_window
from shared.audit.ports import AuditFilters, TimeWindow
from shared.errors import NeedsSplitError
from tests.audit.scripted_server import FakeTokens, Recorded, Reply, scripted_server

WINDOW = TimeWindow(datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 3, 1, 2, tzinfo=UTC))


def call(session: SessionCursor, indexes: list[int], *, asked: int = 5, more: bool | None = None) -> None:
    """One call of ``session`` returning rows with these ``ResultIndex`` values (ended and checked)."""
    session.start_call(asked)
    session.note(more=more)
    session.accept([{"ResultIndex": i} for i in indexes])
    session.end_call()


def read(**kwargs: Any) -> BlockRead:
    return BlockRead(WINDOW, AuditFilters(), [None], **kwargs)


# --- the judge ----------------------------------------------------------------------------------------------------
def test_an_expectation_of_exactly_the_surprising_count_needs_the_third_empty_answer() -> None:
    assert EmptyRule(5.0).needed == 3 and EmptyRule(5.0).surprising
    assert EmptyRule(4.9).needed == 2 and EmptyRule(None).needed == 2


def test_empty_answers_never_close_a_window_an_earlier_session_delivered_rows_of() -> None:
    rule = EmptyRule()
    closed = rule.after(2, 0)
    assert closed is not None and (closed.kind, closed.closed_by) == (CLOSED, "empty")
    assert rule.after(2, 0, seen=7) is None  # asked again: the rows seen prove the empties false
    inconsistent = rule.after(4, 0, seen=7)
    assert inconsistent is not None and inconsistent.kind == UNTRUSTED
    assert "an earlier session of this window delivered 7 rows" in inconsistent.detail


def test_a_call_repeating_a_single_record_the_session_delivered_is_not_trusted() -> None:
    session = SessionCursor("s")
    call(session, [1, 2, 3, 4, 5])
    call(session, [6, 7])
    verdict = judge(session, session_cap=50_000, repeats=1)
    assert verdict.kind == UNTRUSTED and "1 record(s) this session had already delivered" in verdict.detail


def test_a_short_call_that_brings_the_session_to_exactly_its_cap_proves_nothing() -> None:
    session = SessionCursor("s")
    call(session, [1, 2, 3, 4, 5])
    call(session, [6, 7, 8, 9, 10])
    call(session, [11, 12])  # short, but the session stopped at its cap of 12: cut short by it, maybe
    assert judge(session, session_cap=12).kind == UNTRUSTED
    assert judge(session, session_cap=13).kind == CLOSED


def test_only_a_later_call_shows_whether_sessions_continue() -> None:
    full, short = SessionCursor("a"), SessionCursor("b")
    call(full, [1, 2, 3, 4, 5])
    call(short, [1, 2])
    assert (judge(full, session_cap=50_000).kind, judge(full, session_cap=50_000).continued) == (GO_ON, None)
    assert (judge(short, session_cap=50_000).kind, judge(short, session_cap=50_000).continued) == (CLOSED, None)
    call(full, [6, 7])
    assert judge(full, session_cap=50_000).continued is True


# --- what a response says -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "warning", ["A Task Was Canceled.", "Task was cancelled", "FAILED TO PROCESS REQUEST", "The Operation Was Canceled"]
)
def test_a_cancel_or_failure_warning_is_recognised_in_any_letter_case(warning: str) -> None:
    assert failed_warning({"@adminapi.warnings": [warning]}) is not None
    assert failed_warning({"@adminapi.warnings": warning}) is not None  # one text instead of a list
    assert failed_warning({"@adminapi.warnings": ["Results are limited to 5000 rows"]}) is None


@pytest.mark.parametrize("value", ["False", "false", "True", 0, 1, None])
def test_more_records_available_counts_only_as_a_json_boolean(value: object) -> None:
    assert more_records_flag({"moreRecordsAvailable": value}) is None
    assert more_records_flag({"AuditSearchRequestMetadata": {"MoreRecordsAvailable": value}}) is None
    assert more_records_flag({"AuditSearchRequestMetadata": {"moreRecordsAvailable": False}}) is False


# --- a call's indexes ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("indexes", "moved_on"),
    [
        ([1, 2, 3, -1], False),  # a bogus row among good ones
        ([1, 2, 2, 4], False),  # a repeat that hides a skipped index (as many rows as the span)
        ([3, 4, 6], False),  # past the expected index *and* a gap inside the call: not "the session moved on"
        ([3, 4, 5], True),  # past the expected index, contiguous: the session moved on without this reader
    ],
)
def test_a_call_whose_indexes_do_not_run_on_breaks_the_session(indexes: list[int], moved_on: bool) -> None:
    session = SessionCursor("s")
    with pytest.raises(SessionBrokenError) as info:
        call(session, indexes)
    assert info.value.moved_on is moved_on


def test_a_session_broken_mid_call_is_counted_without_judging_its_rows_again() -> None:
    """A call cut short (an empty page with a nextLink) is counted with the rows it showed, bogus ones included, and
    the window is split for the break itself, not for what the half-read call's rows look like."""
    session = SessionCursor("s")
    session.start_call(5)
    session.accept([{"ResultIndex": 1}, {"ResultIndex": -1}])
    broken = SessionBrokenError("InvokeCommand sent an empty page with a nextLink")
    with pytest.raises(NeedsSplitError, match="empty page with a nextLink") as info:
        ExchangeCursor().broken(session, "0", broken, read())
    assert info.value.evidence is not None and info.value.evidence["calls"] == 1


def test_the_calls_result_count_is_its_first_rows() -> None:
    session = SessionCursor("s")
    session.start_call(5)
    session.note(result_count=40)
    session.note(result_count=5)  # a later page of the call says otherwise: a hint is the first row's claim
    session.accept([{"ResultIndex": i} for i in range(1, 6)])
    assert session.end_call().result_count == 40


# --- the cursor the lane carries ----------------------------------------------------------------------------------
def test_a_full_call_splits_at_once_where_sessions_were_learned_not_to_continue_but_not_at_the_minimum() -> None:
    session = SessionCursor("s")
    call(session, [1, 2, 3, 4, 5])
    verdict = judge(session, session_cap=50_000)
    with pytest.raises(NeedsSplitError, match="sessions do not continue"):
        ExchangeCursor().after(session, "0", verdict, read(split_on_full=True))
    at_minimum = ExchangeCursor().after(session, "0", verdict, read(split_on_full=True, splittable=False))
    assert (at_minimum.session_id, at_minimum.next_index, at_minimum.incomplete) == ("s", 6, False)
    assert ExchangeCursor().after(session, "0", verdict, read()).next_index == 6  # nothing learned: read on


def test_a_full_call_announcing_more_than_it_read_leaves_a_hint_in_the_stats() -> None:
    session = SessionCursor("s")
    session.start_call(5)
    session.note(result_count=40)
    session.accept([{"ResultIndex": i} for i in range(1, 6)])
    session.end_call()
    after = ExchangeCursor().after(session, "0", judge(session, session_cap=50_000), read())
    assert after.hint == 40 and after.stats(since=ExchangeCursor(), exact=False)["hint"] == 40
    assert ExchangeCursor.from_json(after.to_json()).hint == 40


@pytest.mark.parametrize("continues", [None, True, False])
def test_what_sessions_showed_survives_the_json_the_lane_carries(continues: bool | None) -> None:
    cursor = ExchangeCursor(continues=continues, restarts=1)
    back = ExchangeCursor.from_json(cursor.to_json())
    assert back.continues is continues and back.restarts == 1


# --- over a scripted service --------------------------------------------------------------------------------------
def _row(index: int) -> dict[str, Any]:
    audit = {"Id": f"id-{index}", "CreationTime": "2024-03-01T00:10:00", "Operation": "Send", "Workload": "Exchange"}
    return {"RecordType": "ExchangeItem", "AuditData": json.dumps(audit), "ResultIndex": index, "ResultCount": 12}


def _client(base_url: str, **kwargs: Any) -> ExchangeAuditClient:
    config = AuditApiConfig(
        tenant_id="contoso.onmicrosoft.com", client_id="app", client_secret="s", exchange_base_url=base_url
    )
    return ExchangeAuditClient(config, tokens=FakeTokens(), sleep=lambda _: None, result_size=5, **kwargs)


def test_empty_answers_after_a_lost_answer_never_close_the_window_as_empty() -> None:
    """The first session delivers a full block, the answer of its second call is lost (the reader starts a new
    session), and every new session answers "nothing": those answers are false (rows were seen), so the record type
    ends incomplete with the reason (inconsistent answers), never complete with the first block only."""
    sessions: list[str] = []

    def handle(request: Recorded) -> Reply:
        session = request.body["CmdletInput"]["Parameters"]["SessionId"]
        sessions.append(session)
        if len(sessions) == 1:
            return Reply(200, {"value": [_row(i) for i in range(1, 6)]})
        if len(sessions) == 2:
            return Reply(500, {"error": {"code": "InternalServerError", "message": "lost"}})
        return Reply(200, {"value": []})

    with scripted_server(handle) as srv:
        calls = list(read_window(_client(srv.base_url), WINDOW, AuditFilters()))
    assert sum(len(p.records) for pages, _ in calls for p in pages) == 5
    cursor = calls[-1][1]
    assert cursor.incomplete and "an earlier session of this window delivered 5 rows" in cursor.reasons()[0]
    assert len(set(sessions)) == 5  # the first, then four fresh ones (2 needed + 2 spare) that all answered nothing


@pytest.mark.parametrize("where", ["first page", "later page"])
def test_an_empty_page_with_a_next_link_breaks_the_session(where: str) -> None:
    def handle(request: Recorded) -> Reply:
        link = f"{base[0]}/adminapi/beta/contoso.onmicrosoft.com/InvokeCommand?$skiptoken=2"
        if where == "first page" or "skiptoken" in request.path:
            return Reply(200, {"value": [], "@odata.nextLink": link})
        return Reply(200, {"value": [_row(1), _row(2)], "@odata.nextLink": link})

    base: list[str] = []
    with scripted_server(handle) as srv:
        base.append(srv.base_url)
        with pytest.raises(NeedsSplitError, match="empty page with a nextLink"):
            list(read_window(_client(srv.base_url), WINDOW, AuditFilters()))


@pytest.mark.parametrize(("announced", "splits"), [(10, False), (11, True)])
def test_a_first_call_announcing_exactly_the_session_cap_is_read(announced: int, splits: bool) -> None:
    def handle(request: Recorded) -> Reply:
        return Reply(200, {"value": [{**_row(i), "ResultCount": announced} for i in range(1, 4)]})

    with scripted_server(handle) as srv:
        reading = read_window(_client(srv.base_url, session_cap=10), WINDOW, AuditFilters())
        if splits:
            with pytest.raises(NeedsSplitError, match="over the 10-record session cap"):
                list(reading)
        else:
            assert sum(len(p.records) for pages, _ in reading for p in pages) == 3
