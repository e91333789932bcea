"""A page of records kept as the bytes to write: the record path's representation beside ``RecordPage``.

The Graph adapter splits a records page into each record's bytes (``shared.records.raw_json``) and reads only the
record's id and time; :class:`RawPage` carries the bytes, the ids and the times to the chunk writer, which trims,
de-duplicates and writes them without decoding a record. It is a ``RecordPage``: a reader that wants the records as
values (the doctor, tests) reads ``records`` and gets them decoded then, once.

:class:`Sightings` is one chunk's id set shared by its reader and its writer: the reader (``GraphReads``, which counts
the distinct records its reads exported) marks on each page which records it sees for the first time, and the writer
writes those without looking their ids up again; it keeps apart only the few ids it saw and did not write (outside the
window or the filters, malformed), so that a later good copy of one of them is still written.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from shared.records.id_buckets import IdBuckets
from shared.records.json_codec import loads
from shared.values import AuditRecord, MalformedRecord, RecordPage


class RawPage(RecordPage):
    """``lines[i]`` is record ``i`` as it is written (one JSON object, no newline), ``ids[i]`` its id, ``times[i]`` its
    ``createdDateTime``; ``malformed`` as in any page. ``records`` decodes ``lines`` on first use."""

    __slots__ = ("_decoded", "first", "first_malformed", "ids", "lines", "sightings")

    def __init__(
        self,
        lines: Sequence[Any],
        ids: Sequence[str],
        times: list[datetime],
        malformed: list[MalformedRecord] | None = None,
    ) -> None:
        if not len(lines) == len(ids) == len(times):
            raise ValueError("a raw page needs one id and one time per line")
        self.lines = lines
        """Each record's bytes (``bytes`` or a buffer over the page it came in)."""
        self.ids = ids
        self.times = times
        self.malformed = malformed if malformed is not None else []
        self._decoded: list[AuditRecord] | None = None
        self.sightings: Sightings | None = None
        """Set by :meth:`Sightings.mark`: the id set ``first`` and ``first_malformed`` were computed against."""
        self.first: list[bool] = []
        """For each record, whether its id was seen here for the first time in the chunk's reads."""
        self.first_malformed: list[bool] = []
        """For each malformed record, whether its id (when it has one) was seen here for the first time."""

    @property
    def records(self) -> list[AuditRecord]:
        """The records as values, decoded from ``lines`` the first time they are asked for."""
        if self._decoded is None:
            self._decoded = [loads(bytes(line)) for line in self.lines]
        return self._decoded

    @records.setter
    def records(self, value: list[AuditRecord]) -> None:
        raise AttributeError("a raw page's records are its lines: build a RecordPage instead")

    def __repr__(self) -> str:
        return f"RawPage({len(self.ids)} records, {len(self.malformed)} malformed)"


def _first_in_page(ids: Sequence[str]) -> list[bool]:
    """For each id, whether it is the first of its value in the page."""
    first: list[bool] = []
    met: set[str] = set()
    for record_id in ids:
        first.append(record_id not in met)
        met.add(record_id)
    return first


class Sightings:
    """Every id a chunk's reads returned (records and malformed ones), each page marked as it is seen (see the module
    docstring). Not thread-safe: the reader marks pages in order, the writer reads the marks in the same order.

    Up to ``compact_after`` ids are kept as the page's own ``str`` objects in a ``set``, so a page whose ids are all
    new (the usual case) is checked and added by two set operations in C (about 0.15 µs an id). Past it the later ids
    go to the compact ``shared.records.id_buckets.IdBuckets`` (16 bytes an id in hashed buckets, about 20 to 30 bytes
    an id in all against about 127 for a set of strings; a page of new ids added in a few passes over the page, about
    0.5 µs an id), which keeps the first ``set`` as it is: a chunk of the Graph cap's million records then holds about
    40 MiB of ids instead of 130, with ``maxConcurrentActivityFunctions`` exports per instance.
    """

    COMPACT_AFTER = 100_000
    """Ids kept in a ``set`` before later ones go to an ``IdBuckets`` (most chunks never reach it)."""

    def __init__(self, compact_after: int = COMPACT_AFTER) -> None:
        self.ids: set[str] | IdBuckets = set()
        self.compact_after = compact_after

    def mark(self, page: RawPage) -> None:
        """Adds the page's ids, noting on the page which were new (records first, then malformed ones)."""
        seen = self.ids
        if isinstance(seen, set) and len(seen) + len(page.ids) > self.compact_after:
            self.ids = seen = IdBuckets(frozen=seen, bits=14)
        if isinstance(seen, IdBuckets):
            page.first = seen.add_many(page.ids)
            self._mark_malformed(page, seen)
            return
        ids = page.ids
        before = len(seen)
        if seen.isdisjoint(ids):
            seen.update(ids)
            if len(seen) - before == len(ids):  # and no id twice in the page
                page.first = [True] * len(ids)
            else:
                page.first = _first_in_page(ids)
        else:
            first: list[bool] = []
            for record_id in ids:
                first.append(record_id not in seen)
                seen.add(record_id)
            page.first = first
        self._mark_malformed(page, seen)

    def _mark_malformed(self, page: RawPage, seen: set[str] | IdBuckets) -> None:
        page.first_malformed = []
        for broken in page.malformed:
            page.first_malformed.append(broken.record_id is not None and broken.record_id not in seen)
            if broken.record_id is not None:
                seen.add(broken.record_id)
        page.sightings = self
