"""A Graph query's records, read until what was exported agrees with what the query said it holds (issue 25).

One read of a finished query is not proof: the same completed query paged twice within minutes has given materially
different record counts (langwatch issue #7137, PR #7142), and the per-query record cap has been flagged by the
service only since September 2026 (``isRecordCountLimitExceeded``; PAX detects the cap as exactly 1,000,000 records).
:class:`GraphReads` streams the query's pages to the chunk writer, which merges them by record id, and after each read
compares what the reads exported (distinct record ids) with the query's ``approximateReturnedRecordCount``:

* **capped** — a read that exported as many records as the cap (``recordCountLimit`` where the service says it, else
  1,000,000: ``shared.sources.graph.query_rules.record_cap``) is capped, flag or not: the window is split
  (:class:`NeedsSplitError`: the writer leaves no object), or, at the minimum split, exported and reported incomplete;
* **count** — the reads exported at least the approximate count, less a tolerance (:data:`TOLERANCE`: the figure is
  approximate by its own doc): complete;
* **stable** — a read again added no record: the reads agree, the figure was approximate; complete, both figures kept;
* otherwise the pages are read again, at most :data:`MAX_READS` reads in all; still short and still changing after
  them, the chunk is reported incomplete with both figures (never complete).

Every re-read reuses the query: it costs page requests, never a query submission. The figures go into the chunk
summary's evidence (:meth:`GraphReads.evidence`), and so into the manifest.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from shared.audit.ports import AuditQueryApi, QueryStatus, RecordPage
from shared.errors import NeedsSplitError
from shared.records.raw_page import RawPage, Sightings
from shared.sources.graph.query_rules import capped, record_cap

logger = logging.getLogger(__name__)

MAX_READS = 3
"""Reads of one query at most (the first and two more)."""
TOLERANCE = 0.005
"""How far under ``approximateReturnedRecordCount`` (a fraction of it, at least one record) an export may fall and
still count as whole."""


@dataclass
class GraphReads:
    """The pages of a succeeded query over as many reads as it takes; its figures once the pages are consumed."""

    api: AuditQueryApi
    query_id: str
    status: QueryStatus
    splittable: bool = True
    max_reads: int = MAX_READS
    reads: list[int] = field(default_factory=list)
    """Rows each read returned (records and malformed ones)."""
    closed_by: str | None = None
    """"count", "stable", "capped" or "short" (incomplete) once the pages are consumed."""
    _seen: Sightings = field(default_factory=Sightings)
    """The ids the reads returned, shared with the chunk writer through the pages it marks."""
    _anonymous: int = 0
    """Rows without a readable id (malformed beyond reading): counted per read, never merged."""

    @property
    def approximate(self) -> int | None:
        return self.status.approximate_record_count

    @property
    def exported(self) -> int:
        """Distinct records the reads returned (merged by id)."""
        return len(self._seen.ids) + self._anonymous

    @property
    def incomplete(self) -> bool:
        return self.closed_by in ("short", "capped")

    def _whole(self) -> bool:
        approximate = self.approximate
        if approximate is None:
            return True  # nothing to compare with: the read stands
        return self.exported >= approximate - max(1, round(approximate * TOLERANCE))

    def pages(self) -> Iterator[RecordPage]:
        cap = record_cap(self.status)
        over = capped(self.status)  # said capped, and read all the same: the window cannot be split
        for read in range(1, self.max_reads + 1):
            before, rows, anonymous = self.exported, 0, 0
            for page in self.api.iter_record_pages(self.query_id):
                rows += len(page.malformed)
                anonymous += sum(1 for broken in page.malformed if broken.record_id is None)
                if isinstance(page, RawPage):  # its ids were read already: they go in as one batch, marked
                    rows += len(page.ids)
                    self._seen.mark(page)
                    yield page
                    continue
                rows += len(page.records)
                for record in page.records:
                    record_id = record.get("id") if isinstance(record, dict) else None
                    if isinstance(record_id, str):
                        self._seen.ids.add(record_id)
                    else:
                        anonymous += 1
                for broken in page.malformed:
                    if broken.record_id is not None:
                        self._seen.ids.add(broken.record_id)
                yield page
            self._anonymous = max(self._anonymous, anonymous)
            self.reads.append(rows)
            if rows >= cap or over:  # as many as the cap: capped, whether the service flagged it or not
                self.closed_by = "capped"
                if self.splittable and not over:
                    raise NeedsSplitError(
                        f"audit query {self.query_id} exported {rows:,} records, the {cap:,}-record cap: capped "
                        "whether flagged or not; the window is split",
                        limit=cap,
                        reported_count=rows,
                    )
                return
            if self._whole():
                self.closed_by = "count"
                return
            if read > 1 and self.exported == before:
                self.closed_by = "stable"
                return
            if read < self.max_reads:
                logger.warning(
                    "audit query %s: read %d exported %d of ~%s records; reading its pages again",
                    self.query_id,
                    read,
                    self.exported,
                    self.approximate,
                )
        self.closed_by = "short"

    def evidence(self) -> dict[str, Any]:
        """What closed the chunk's query (JSON for the summary and the manifest): both figures, the reads."""
        detail = {
            "count": f"exported {self.exported:,} of ~{self.approximate} records the query said it holds",
            "stable": (
                f"exported {self.exported:,} records where the query said ~{self.approximate}; a read again added "
                "nothing (the figure is approximate)"
            ),
            "capped": (
                f"exported {self.exported:,} records, the query's cap of {record_cap(self.status):,}: the window "
                "cannot be split further (COLLECTOR_MIN_SPLIT_SECONDS), records past the cap are missing"
            ),
            "short": (
                f"exported {self.exported:,} of ~{self.approximate} records the query said it holds after "
                f"{len(self.reads)} reads, the last still adding records"
            ),
        }.get(self.closed_by or "", "not read")
        entry: dict[str, Any] = {
            "source": "graph",
            "approximateCount": self.approximate,
            "exported": self.exported,
            "reads": list(self.reads),
            "closedBy": "incomplete" if self.incomplete else self.closed_by,
            "complete": not self.incomplete,
        }
        if self.closed_by != "count":  # the usual case says itself; the others say why (the manifest shows it)
            entry.update(detail=detail, recordCountLimit=record_cap(self.status))
        return entry
