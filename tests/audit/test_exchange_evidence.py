"""A window is complete only by evidence the service cannot misstate (issue 17).

Since 2026 ``Search-UnifiedAuditLog``'s ``ResultCount`` no longer reports the window's total: it may equal the
``ResultSize`` asked, or the smaller of that and the total. A reader that stops when ``ResultIndex`` reaches
``ResultCount`` keeps the first block of every window and calls it complete. The scripted service below answers in
each plausible way (count = total | min(size, total) | size; sessions that continue, start over at index 1, or return
nothing after their first call); the reader must either return every record, or ask for a split, never less.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from shared.audit.config import AuditApiConfig
from shared.audit.exchange import ExchangeAuditClient
from shared.audit.exchange_session import read_window
from shared.audit.ports import AuditFilters, TimeWindow
from shared.errors import NeedsSplitError
from shared.records.rules import Deduplicator
from tests.audit.scripted_server import FakeTokens, Recorded, Reply, scripted_server

WINDOW = TimeWindow(datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 3, 1, 2, tzinfo=UTC))
DOMAIN = "contoso.onmicrosoft.com"
COUNT_MODES = ("total", "capped", "size")


def _row(n: int, index: int, count: int) -> dict[str, Any]:
    audit = {"Id": f"rec-{n:06d}", "CreationTime": "2024-03-01T00:10:00", "Operation": "Send", "Workload": "x"}
    return {"RecordType": "ExchangeItem", "AuditData": json.dumps(audit), "ResultIndex": index, "ResultCount": count}


@dataclass
class Service:
    """InvokeCommand over ``total`` records, answering ``ResultCount`` and continuing sessions as told."""

    total: int
    count_mode: str = "capped"
    session_mode: str = "continue"
    page: int = 1000
    shuffle: bool = False
    warn_first: int = 0
    """The first N calls answer 200 with no rows and a cancel warning (the session advanced: least convenient)."""
    more_flag: bool = False
    """Send ``moreRecordsAvailable`` in ``AuditSearchRequestMetadata`` on every page."""
    block_cap: int = 10**9
    """At most this many rows per call, whatever ResultSize asks (a service that hands out partial blocks)."""
    shuffle_call: bool = False
    """The rows of a call in a stable shuffled order across its HTTP pages (no page holds a contiguous run)."""
    false_first: list[str] = field(default_factory=list)
    """What the first calls of fresh sessions answer, in turn, before the truth: "empty" (no rows) or "bogus" (one
    row with ResultIndex -1); the false answer leaves its session untouched."""
    base: list[str] = field(default_factory=list)
    served: dict[str, int] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def count(self, size: int) -> int:
        return {"total": self.total, "capped": min(size, self.total), "size": size}[self.count_mode]

    def handle(self, request: Recorded) -> Reply:
        params = request.body["CmdletInput"]["Parameters"]
        session, size = params["SessionId"], int(params["ResultSize"])
        token = parse_qs(urlsplit(request.path).query).get("$skiptoken")
        if token:
            start, last, count, first = (int(x) for x in token[0].split("."))
            return self._page(session, start, last, count, first)
        if session not in self.calls and self.false_first:
            self.calls[session] = 0  # the session exists and hands out its first block next time
            if self.false_first.pop(0) == "bogus":
                return Reply(200, {"value": [{**_row(1, 1, self.total), "ResultIndex": -1}]})
            return Reply(200, {"value": []})
        self.calls[session] = self.calls.get(session, 0) + 1
        done = self.served.get(session, 0)
        if self.session_mode == "restart":
            done = 0
        elif self.session_mode == "empty" and self.calls[session] > 1:
            done = self.total
        last = min(done + size, done + self.block_cap, self.total)
        self.served[session] = last
        if self.warn_first > 0:
            self.warn_first -= 1
            return Reply(200, {"value": [], "@adminapi.warnings": ["The task was canceled."]})
        if done >= self.total:
            return Reply(200, {"value": []})
        return self._page(session, done + 1, last, self.count(size), done + 1)

    def _page(self, session: str, start: int, last: int, count: int, first: int) -> Reply:
        """Rows ``start``..``last`` of the call whose block begins at index ``first``."""
        end = min(start + self.page - 1, last)
        if self.shuffle_call:  # positions start..end of the call's block, shuffled as a whole
            block = list(range(first, last + 1))
            random.Random(first).shuffle(block)
            indexes = block[start - first : end - first + 1]
        else:
            indexes = list(range(start, end + 1))
        rows = [_row(i, i, count) for i in indexes]
        if self.shuffle:
            random.Random(start).shuffle(rows)
        body: dict[str, Any] = {"value": rows}
        if end < last:
            body["@odata.nextLink"] = (
                f"{self.base[0]}/adminapi/beta/{DOMAIN}/InvokeCommand?$skiptoken={end + 1}.{last}.{count}.{first}"
            )
        if self.more_flag:
            body["AuditSearchRequestMetadata"] = {"moreRecordsAvailable": last < self.total}
        return Reply(200, body)


def client_for(base_url: str, **kwargs: Any) -> ExchangeAuditClient:
    config = AuditApiConfig(tenant_id=DOMAIN, client_id="app", client_secret="s", exchange_base_url=base_url)
    return ExchangeAuditClient(config, tokens=FakeTokens(), sleep=lambda _: None, **kwargs)


def read_all(service: Service, **kwargs: Any) -> tuple[list[str], Any]:
    """Every call of the window as the lane reads it; the ids a de-duplicating writer keeps, and the last cursor."""
    dedupe = Deduplicator()
    ids: list[str] = []
    cursor = None
    with scripted_server(service.handle) as srv:
        service.base.append(srv.base_url)
        for pages, after in read_window(client_for(srv.base_url, **kwargs), WINDOW, AuditFilters()):
            cursor = after
            for page in pages:
                unique, _ = dedupe.filter(page.records)
                ids += [r["id"] for r in unique]
    return ids, cursor


def expected(count: int) -> list[str]:
    return [f"rec-{i:06d}" for i in range(1, count + 1)]


@pytest.mark.parametrize("count_mode", COUNT_MODES)
@pytest.mark.parametrize("total", [12_345, 5_001, 4_999, 1])
def test_a_session_that_continues_is_read_to_its_end_whatever_result_count_says(count_mode: str, total: int) -> None:
    ids, cursor = read_all(Service(total, count_mode=count_mode))
    assert sorted(ids) == expected(total)
    (evidence,) = cursor.evidence
    assert evidence["closedBy"] == "short" and evidence["complete"] and evidence["rows"] == total
    assert evidence["lastCallRows"] == total % 5000 and evidence["resultSize"] == 5000


@pytest.mark.parametrize("count_mode", COUNT_MODES)
def test_an_empty_call_after_full_ones_is_no_evidence_and_asks_for_a_split(count_mode: str) -> None:
    """Exactly 10,000 records: the third call finds nothing, which a session that ended early would show too."""
    with pytest.raises(NeedsSplitError, match="call 3 returned no rows after 2 full calls"):
        read_all(Service(10_000, count_mode=count_mode))


def test_more_records_available_false_closes_a_full_call_and_true_keeps_a_short_one_going() -> None:
    ids, cursor = read_all(Service(10_000, more_flag=True))
    assert sorted(ids) == expected(10_000)
    (evidence,) = cursor.evidence
    assert evidence["closedBy"] == "moreRecordsAvailable" and evidence["calls"] == 2


@pytest.mark.parametrize("count_mode", COUNT_MODES)
@pytest.mark.parametrize("session_mode", ["restart", "empty"])
def test_a_session_that_does_not_continue_asks_for_a_split_never_returns_less(
    count_mode: str, session_mode: str
) -> None:
    with pytest.raises(NeedsSplitError) as info:
        read_all(Service(12_345, count_mode=count_mode, session_mode=session_mode))
    assert "call 2" in str(info.value)


@pytest.mark.parametrize("session_mode", ["continue", "restart", "empty"])
def test_a_window_a_single_call_holds_needs_no_second_call(session_mode: str) -> None:
    service = Service(4_321, count_mode="size", session_mode=session_mode)
    ids, cursor = read_all(service)
    assert sorted(ids) == expected(4_321)
    assert list(service.calls.values()) == [1]  # the short call is the evidence: nothing more to ask
    (evidence,) = cursor.evidence
    assert evidence["closedBy"] == "short" and evidence["rows"] == 4_321 and evidence["calls"] == 1


def test_more_records_available_true_keeps_a_short_call_going() -> None:
    service = Service(10_500, more_flag=True, block_cap=3_000)  # every call short: 3,000 < 5,000, "more" until the end
    ids, cursor = read_all(service)
    assert sorted(ids) == expected(10_500)
    (evidence,) = cursor.evidence
    assert evidence["closedBy"] == "moreRecordsAvailable" and evidence["calls"] == 4 and evidence["fullCalls"] == 0


def test_rows_in_any_order_within_pages_are_exact() -> None:
    ids, _ = read_all(Service(12_345, count_mode="capped", shuffle=True, page=700))
    assert sorted(ids) == expected(12_345)


def test_a_cancel_warning_on_an_empty_200_is_transient_never_an_empty_window() -> None:
    ids, _ = read_all(Service(3_000, warn_first=1))
    assert sorted(ids) == expected(3_000)


def test_a_row_announcing_a_count_of_zero_is_still_a_row() -> None:
    """A service that over-delivers may announce ResultCount 0 with the one record it returns (0.94 x 1, rounded
    down). Only a row that carries no record (no index of its own) is the "nothing" marker."""
    one = [_row(1, 1, 0)]
    with scripted_server(lambda _: Reply(200, {"value": one})) as srv:
        calls = list(read_window(client_for(srv.base_url), WINDOW, AuditFilters()))
    assert [r["id"] for pages, _ in calls for p in pages for r in p.records] == ["rec-000001"]
    assert calls[-1][1].evidence[0]["closedBy"] == "short"


@pytest.mark.parametrize("page", [700, 1000, 2_345])
def test_rows_unsorted_across_a_calls_pages_are_read_not_split(page: int) -> None:
    """Issue 25: no page holds a contiguous run of ResultIndex, the call as a whole does. Checked page by page, the
    first page of every call "broke the session" and the window was split again and again."""
    service = Service(12_345, count_mode="capped", shuffle_call=True, page=page)
    ids, cursor = read_all(service)
    assert sorted(ids) == expected(12_345)
    (evidence,) = cursor.evidence
    assert evidence["closedBy"] == "short" and evidence["calls"] == 3  # 5,000 + 5,000 + 2,345: read, not split
    assert list(service.calls.values()) == [3]


def test_a_call_whose_indexes_skip_over_its_pages_still_breaks_the_session() -> None:
    """The check at the end of a call still catches what the page-by-page check caught: a call that restarts."""
    with pytest.raises(NeedsSplitError, match="restarted at index 1"):
        read_all(Service(12_345, session_mode="restart", shuffle_call=True, page=700))


@pytest.mark.parametrize("answers", [["empty"], ["bogus"], ["empty", "bogus"], ["bogus", "empty", "bogus"]])
def test_a_false_empty_or_bogus_first_answer_is_asked_again_and_the_window_read_whole(answers: list[str]) -> None:
    """Issue 25: before, one empty first call closed the window as "nothing in the window" (a bogus row split it)."""
    service = Service(7_777, false_first=list(answers))
    ids, cursor = read_all(service)
    assert sorted(ids) == expected(7_777)
    (evidence,) = cursor.evidence
    assert evidence["complete"] and evidence["closedBy"] == "short" and evidence["rows"] == 7_777
    assert evidence["answers"] == {
        "emptyAnswers": answers.count("empty"),
        "bogusAnswers": answers.count("bogus"),
        "needed": 2,
        "expectedRecords": None,
        "surprising": False,
        "false": True,
    }
    assert cursor.confirmations == len(answers) and cursor.false_answers == len(answers)
    assert evidence["sessions"] == len(answers) + 1


def test_a_really_empty_window_costs_one_confirmation_or_two_when_it_is_surprising() -> None:
    from shared.audit.exchange_evidence import EmptyRule

    for rule, calls in ((EmptyRule(None), 2), (EmptyRule(0.3), 2), (EmptyRule(12_000.0), 3)):
        service = Service(0)
        with scripted_server(service.handle) as srv:
            service.base.append(srv.base_url)
            steps = list(read_window(client_for(srv.base_url), WINDOW, AuditFilters(), empty_rule=rule))
        cursor = steps[-1][1]
        (evidence,) = cursor.evidence
        assert evidence["closedBy"] == "empty" and evidence["complete"], evidence
        assert len(srv.requests) == calls == evidence["answers"]["emptyAnswers"] == evidence["sessions"]
        assert evidence["answers"]["surprising"] is (calls == 3) and evidence["answers"]["false"] is False
        assert cursor.confirmations == calls - 1


def test_answers_that_stay_bogus_end_the_window_incomplete_never_complete() -> None:
    service = Service(7_777, false_first=["bogus"] * 10)
    ids, cursor = read_all(service)
    assert ids == []
    (evidence,) = cursor.evidence
    assert not evidence["complete"] and evidence["closedBy"] == "incomplete"
    assert "inconsistent answers" in evidence["detail"] and evidence["answers"]["bogusAnswers"] == 4
    assert cursor.incomplete
