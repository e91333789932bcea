"""The two adapter gaps closed for issue 6, against the emulator over real HTTPS:

* Graph: a create whose response is lost (the query exists, the answer is a 503) is not submitted again; the
  adapter finds the query by its displayName and window and reuses it.
* Exchange: a window over the session cap, when it cannot be split, is paged until the session reaches the cap, call
  by call; the cursor then says the window is incomplete, and why.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from shared import names
from shared.audit.exchange import ExchangeAuditClient
from shared.audit.exchange_paging import SessionCursor
from shared.audit.exchange_session import ExchangeCursor, read_window
from shared.audit.graph import GraphAuditClient
from shared.audit.ports import AuditFilters, QueryState, RecordPage, TimeWindow
from shared.errors import NeedsSplitError
from shared.sinks.base import write_bytes
from shared.sinks.memory import MemorySink
from tests.audit.conftest import FAST, TENANT, Emu, collect, register, start_emulator, wait_for_query, window


@pytest.fixture
def fresh() -> Iterator[Emu]:
    """An emulator of this test's own (counters start at zero)."""
    with start_emulator() as handle:
        register(handle)
        yield Emu(handle)


def test_graph_create_after_a_lost_response_reuses_the_created_query(fresh: Emu) -> None:
    fresh.handle.faults.create_then_5xx_count = 1
    client = GraphAuditClient(fresh.config(), retry_wait_scale=FAST)
    win = window(1.0, offset_hours=2.0)
    query_id = client.create_query(win, AuditFilters(), display_name="ual-gap-b-chunk")
    assert fresh.handle.stats.injected_5xx[(TENANT, "graph")] == 1
    assert fresh.handle.stats.queries_created[TENANT] == 1
    assert wait_for_query(client, query_id).state is QueryState.SUCCEEDED
    got = collect(client.iter_record_pages(query_id), win)
    assert sorted(got.ids) == sorted(fresh.handle.ground_truth_ids(TENANT, win.start, win.end))


def test_graph_find_query_matches_name_and_window_only(fresh: Emu) -> None:
    client = GraphAuditClient(fresh.config(), retry_wait_scale=FAST)
    win, other = window(1.0), window(1.0, offset_hours=1.0)
    query_id = client.create_query(win, AuditFilters(), display_name="it's a chunk")
    client.create_query(other, AuditFilters(), display_name="it's a chunk")
    assert client.find_query(win, display_name="it's a chunk") == query_id
    assert client.find_query(win, display_name="another chunk") is None
    assert client.delete_query(query_id).deleted is False  # the default service: DELETE is a 404
    assert client.find_query(win, display_name="it's a chunk") == query_id  # so the query is still there
    fresh.handle.config.graph.delete_supported = True  # the knob: a service that deletes
    assert client.delete_query(query_id).deleted is True
    assert client.find_query(win, display_name="it's a chunk") is None  # deleted queries are not reused


def test_graph_create_without_faults_creates_once(fresh: Emu) -> None:
    client = GraphAuditClient(fresh.config(), retry_wait_scale=FAST)
    first = client.create_query(window(1.0), AuditFilters(), display_name="same-name")
    second = client.create_query(window(1.0), AuditFilters(), display_name="same-name")
    # Only an ambiguous failure triggers reuse: a deliberate second create is a second query.
    assert first != second and fresh.handle.stats.queries_created[TENANT] == 2


def _read_up_to_cap(client: ExchangeAuditClient, win: TimeWindow) -> tuple[list[RecordPage], ExchangeCursor]:
    """The lane's calls of a window that cannot be split (``allowIncomplete``): the pages and the last cursor."""
    calls = list(read_window(client, win, AuditFilters(), splittable=False))
    return [page for pages, _ in calls for page in pages], calls[-1][1]


def test_exchange_pages_up_to_the_cap_then_reports_the_window_incomplete(emu: Emu) -> None:
    win = window(2.0, offset_hours=4.0)  # ~480 records at 240 per hour
    client = ExchangeAuditClient(emu.exchange_config(), retry_wait_scale=FAST, session_cap=100, result_size=40)
    with pytest.raises(NeedsSplitError):  # a window that can be split refuses at the first call, before any page
        next(iter(client.read_block(win, AuditFilters(), SessionCursor("s-1"), record_type=None)))

    pages, cursor = _read_up_to_cap(client, win)
    got = collect(iter(pages), win)
    truth = emu.handle.ground_truth_ids(TENANT, win.start, win.end)
    assert len(truth) > 120 and cursor.incomplete  # the lane reports the chunk incomplete
    assert sorted(got.ids) == sorted(truth[:120])  # the session's first 120 records, none twice
    assert len(cursor.parts) == 3  # 40 + 40 + 40 rows: the session reached the cap without a short call
    (evidence,) = cursor.evidence
    assert not evidence["complete"] and "cap of 100 rows" in evidence["detail"]
    assert "cannot be split" in evidence["detail"]


def test_exchange_up_to_cap_under_the_cap_is_the_whole_window(emu: Emu) -> None:
    win = window(0.25, offset_hours=1.0)
    client = ExchangeAuditClient(emu.exchange_config(), retry_wait_scale=FAST, session_cap=5000, result_size=25)
    pages, cursor = _read_up_to_cap(client, win)
    assert sorted(collect(iter(pages), win).ids) == sorted(emu.handle.ground_truth_ids(TENANT, win.start, win.end))
    assert not cursor.incomplete


def test_graph_submit_activity_run_twice_creates_one_query(fresh: Emu) -> None:
    """At-least-once: the submit activity re-runs with the same payload (attempt 1) after a crash past the create."""
    from activities import bodies
    from shared.models import ActivityResult, Chunk

    client = GraphAuditClient(fresh.config(), retry_wait_scale=FAST)
    win = window(1.0, offset_hours=4.0)
    payload = {"collectionId": "c1", "tenantId": TENANT, "chunk": Chunk(win.start, win.end).to_json(), "attempt": 1}
    sink = MemorySink()
    first = ActivityResult.from_json(bodies.graph_submit(client, sink, payload))
    again = ActivityResult.from_json(bodies.graph_submit(client, sink, payload))
    assert first.ok and again.ok and first.data["queryId"] == again.data["queryId"]
    assert fresh.handle.stats.queries_created[TENANT] == 1
    # The first run died after the create, before it recorded the id: the next run finds the query by its name.
    record = names.query_record_name(names.chunk_object_name(TENANT, "c1", win.start, win.end))
    intent = json.loads(sink.read_bytes(record) or b"{}")
    write_bytes(sink, record, json.dumps({"displayName": intent["displayName"]}).encode())
    third = ActivityResult.from_json(bodies.graph_submit(client, sink, payload))
    assert third.ok and third.data["queryId"] == first.data["queryId"]
    assert fresh.handle.stats.queries_created[TENANT] == 1
