"""In-memory fakes of the audit ports, driven by a deterministic synthetic record set."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from shared.audit.ports import (
    AuditFilters,
    AuditRecord,
    DeleteOutcome,
    MalformedRecord,
    QueryState,
    QueryStatus,
    RecordPage,
    TimeWindow,
)
from shared.errors import CollectorError, NeedsSplitError

T0 = datetime(2024, 11, 17, 10, 0, tzinfo=UTC)


def record(i: int, moment: datetime) -> AuditRecord:
    return {
        "id": f"rec-{i:06d}",
        "createdDateTime": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "operation": "MailItemsAccessed",
        "auditData": {"Id": f"rec-{i:06d}"},
    }


def synthetic(start: datetime, hours: int, per_hour: int) -> list[AuditRecord]:
    """``per_hour`` records per hour, evenly spread, ids in time order."""
    step = timedelta(seconds=3600 / per_hour)
    return [record(i, start + step * i) for i in range(hours * per_hour)]


@dataclass
class FakeQueryApi:
    """Graph-like: queries go pending for ``polls_until_done`` status checks; pages of ``page_size``.

    Boundary bleed: each query also returns one record just past its end, and the first page repeats a record.
    """

    records: list[AuditRecord]
    page_size: int = 7
    polls_until_done: int = 2
    limit: int | None = None
    errors: dict[str, list[CollectorError]] = field(default_factory=dict)
    """Operation name -> errors raised by the next calls (popped front first)."""
    queries: dict[str, tuple[TimeWindow, int]] = field(default_factory=dict)
    created: int = 0
    deleted: list[str] = field(default_factory=list)

    def _maybe_fail(self, op: str) -> None:
        queue = self.errors.get(op)
        if queue:
            raise queue.pop(0)

    def _in(self, window: TimeWindow) -> list[AuditRecord]:
        from shared.records import parse_record_time

        return [r for r in self.records if window.contains(parse_record_time(r))]

    def create_query(self, window: TimeWindow, filters: AuditFilters, *, display_name: str) -> str:
        self._maybe_fail("create")
        self.created += 1
        query_id = f"q{self.created}"
        self.queries[query_id] = (window, 0)
        return query_id

    def get_query(self, query_id: str) -> QueryStatus:
        self._maybe_fail("get")
        window, polls = self.queries[query_id]
        self.queries[query_id] = (window, polls + 1)
        if polls + 1 < self.polls_until_done:
            return QueryStatus(QueryState.PENDING, "running")
        exceeded = self.limit is not None and len(self._in(window)) > self.limit
        return QueryStatus(QueryState.SUCCEEDED, "succeeded", record_count_limit_exceeded=exceeded)

    def iter_record_pages(self, query_id: str) -> Iterator[RecordPage]:
        self._maybe_fail("pages")
        window, _ = self.queries[query_id]
        found = self._in(window)
        if self.limit is not None:
            found = found[: self.limit]
        bleed = [record(999_999, window.end)]
        if found:
            found = [found[0], *found]  # a duplicate
        items = found + bleed
        for i in range(0, len(items), self.page_size):
            yield RecordPage(records=items[i : i + self.page_size])

    def delete_query(self, query_id: str) -> DeleteOutcome:
        self._maybe_fail("delete")
        self.deleted.append(query_id)
        return DeleteOutcome(deleted=True)


@dataclass
class FakeSearchApi:
    """Exchange-like: one session per window; over ``cap`` records raises NeedsSplitError before any page."""

    records: list[AuditRecord]
    cap: int = 50
    page_size: int = 5
    malformed_every: int = 0

    def _in(self, window: TimeWindow) -> list[AuditRecord]:
        from shared.records import parse_record_time

        return [r for r in self.records if window.contains(parse_record_time(r))]

    def _in_or_unparseable(self, window: TimeWindow) -> list[AuditRecord]:
        from shared.records import parse_record_time

        def keep(r: AuditRecord) -> bool:
            try:
                return window.contains(parse_record_time(r))
            except ValueError:
                return True  # a broken record still arrives; the activity must quarantine it

        return [r for r in self.records if keep(r)]

    high_completeness_calls: int = 0

    def count(self, window: TimeWindow, filters: AuditFilters, *, high_completeness: bool = False) -> int:
        return len(self._in(window))

    def iter_record_pages(
        self, window: TimeWindow, filters: AuditFilters, *, high_completeness: bool = False
    ) -> Iterator[RecordPage]:
        self.high_completeness_calls += int(high_completeness)
        found = self._in_or_unparseable(window)
        if len(found) > self.cap:
            raise NeedsSplitError("over cap", limit=self.cap, reported_count=len(found))
        for i in range(0, len(found), self.page_size):
            page = RecordPage(records=found[i : i + self.page_size])
            if self.malformed_every and i % self.malformed_every == 0:
                # Two broken rows are never byte-identical (each carries its ResultIndex), so give each its own text.
                page.malformed.append(
                    MalformedRecord(f'{{"ResultIndex": {i}, "AuditData": "{{not json', "auditData does not parse")
                )
            yield page
