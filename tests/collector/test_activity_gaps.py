"""Activity bodies for the two adapter gaps: a retried Graph submit reuses its query; an Exchange chunk at the
minimum window writes what the session cap allows and is reported incomplete."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta

from activities import bodies
from shared.audit.ports import AuditFilters, RecordPage, TimeWindow
from shared.errors import NeedsSplitError
from shared.models import ActivityResult, Chunk, ChunkSummary
from shared.sinks.memory import MemorySink
from tests.collector.fakes import T0, FakeQueryApi, FakeSearchApi, synthetic

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
    api = NamedQueryApi(records=synthetic(T0, 2, 10))
    first = ActivityResult.from_json(bodies.graph_submit(api, payload()))
    again = ActivityResult.from_json(bodies.graph_submit(api, payload(attempt=2)))
    assert again.data["queryId"] == first.data["queryId"] and api.created == 1 and api.lookups == 2


def test_every_submit_looks_first_and_a_miss_creates() -> None:
    # Attempt 1 looks too: the same attempt can run twice (crash after the create, before its result was recorded).
    api = NamedQueryApi(records=synthetic(T0, 2, 10))
    ActivityResult.from_json(bodies.graph_submit(api, payload()))
    assert api.lookups == 1 and api.created == 1
    rerun = ActivityResult.from_json(bodies.graph_submit(api, payload()))
    assert rerun.data["queryId"] == "q1" and api.created == 1
    other = Chunk(CHUNK.end, CHUNK.end + timedelta(hours=1))
    retried = bodies.graph_submit(api, {**payload(attempt=3), "chunk": other.to_json()})
    assert ActivityResult.from_json(retried).data["queryId"] == "q2" and api.created == 2


@dataclass
class CappedSearchApi(FakeSearchApi):
    def iter_record_pages_up_to_cap(
        self, window: TimeWindow, filters: AuditFilters, *, high_completeness: bool = False
    ) -> Iterator[RecordPage]:
        found = self._in(window)
        kept = found[: self.cap]
        for i in range(0, len(kept), self.page_size):
            yield RecordPage(records=kept[i : i + self.page_size])
        if len(found) > self.cap:
            raise NeedsSplitError("over cap", limit=self.cap, reported_count=len(found))


def test_exchange_minimum_window_writes_up_to_the_cap_and_is_incomplete() -> None:
    api = CappedSearchApi(records=synthetic(T0, 1, 80), cap=30)
    sink = MemorySink()
    plain = ActivityResult.from_json(bodies.exchange_collect(api, sink, payload()))
    assert plain.needs_split  # without allowIncomplete the window is sent back for a split
    result = ActivityResult.from_json(bodies.exchange_collect(api, sink, payload(allowIncomplete=True)))
    summary = ChunkSummary.from_json(result.data)
    assert result.ok and summary.incomplete and summary.records == 30
    written = (sink.read_bytes(summary.blob) or b"").splitlines()
    assert len(written) == 30


def test_exchange_under_the_cap_with_allow_incomplete_is_complete() -> None:
    api = CappedSearchApi(records=synthetic(T0, 1, 20), cap=30)
    result = ActivityResult.from_json(bodies.exchange_collect(api, MemorySink(), payload(allowIncomplete=True)))
    summary = ChunkSummary.from_json(result.data)
    assert result.ok and not summary.incomplete and summary.records == 20
