"""Issue 25, Graph: no chunk closed on an answer the service can give falsely.

* the cap without the flag: ``isRecordCountLimitExceeded`` reached the schema only in September 2026, so a query that
  says (``approximateReturnedRecordCount``) or exports as many records as its cap is capped, flag or not;
* one read of a changing result: a read short of what the query said it holds is read again and merged by id, a
  bounded number of times, both figures kept;
* what others retry: a 400 ``UnknownError`` (not auditing off), 5xx codes of a gateway's own with an HTML page, 429s
  that name no wait (a back-off of our own, and a step that does not spend the chunk's attempts).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from activities.graph_export import MAX_READS, GraphReads
from shared.audit.config import AuditApiConfig
from shared.audit.error_body import THROTTLED
from shared.audit.graph import GRAPH_API, parse_query_status
from shared.audit.http import AuditHttpClient
from shared.audit.ports import DeleteOutcome, QueryState, QueryStatus, RecordPage
from shared.errors import NeedsSplitError, TransientApiError
from shared.records.rules import Deduplicator
from shared.sources.graph import query_rules as chunk_rules
from tests.audit.scripted_server import FakeTokens, Reply, replies, scripted_server

T0 = datetime(2024, 3, 1, tzinfo=UTC)


def record(i: int) -> dict[str, str]:
    return {"id": f"00000000-0000-4000-8000-{i:012d}", "createdDateTime": "2024-03-01T00:10:00Z"}


@dataclass
class ChangingQuery:
    """A finished query whose reads return ``reads[n]`` records each (by index: the first that many, or a window)."""

    reads: list[list[int]]
    page: int = 7
    served: int = 0
    read_sizes: list[int] = field(default_factory=list)

    def iter_record_pages(self, query_id: str) -> Iterator[RecordPage]:
        indexes = self.reads[min(self.served, len(self.reads) - 1)]
        self.served += 1
        self.read_sizes.append(len(indexes))
        for i in range(0, len(indexes), self.page):
            yield RecordPage(records=[record(n) for n in indexes[i : i + self.page]])

    def create_query(self, *args: object, **kwargs: object) -> str:
        raise AssertionError("a re-read never submits a query")

    def get_query(self, query_id: str) -> QueryStatus:
        raise AssertionError("not used")

    def delete_query(self, query_id: str) -> DeleteOutcome:
        raise AssertionError("not used")


def status(approximate: int | None, *, limit: int | None = None, flag: bool = False) -> QueryStatus:
    return QueryStatus(QueryState.SUCCEEDED, "succeeded", flag, approximate, limit)


def drain(reads: GraphReads) -> list[str]:
    seen = Deduplicator()
    return [r["id"] for page in reads.pages() for r in seen.filter(page.records)[0]]


# --- the cap without the flag ---------------------------------------------------------------------------------
def test_a_query_that_says_it_holds_as_many_as_its_cap_is_split_without_the_flag() -> None:
    """Before: ``graph_outcome`` read only the flag; its absence meant "not capped", and the export kept the cap."""
    said = parse_query_status({"status": "succeeded", "approximateReturnedRecordCount": 150, "recordCountLimit": 150})
    assert not said.record_count_limit_exceeded and said.record_count_limit == 150
    assert chunk_rules.graph_outcome(said, splittable=True, max_records=0) == chunk_rules.SPLIT
    assert chunk_rules.graph_outcome(said, splittable=False, max_records=0) == chunk_rules.EXPORT_INCOMPLETE
    million = parse_query_status({"status": "succeeded", "approximateReturnedRecordCount": 1_000_000})
    assert chunk_rules.record_cap(million) == 1_000_000  # not said: the documented cap
    assert chunk_rules.graph_outcome(million, splittable=True, max_records=0) == chunk_rules.SPLIT
    under = parse_query_status({"status": "succeeded", "approximateReturnedRecordCount": 149, "recordCountLimit": 150})
    assert chunk_rules.graph_outcome(under, splittable=True, max_records=0) == chunk_rules.EXPORT


def test_a_read_that_exports_as_many_as_the_cap_splits_and_at_the_minimum_is_incomplete() -> None:
    """The approximate count said less; the export said the cap (PAX: exactly 1,000,000 and no nextLink)."""
    api = ChangingQuery([list(range(50))])
    with pytest.raises(NeedsSplitError, match="the 50-record cap: capped whether flagged or not") as info:
        drain(GraphReads(api, "q", status(40, limit=50)))
    assert info.value.limit == 50 and info.value.reported_count == 50
    kept = GraphReads(ChangingQuery([list(range(50))]), "q", status(40, limit=50), splittable=False)
    assert len(drain(kept)) == 50 and kept.incomplete
    evidence = kept.evidence()
    assert evidence["closedBy"] == "incomplete" and not evidence["complete"] and "cap of 50" in evidence["detail"]


# --- one read of a changing result ------------------------------------------------------------------------------
def test_a_short_first_read_is_read_again_and_merged_by_id() -> None:
    api = ChangingQuery([list(range(0, 60)), list(range(20, 100))])  # the second read lost others, found the rest
    reads = GraphReads(api, "q", status(100))
    assert sorted(drain(reads)) == sorted(record(i)["id"] for i in range(100))
    assert api.read_sizes == [60, 80] and not reads.incomplete
    assert reads.evidence() == {
        "source": "graph",
        "approximateCount": 100,
        "exported": 100,
        "reads": [60, 80],
        "closedBy": "count",
        "complete": True,
    }


def test_within_the_tolerance_one_read_is_enough() -> None:
    api = ChangingQuery([list(range(997))])
    reads = GraphReads(api, "q", status(1_000))  # approximate by its own doc: 0.5 % short is whole
    drain(reads)
    assert api.served == 1 and reads.closed_by == "count"


def test_a_reread_that_adds_nothing_closes_it_stable_with_both_figures() -> None:
    api = ChangingQuery([list(range(80))])
    reads = GraphReads(api, "q", status(100))
    drain(reads)
    evidence = reads.evidence()
    assert api.served == 2 and evidence["closedBy"] == "stable" and evidence["complete"]
    assert (evidence["approximateCount"], evidence["exported"], evidence["reads"]) == (100, 80, [80, 80])


def test_reads_that_keep_changing_end_incomplete_after_the_bound_never_complete() -> None:
    api = ChangingQuery([list(range(0, 40)), list(range(0, 60)), list(range(0, 80)), list(range(100))])
    reads = GraphReads(api, "q", status(100))
    drain(reads)
    assert api.served == MAX_READS == 3 and reads.incomplete
    evidence = reads.evidence()
    assert not evidence["complete"] and evidence["exported"] == 80 and "after 3 reads" in evidence["detail"]


# --- what others retry ------------------------------------------------------------------------------------------
def _client(**overrides: object) -> tuple[AuditHttpClient, list[float]]:
    waits: list[float] = []
    config = AuditApiConfig(tenant_id="contoso.onmicrosoft.com", client_id="app", client_secret="s", **overrides)
    return AuditHttpClient(config, FakeTokens(), GRAPH_API, sleep=waits.append), waits


HTML = b"<!DOCTYPE html><html><head><title>520 Origin Error</title></head><body><h1>Oops</h1></body></html>"


@pytest.mark.parametrize("code", [502, 504, 520, 524])
def test_a_gateways_5xx_with_an_html_page_is_retried_and_named_by_its_title(code: int) -> None:
    """Before: a 5xx outside 500/502/503/504 (a gateway's own) failed the call at once as permanent."""
    page = Reply(code, raw=HTML, headers={"Content-Type": "text/html"})
    with scripted_server(replies(page, Reply(200, {"value": []}))) as srv:
        client, _ = _client()
        assert client.request_json("GET", f"{srv.base_url}/queries") == {"value": []}
    with scripted_server(replies(page)) as srv:
        client, _ = _client(max_attempts=2)
        with pytest.raises(TransientApiError, match=r"an HTML error page \(520 Origin Error\)"):
            client.request_json("GET", f"{srv.base_url}/queries")


def test_an_unknown_error_on_a_create_looks_for_the_query_before_sending_it_again() -> None:
    with scripted_server(replies(Reply(400, {"error": {"code": "UnknownError", "message": ""}}))) as srv:
        client, _ = _client()
        found = client.request_json("POST", f"{srv.base_url}/queries", json_body={}, recover=lambda: {"id": "q-1"})
    assert found == {"id": "q-1"} and len(srv.requests) == 1  # it had been created: reused, never a duplicate


def test_a_429_that_names_no_wait_gets_a_back_off_of_our_own_and_says_it_was_throttled() -> None:
    busy = Reply(429, {"error": {"code": "TooManyRequests", "message": "Too many queued or running queries."}})
    with scripted_server(replies(busy)) as srv:
        client, waits = _client(max_attempts=4, max_retry_wait_seconds=120.0)
        with pytest.raises(TransientApiError) as info:
            client.request_json("POST", f"{srv.base_url}/queries", json_body={})
    assert str(info.value).startswith(THROTTLED) and info.value.status == 429
    assert waits[:3] == [5.0, 10.0, 20.0]  # before: 1, 2, 4 s (the back-off of a passing failure)
