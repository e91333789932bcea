"""Reading a publication window of the feed: every blob of the content types, each record once.

The feed lists blobs by when they were published, repeats records across blobs ("This duplication of events is an
expected and designed behavior", the FAQ) and lets blobs expire. :func:`read_published` lists each content type's
blobs created in a window, fetches them in turn, drops the records an earlier blob already gave (by id, across
content types and across calls that share a ``Deduplicator``) and reports what it could not fetch because it had
expired, instead of failing the window: the caller decides (a window with expired content is read by search).

Which event window a publication window covers is the caller's business: a record appears in a blob created after
it happened, typically 60 to 90 minutes and sometimes days later, so a source reads publications from the event
window's start onwards and keeps the records inside the event window (``shared.records.rules.trim_to_window``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from shared.audit.feed_errors import FeedContentExpiredError
from shared.audit.ports import ActivityFeedApi, AuditRecord, FeedContent, RecordPage, TimeWindow
from shared.records.rules import Deduplicator


@dataclass(frozen=True, slots=True)
class FeedBatch:
    """One fetched blob: its records not seen before (in the blob's order), and how many it repeated."""

    content: FeedContent
    page: RecordPage
    repeats: int


@dataclass(slots=True)
class FeedReadReport:
    """What reading a publication window did (filled in as the batches are read)."""

    listed: int = 0
    """Blobs listed."""
    fetched: int = 0
    records: int = 0
    """Records kept (first seen)."""
    repeats: int = 0
    """Records dropped because an earlier blob gave them."""
    expired: list[FeedContent] = field(default_factory=list)
    """Blobs that had expired when fetched: their records are missing from what was read."""

    @property
    def complete(self) -> bool:
        """Every listed blob was read."""
        return not self.expired


def read_published(
    api: ActivityFeedApi,
    content_types: Iterable[str],
    published: TimeWindow,
    *,
    dedupe: Deduplicator | None = None,
    report: FeedReadReport | None = None,
) -> Iterator[FeedBatch]:
    """The blobs of ``content_types`` created in ``published``, fetched one at a time, each record once.

    Raises what listing and fetching raise (``FeedWindowError``, ``FeedSubscriptionError``, the HTTP layer's
    errors), except ``FeedContentExpiredError``: an expired blob is added to ``report.expired`` and skipped.
    """
    seen = dedupe if dedupe is not None else Deduplicator()
    tally = report if report is not None else FeedReadReport()
    for content_type in dict.fromkeys(content_types):
        for content in api.list_content(content_type, published):
            tally.listed += 1
            try:
                page = api.fetch(content)
            except FeedContentExpiredError:
                tally.expired.append(content)
                continue
            tally.fetched += 1
            batch = _first_seen(content, page, seen)
            tally.records += len(batch.page.records)
            tally.repeats += batch.repeats
            yield batch


def _first_seen(content: FeedContent, page: RecordPage, seen: Deduplicator) -> FeedBatch:
    records: list[AuditRecord] = []
    times: list[datetime] | None = [] if page.times is not None else None
    for index, record in enumerate(page.records):
        if seen.first_time(str(record["id"])):
            records.append(record)
            if times is not None and page.times is not None:
                times.append(page.times[index])
    return FeedBatch(content, RecordPage(records, page.malformed, times), len(page.records) - len(records))
