"""In-memory fakes of the audit ports, driven by a deterministic synthetic record set."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from shared.audit.exchange_paging import SessionBrokenError, SessionCursor
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
        from shared.records.rules import parse_record_time

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
    """Exchange-like: one session per window, read ``block_size`` records per call in pages of ``page_size``.

    A session delivers at most ``cap`` records (then empty calls). Over ``cap`` records the first call raises
    NeedsSplitError, as a service whose count is the window's total does (unless the window cannot be split).
    """

    records: list[AuditRecord]
    cap: int = 50
    page_size: int = 5
    malformed_every: int = 0
    block_size: int = 20
    calls: int = 0
    errors: list[CollectorError] = field(default_factory=list)
    """Raised by the next calls (popped front first), before any row."""
    served: dict[str, int] = field(default_factory=dict)
    """Per session id, the row index the service hands out next: a call advances it whatever becomes of its rows."""

    @property
    def session_cap(self) -> int:
        return self.cap

    def _in_or_unparseable(self, window: TimeWindow) -> list[AuditRecord]:
        from shared.records.rules import parse_record_time

        def keep(r: AuditRecord) -> bool:
            try:
                return window.contains(parse_record_time(r))
            except ValueError:
                return True  # a broken record still arrives; the activity must quarantine it

        return [r for r in self.records if keep(r)]

    high_completeness_calls: int = 0

    def record_types(self, filters: AuditFilters) -> list[str | None]:
        return list(dict.fromkeys(filters.record_types)) or [None]

    def read_block(
        self,
        window: TimeWindow,
        filters: AuditFilters,
        cursor: SessionCursor,
        *,
        record_type: str | None,
        high_completeness: bool = False,
        allow_over_cap: bool = False,
    ) -> Iterator[RecordPage]:
        self.calls += 1
        self.high_completeness_calls += int(high_completeness)
        cursor.start_call(self.block_size)
        if self.errors:
            raise self.errors.pop(0)
        found = self._in_or_unparseable(window)
        if cursor.calls == 0 and len(found) > self.cap and not allow_over_cap:
            raise NeedsSplitError("over cap", limit=self.cap, reported_count=len(found))
        start = self.served.get(cursor.session_id, 1) - 1
        block = found[start : min(start + self.block_size, self.cap)]
        self.served[cursor.session_id] = start + len(block) + 1
        if block and start != cursor.next_index - 1:  # the session moved on without this caller: a gap (or a repeat)
            raise SessionBrokenError(
                f"expected index {cursor.next_index}, the session is at {start + 1}",
                moved_on=start > cursor.next_index - 1,
            )
        for i in range(0, len(block), self.page_size):
            page = RecordPage(records=block[i : i + self.page_size])
            if self.malformed_every and (start + i) % self.malformed_every == 0:
                raw = f'{{"ResultIndex": {start + i}, "AuditData": "{{not json'
                page.malformed.append(MalformedRecord(raw, "auditData does not parse"))
            cursor.advance(len(page.records))
            yield page
        cursor.end_call()
