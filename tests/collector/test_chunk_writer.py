"""The chunk writer's record path: its output is byte for byte what the documented rules give, pages are fetched ahead
without changing a byte, errors from the page source surface in order, and an unwritable record is quarantined.

``reference_chunk`` is the rules written plainly (parse every time, a ``set`` of id strings, ``json.dumps`` per
record): the writer's faster path (times parsed once by the normaliser, a compact id set, orjson, prefetching) must
give the same bytes and counts.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from datetime import UTC, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from activities.chunk_writer import write_chunk
from m365_emulator.config import TenantSpec
from m365_emulator.synth import hour_records
from shared.audit.normalise import exchange_item, graph_item, normalise_graph_record, page_of
from shared.audit.ports import MalformedRecord, RecordPage, TimeWindow
from shared.errors import TransientApiError
from shared.models import Chunk, ChunkSummary
from shared.records.rules import parse_record_time
from shared.sinks.memory import MemorySink
from tests.collector.fakes import T0, record

TENANT = "contoso.onmicrosoft.com"
HOUR = timedelta(hours=1)
CHUNK = Chunk(T0, T0 + HOUR)


def _write(pages: Any, chunk: Chunk = CHUNK, sink: MemorySink | None = None) -> tuple[MemorySink, ChunkSummary]:
    sink = sink or MemorySink()
    return sink, write_chunk(sink, tenant_id=TENANT, collection_id="c1", chunk=chunk, pages=pages, attempt=1)


def reference_chunk(pages: list[RecordPage], window: TimeWindow) -> tuple[bytes, int, int, int]:
    """(JSONL bytes, records, trimmed, duplicates) of the good records by the plain rules."""
    seen: set[str] = set()
    lines: list[bytes] = []
    trimmed = duplicates = 0
    for page in pages:
        for item in page.records:
            if not window.contains(parse_record_time(item)):
                trimmed += 1
            elif str(item["id"]) in seen:
                duplicates += 1
            else:
                seen.add(str(item["id"]))
                text = json.dumps(item, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
                lines.append(text.encode() + b"\n")
    return b"".join(lines), len(lines), trimmed, duplicates


# -- an unwritable record ----------------------------------------------------------------------------------------
def test_a_record_that_cannot_be_written_as_utf8_is_quarantined_not_a_crash() -> None:
    """A lone surrogate escape (``"\\ud800"``) is valid JSON text but not Unicode: the record cannot be UTF-8."""
    bad = {**record(1, T0 + timedelta(minutes=5)), "operation": "\ud800"}
    sink, summary = _write([RecordPage([record(0, T0), bad, record(2, T0 + timedelta(minutes=9))])])
    assert (summary.records, summary.malformed, summary.untimed) == (2, 1, 0)
    written = [json.loads(line)["id"] for line in (sink.read_bytes(summary.blob) or b"").splitlines()]
    assert written == ["rec-000000", "rec-000002"]
    assert summary.quarantine_blob is not None
    quarantined = json.loads(sink.read_bytes(summary.quarantine_blob) or b"")
    assert quarantined["id"] == "rec-000001" and quarantined["reason"].startswith("unusable record:")
    assert quarantined["createdDateTime"] == "2024-11-17T10:05:00Z"


def test_a_good_copy_of_an_unwritable_record_is_written_and_the_broken_one_counts_as_a_duplicate() -> None:
    good = record(1, T0 + timedelta(minutes=5))
    bad = {**good, "operation": "\udc00"}
    sink, summary = _write([RecordPage([bad, good, record(2, T0)]), RecordPage([good])])
    assert (summary.records, summary.malformed, summary.duplicates) == (2, 0, 2)
    assert sink.read_bytes(summary.blob) == reference_chunk([RecordPage([good, record(2, T0)])], CHUNK.window())[0]


@pytest.mark.parametrize("first_id", ["0f8fad5b-d9cb-469f-a165-70867728950e", "rec-000007"], ids=["guid id", "text id"])
def test_an_id_discarded_and_added_again_in_one_page_is_written_once(first_id: str) -> None:
    """Issue 18.9: an unwritable record in a page undoes the page's de-duplication (its ids are discarded from the
    set), then redoes it record by record: an id added again there must count as present for its later copies, in
    this page and the next (GUID ids live in the compact table, where a discarded GUID is only marked removed)."""
    good = {**record(1, T0 + timedelta(minutes=5)), "id": first_id}
    other = {**record(2, T0 + timedelta(minutes=6)), "id": "7c9e6679-7425-40de-944b-e07fc1f90ae7"}
    bad = {**record(3, T0 + timedelta(minutes=7)), "operation": "\ud800"}
    sink, summary = _write([RecordPage([good, other, bad, good, other, good]), RecordPage([good, other])])
    written = [json.loads(line)["id"] for line in (sink.read_bytes(summary.blob) or b"").splitlines()]
    assert written == [first_id, other["id"]]
    assert (summary.records, summary.duplicates, summary.malformed) == (2, 5, 1)


# -- the same bytes as the plain rules ------------------------------------------------------------------------------
def _emulator_pages(normalise: Any, rows: Any) -> list[RecordPage]:
    spec = TenantSpec("5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b", seed=7, records_per_hour=400)
    hour = int(T0.timestamp()) // 3600
    records = [r for h in (hour - 1, hour, hour + 1) for r in hour_records(spec, h)]
    items = [rows(r) for r in records]
    items += items[500:530]  # a restarted session repeats rows (in the middle hour: the chunk's window)
    return [page_of(items[i : i + 97], normalise) for i in range(0, len(items), 97)]


def _exchange_row(record: Any) -> dict[str, Any]:
    return {
        "Identity": record.id,
        "CreationDate": record.created_text,
        "RecordType": record.template.exchange_type,
        "AuditData": record.audit_text(),
    }


@pytest.mark.parametrize(
    ("normalise", "rows"),
    [(graph_item, lambda r: r.graph_record()), (exchange_item, _exchange_row)],
    ids=["graph", "exchange"],
)
def test_the_output_is_the_plain_rules_bytes_for_emulator_records(normalise: Any, rows: Any) -> None:
    pages = _emulator_pages(normalise, rows)
    assert all(page.times is not None for page in pages)
    expected, records, trimmed, duplicates = reference_chunk(pages, CHUNK.window())
    sink, summary = _write(pages)
    assert sink.read_bytes(summary.blob) == expected
    assert summary.sha256 == hashlib.sha256(expected).hexdigest()
    assert (summary.records, summary.trimmed, summary.duplicates) == (records, trimmed, duplicates)
    assert records > 300 and trimmed > 600 and duplicates == 30
    # Pages built without parsed times (another adapter, a test fake) give the same object.
    untimed = [RecordPage(list(page.records), list(page.malformed)) for page in pages]
    assert _write(untimed)[0].read_bytes(summary.blob) == expected


def test_a_normaliser_that_returns_bare_records_still_makes_pages() -> None:
    items = [record(1, T0), {"id": "no-time"}, record(2, T0 + timedelta(minutes=1))]
    page = page_of(items, normalise_graph_record)
    assert [r["id"] for r in page.records] == ["rec-000001", "rec-000002"] and page.times is None
    assert len(page.malformed) == 1


GUIDS = st.uuids().map(str)
IDS = st.sampled_from([f"rec-{n}" for n in range(12)]) | GUIDS | GUIDS.map(str.upper)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
MOMENTS = st.integers(-5400, 9000).map(lambda s: T0 + timedelta(seconds=s / 2))
FORMS = st.sampled_from(["%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%S.%f+00:00", "%Y-%m-%dT%H:%M:%S.%f"])


@st.composite
def raw_records(draw: st.DrawFn) -> dict[str, Any]:
    moment = draw(MOMENTS)
    return {
        "id": draw(IDS),
        "createdDateTime": moment.astimezone(UTC).strftime(draw(FORMS)),
        "auditData": draw(st.dictionaries(TEXT, VALUES, max_size=4)),
        **draw(st.dictionaries(TEXT.filter(lambda k: k not in ("id", "createdDateTime", "auditData")), VALUES)),
    }


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(raw_records(), max_size=12), max_size=6))
def test_any_pages_give_the_plain_rules_bytes(raw_pages: list[list[dict[str, Any]]]) -> None:
    pages = [page_of(items, graph_item) for items in raw_pages]
    expected, records, trimmed, duplicates = reference_chunk(pages, CHUNK.window())
    sink, summary = _write(pages)
    assert sink.read_bytes(summary.blob) == expected
    assert (summary.records, summary.trimmed, summary.duplicates) == (records, trimmed, duplicates)


# -- the page source is read in turn, and closed when the writer stops early ------------------------------------------
def test_an_error_from_the_page_source_surfaces_after_the_pages_before_it_and_nothing_is_written() -> None:
    consumed: list[int] = []

    def pages() -> Iterator[RecordPage]:
        for n in range(3):
            consumed.append(n)
            yield RecordPage([record(n, T0 + timedelta(minutes=n))])
        raise TransientApiError("503 on page 4", status=503)

    sink = MemorySink()
    with pytest.raises(TransientApiError, match="503 on page 4"):
        _write(pages(), sink=sink)
    assert consumed == [0, 1, 2] and sink.objects == {}
    assert not [t for t in threading.enumerate() if t.name == "chunk-pages"]


def test_a_failing_sink_stops_the_page_source_and_closes_it() -> None:
    events: list[str] = []

    def pages() -> Iterator[RecordPage]:
        try:
            for n in range(1000):
                events.append(f"page {n}")
                yield RecordPage([record(n, T0)])
        finally:
            events.append(f"closed in {threading.current_thread().name}")

    class FailingSink(MemorySink):
        def write_stream(self, name: str, parts: Any) -> Any:
            next(iter(parts))
            raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        _write(pages(), sink=FailingSink())
    assert events == ["page 0", f"closed in {threading.current_thread().name}"]  # nothing read ahead, then closed


def test_a_page_with_malformed_records_only_is_quarantined_like_before() -> None:
    broken = MalformedRecord('{"id": "x"', "cut off", "x", T0 + timedelta(minutes=1))
    _, summary = _write([RecordPage([], [broken]), RecordPage([record(1, T0)])])
    assert (summary.records, summary.malformed) == (1, 1)
