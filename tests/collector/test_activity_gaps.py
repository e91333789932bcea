"""Activity bodies for the two adapter gaps: a retried Graph submit reuses its query; an Exchange chunk at the
minimum window writes what the session cap allows and is reported incomplete."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from activities import bodies
from shared.audit.ports import AuditFilters, TimeWindow
from shared.errors import TransientApiError
from shared.models import ActivityResult, Chunk, ChunkSummary
from shared.sinks.memory import MemorySink
from tests.collector.fakes import T0, FakeQueryApi, FakeSearchApi, synthetic
from tests.collector.test_activities import run_exchange_chunk

TENANT = "contoso.onmicrosoft.com"
CHUNK = Chunk(T0, T0 + timedelta(hours=1))


def payload(**extra: object) -> dict[str, object]:
    return {"collectionId": "c1", "tenantId": TENANT, "chunk": CHUNK.to_json(), "filters": {}, "attempt": 1, **extra}


@dataclass
class NamedQueryApi(FakeQueryApi):
    """Remembers display names, and can find a query by name and window like the Graph adapter."""

    names: dict[str, tuple[str, TimeWindow]] = field(default_factory=dict)
    lookups: int = 0

    def create_query(self, window: TimeWindow, filters: AuditFilters, *, display_name: str) -> str:
        query_id = super().create_query(window, filters, display_name=display_name)
        self.names[query_id] = (display_name, window)
        return query_id

    def find_query(self, window: TimeWindow, *, display_name: str) -> str | None:
        self.lookups += 1
        return next((q for q, named in self.names.items() if named == (display_name, window)), None)


def test_display_name_is_deterministic_per_collection_and_window() -> None:
    first, second = CHUNK.halves()
    names = {bodies.query_display_name("c1", c) for c in (CHUNK, first, second)}
    assert len(names) == 3  # a split half never shares its parent's name (same start, different end)
    assert bodies.query_display_name("c1", CHUNK) == bodies.query_display_name("c1", Chunk(CHUNK.start, CHUNK.end))
    assert bodies.query_display_name("c1", CHUNK) != bodies.query_display_name("c2", CHUNK)


def test_retried_submit_reuses_the_query_an_earlier_attempt_created() -> None:
    api, sink = NamedQueryApi(records=synthetic(T0, 2, 10)), MemorySink()
    first = ActivityResult.from_json(bodies.graph_submit(api, sink, payload()))
    again = ActivityResult.from_json(bodies.graph_submit(api, sink, payload(attempt=2)))
    assert again.data["queryId"] == first.data["queryId"] and api.created == 1


def test_a_submit_lists_queries_only_when_an_earlier_run_may_have_created_one_unrecorded() -> None:
    # Listing every query of the tenant to find one by name costs a page per hundred queries: a collection's own
    # record of what its submits created makes the common case one small read, and keeps a rerun from a second create.
    api, sink = NamedQueryApi(records=synthetic(T0, 2, 10)), MemorySink()
    ActivityResult.from_json(bodies.graph_submit(api, sink, payload()))
    assert api.lookups == 0 and api.created == 1
    # The same attempt run twice (crash after the create, before its result was recorded): the record has its id.
    rerun = ActivityResult.from_json(bodies.graph_submit(api, sink, payload()))
    assert rerun.data["queryId"] == "q1" and api.created == 1 and api.lookups == 0
    # A run that died between recording its intent and recording the id: only then is the list searched by name.
    other = Chunk(CHUNK.end, CHUNK.end + timedelta(hours=1))
    api.errors["create"] = [TransientApiError("lost response")]
    lost = ActivityResult.from_json(bodies.graph_submit(api, sink, {**payload(), "chunk": other.to_json()}))
    assert not lost.ok and api.created == 1
    api.names["q-lost"] = (bodies.query_display_name("c1", other), other.window())  # it was created after all
    retried = bodies.graph_submit(api, sink, {**payload(attempt=2), "chunk": other.to_json()})
    assert ActivityResult.from_json(retried).data["queryId"] == "q-lost" and api.lookups == 1 and api.created == 1
    third = Chunk(other.end, other.end + timedelta(hours=1))
    fresh = bodies.graph_submit(api, sink, {**payload(attempt=3), "chunk": third.to_json()})
    assert ActivityResult.from_json(fresh).data["queryId"] == "q2" and api.created == 2 and api.lookups == 1


def test_exchange_minimum_window_writes_up_to_the_cap_and_is_incomplete() -> None:
    api = FakeSearchApi(records=synthetic(T0, 1, 80), cap=30, block_size=12)
    sink = MemorySink()
    plain = run_exchange_chunk(api, sink, payload())
    assert plain.needs_split  # without allowIncomplete the window is sent back for a split
    result = run_exchange_chunk(api, sink, payload(allowIncomplete=True))
    summary = ChunkSummary.from_json(result.data)
    assert result.ok and summary.incomplete and summary.records == 30
    (evidence,) = summary.evidence
    assert not evidence["complete"] and "cap of 30 rows" in evidence["detail"]
    written = (sink.read_bytes(summary.blob) or b"").splitlines()
    assert len(written) == 30


def test_exchange_under_the_cap_with_allow_incomplete_is_complete() -> None:
    api = FakeSearchApi(records=synthetic(T0, 1, 19), cap=30)  # one short call (19 < 20): the proof
    result = run_exchange_chunk(api, MemorySink(), payload(allowIncomplete=True))
    summary = ChunkSummary.from_json(result.data)
    assert result.ok and not summary.incomplete and summary.records == 19
    assert [e["closedBy"] for e in summary.evidence] == ["short"]
