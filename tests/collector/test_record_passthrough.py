"""Records passed through: a Graph page is split into its records' bytes and written as the service sent them where
they are in the promised shape, normalised as before where they are not; the reader's marks replace the writer's own
id set without changing a byte; ``msgspec`` and the standard library give the same pages.

The rules are in ``shared.audit.record_lines`` (what is written as sent), ``shared.records.raw_json`` (splitting) and
``shared.records.raw_page`` (the page and the shared sightings).
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from activities.chunk_writer import write_chunk
from shared.audit.graph import parse_records_answer, split_records_body
from shared.audit.normalise import exchange_item, graph_item, page_of
from shared.audit.record_lines import exchange_page, graph_page
from shared.models import Chunk, ChunkSummary
from shared.records.json_codec import JsonDecodeError, dump_line
from shared.records.raw_json import MISSING, Heads, Projection, kind, split_page
from shared.records.raw_page import RawPage, Sightings
from shared.sinks.memory import MemorySink
from tests.collector.fakes import T0

REPO = Path(__file__).resolve().parents[2]
CHUNK = Chunk(T0, T0 + timedelta(hours=1))


def graph_record(n: int, minute: int = 5, **changes: Any) -> dict[str, Any]:
    """A record as Graph sends it (the documented member order, the annotation first)."""
    record = {
        "@odata.type": "#microsoft.graph.security.auditLogRecord",
        "id": f"0000000{n % 10}-aaaa-4bbb-8ccc-{n:012d}",
        "createdDateTime": (T0 + timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "auditLogRecordType": "exchangeItem",
        "operation": "Send",
        "userPrincipalName": "adele@contoso.com",
        "clientIp": "203.0.113.7",
        "administrativeUnits": [],
        "auditData": {"@odata.type": "#microsoft.graph.security.auditData", "Id": f"x{n}", "Size": 1.5e-7},
    }
    record.update(changes)
    return {k: v for k, v in record.items() if v is not MISSING}


def body_of(records: list[Any], **dump: Any) -> bytes:
    page = {"@odata.context": "https://graph.microsoft.com/v1.0/$metadata#records", "value": records}
    options = dump or {"separators": (",", ":")}
    try:
        return json.dumps(page, ensure_ascii=False, **options).encode()
    except UnicodeEncodeError:  # a lone surrogate: only its escape can be sent
        return json.dumps(page, **options).encode()


def page_from(body: bytes) -> RawPage:
    page, _ = parse_records_answer(split_records_body(body))
    assert isinstance(page, RawPage)
    return page


def old_line(raw: Any) -> bytes:
    """What the collector wrote for a record before: normalised, keys sorted."""
    result = graph_item(raw)
    assert isinstance(result, tuple)
    return dump_line(result[0])[:-1]


def write(pages: list[RawPage], chunk: Chunk = CHUNK) -> tuple[bytes, ChunkSummary]:
    sink = MemorySink()
    summary = write_chunk(sink, tenant_id="t", collection_id="c", chunk=chunk, pages=pages, attempt=1)
    return sink.read_bytes(summary.blob) or b"", summary


# -- what is written --------------------------------------------------------------------------------------------
def test_records_in_the_promised_shape_are_written_byte_for_byte_as_the_service_sent_them() -> None:
    records = [graph_record(n, minute=n) for n in range(5)]
    records[2]["operation"] = "Envoyé \u00e9t\u00e9 \U0001f600"  # written as UTF-8, as the service wrote it
    texts = [json.dumps(r, separators=(",", ":"), ensure_ascii=n % 2 == 0) for n, r in enumerate(records)]
    body = ('{"value":[' + ",".join(texts) + '],"@odata.nextLink":null}').encode()
    page = page_from(body)
    assert [bytes(line) for line in page.lines] == [t.encode() for t in texts]
    data, summary = write([page])
    assert data == "".join(t + "\n" for t in texts).encode()
    assert summary.records == 5 and summary.malformed == 0
    assert json.loads(data.splitlines()[0])["@odata.type"] == "#microsoft.graph.security.auditLogRecord"


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"auditData": json.dumps({"Id": "s", "B": [1, 2]})}, "auditData a JSON string: parsed"),
        ({"auditData": None}, "auditData null: {}"),
        ({"auditData": MISSING}, "auditData absent: {}"),
        ({"createdDateTime": "2024-11-17T10:05:00"}, "a time without offset: UTC 'Z'"),
        ({"createdDateTime": "2024-11-17 10:05:00Z"}, "not RFC 3339: rewritten"),
    ],
)
def test_records_not_in_the_promised_shape_are_normalised_as_before(changes: dict[str, Any], why: str) -> None:
    odd = graph_record(1, **changes)
    records = [graph_record(0), odd, graph_record(2)]
    page = page_from(body_of(records))
    lines = [bytes(line) for line in page.lines]
    assert lines[1] == old_line(odd), why
    assert lines[0] == json.dumps(records[0], separators=(",", ":")).encode()  # its neighbours are not touched
    assert "@odata.type" not in json.loads(lines[1])


def test_a_time_with_seven_digits_or_an_offset_is_written_as_sent_and_read_right() -> None:
    records = [
        graph_record(0, createdDateTime="2024-11-17T10:05:00.1234567Z"),
        graph_record(1, createdDateTime="2024-11-17T12:05:00+02:00"),
        graph_record(2, createdDateTime="2024-11-17T11:05:00+00:00"),  # outside the window
    ]
    data, summary = write([page_from(body_of(records))])
    assert [json.loads(line)["createdDateTime"] for line in data.splitlines()] == [
        "2024-11-17T10:05:00.1234567Z",
        "2024-11-17T12:05:00+02:00",
    ]
    assert summary.trimmed == 1


def test_a_page_with_line_breaks_writes_each_record_on_one_line() -> None:
    records = [graph_record(n) for n in range(3)]
    page = page_from(body_of(records, indent=2))
    assert [bytes(line) for line in page.lines] == [old_line(r) for r in records]


def test_malformed_records_are_quarantined_with_the_reasons_they_had() -> None:
    broken = graph_record(1, auditData='{"Id": "x", ')
    items = [graph_record(0), broken, {"id": "", "createdDateTime": "x"}, 7, graph_record(3, id=None)]
    page = page_from(body_of(items))
    before = page_of(json.loads(body_of(items))["value"], graph_item)
    assert page.malformed == before.malformed
    assert [bytes(line) for line in page.lines] == [json.dumps(items[0], separators=(",", ":")).encode()]


def test_a_page_that_is_not_json_or_has_no_value_list_is_refused() -> None:
    with pytest.raises(JsonDecodeError):
        split_records_body(b'{"value":[{"id":"a"},]}')
    with pytest.raises(JsonDecodeError):
        split_records_body(b'{"value":[]} trailing')
    with pytest.raises(JsonDecodeError):
        split_records_body(b"[1, 2]")
    from shared.errors import PermanentApiError

    with pytest.raises(PermanentApiError):
        parse_records_answer(split_records_body(b'{"value":{"id":"a"}}'))


def test_a_page_that_is_not_utf8_is_decoded_whole_as_before() -> None:
    body = body_of([graph_record(0), graph_record(1, operation="caf\u00e9")]).replace("é".encode(), b"\xe9")
    page = page_from(body)
    assert json.loads(bytes(page.lines[1]))["operation"] == "caf\ufffd"  # read as U+FFFD, as requests decodes it
    assert [bytes(line) for line in page.lines] == [
        old_line(r) for r in json.loads(body.decode("utf-8", "replace"))["value"]
    ]


# -- one page, read at once or record by record: the same records --------------------------------------------
ODDITIES = st.sampled_from(
    [
        {},
        {"auditData": '{"Id":"s"}'},
        {"auditData": None},
        {"auditData": [1]},
        {"createdDateTime": "2024-11-17T10:05:00"},
        {"createdDateTime": "2024-13-17T10:05:00Z"},
        {"createdDateTime": "2024-11-17T10:05:00.5+01:00"},
        {"id": "   "},
        {"id": 12},
        {"@odata.type": MISSING},
        {"id": "\ud800"},
        {"operation": "x\u2028y"},
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), ODDITIES), max_size=12))
def test_a_page_read_at_once_gives_what_reading_it_record_by_record_gives(
    specs: list[tuple[int, dict[str, Any]]],
) -> None:
    records = [graph_record(n, **changes) for n, changes in specs]
    body = json.dumps({"value": records}, separators=(",", ":")).encode()
    split = split_page(body, members=())
    assert split.items is not None
    whole = graph_page(split.items, body=body)
    one_by_one = graph_page(split.items)
    assert [bytes(x) for x in whole.lines] == [bytes(x) for x in one_by_one.lines]
    assert (whole.ids, whole.times, whole.malformed) == (one_by_one.ids, one_by_one.times, one_by_one.malformed)
    assert len(whole.lines) + len(whole.malformed) == len(records)


# -- msgspec or the standard library: the same pages ------------------------------------------------------------
SAMPLES = [
    body_of([graph_record(n) for n in range(3)]),
    body_of([graph_record(0), graph_record(1, id="\ud800"), graph_record(2, auditData="{}")]),
    b'{"value": [ {"id":"a","n":123456789012345678901234567890,"f":1e400} , 5, "x", null ],"@odata.nextLink":"n"}',
    b'{"value":[{"id":"a"}],"value":[{"id":"b"}]}',
    b'{"value":[{"id":"a","auditData":{"k":"\\u00e9\\ud83d\\ude00"},"createdDateTime":"2024-11-17T10:00:00Z"}]}',
    body_of([graph_record(0)], indent=1),
]
PROBE = """
import json, sys
from shared.audit.graph import parse_records_answer, split_records_body
from shared.records.raw_json import split_page, uses_msgspec
out = {"msgspec": uses_msgspec(), "pages": [], "exchange": None}
for body in json.loads(sys.stdin.read())["bodies"]:
    raw = body.encode("latin-1")
    split = split_page(raw, members=("@odata.nextLink",))
    page, link = parse_records_answer(split_records_body(raw))
    items = [bytes(i).decode("latin-1") for i in split.items or []]
    lines = [bytes(x).decode("latin-1") for x in page.lines]
    times = [t.isoformat() for t in page.times]
    out["pages"].append([items, repr(split.members), link, lines, page.ids, times, [repr(m) for m in page.malformed]])
print(json.dumps(out))
"""


def _probe(block_msgspec: bool) -> dict[str, Any]:
    prefix = "import sys; sys.modules['msgspec'] = None\n" if block_msgspec else ""
    bodies = json.dumps({"bodies": [b.decode("latin-1") for b in SAMPLES]})
    done = subprocess.run(
        [sys.executable, "-c", prefix + PROBE], input=bodies, capture_output=True, text=True, cwd=REPO, check=True
    )
    return dict(json.loads(done.stdout))


def test_without_msgspec_the_standard_library_gives_the_same_pages() -> None:
    fast, reference = _probe(block_msgspec=False), _probe(block_msgspec=True)
    assert fast["msgspec"] is True and reference["msgspec"] is False
    assert fast["pages"] == reference["pages"]


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
        max_leaves=10,
    ),
    st.sampled_from([(",", ":"), (", ", ": ")]),
)
def test_the_split_and_the_projection_agree_with_the_reference(value: Any, separators: tuple[str, str]) -> None:
    items = [value, {"id": value, "auditData": value}, {"auditData": {"UserId": value}}]
    body = json.dumps({"value": items, "k": value}, separators=separators, ensure_ascii=False).encode()
    split = split_page(body, members=("k", "absent"))
    assert split.items is not None
    assert [json.loads(bytes(item)) for item in split.items] == json.loads(body)["value"]
    assert split.members == {"k": value, "absent": MISSING} or value != value
    kinds = Projection(("id",), kinds=("auditData",))
    nested = Projection((), nested={"auditData": ("UserId",)})
    for item in split.items:
        decoded = json.loads(bytes(item))
        found, inner = kinds.read(item), nested.read(item)
        if not isinstance(decoded, dict):
            assert found is None and inner is None
            continue
        assert found is not None
        assert found[0] == decoded.get("id", MISSING) or decoded.get("id") != decoded.get("id")  # NaN-free floats
        assert found[1] == (None if "auditData" not in decoded else kind(decoded["auditData"]))
        data = decoded.get("auditData")
        if not isinstance(data, dict | type(None)):
            assert inner is None
        else:
            assert inner == (({k: v for k, v in data.items() if k == "UserId"},) if data is not None else (MISSING,))
        heads = Heads(("id",), ("auditData",))
        assert (heads.read(body, split.items) is None) == any(
            not isinstance(i, dict) or not isinstance(i.get("id"), str) or not isinstance(i.get("auditData"), dict)
            for i in json.loads(body)["value"]
        )


# -- the reader's marks: the same output as the writer's own id set ---------------------------------------------
def _pages(specs: list[list[tuple[int, int, bool]]]) -> list[RawPage]:
    """Pages of records (number, minute, malformed?) as the adapter makes them."""
    pages = []
    for spec in specs:
        items = [
            graph_record(n, minute=minute, auditData='{"broken"' if broken else graph_record(n)["auditData"])
            for n, minute, broken in spec
        ]
        pages.append(page_from(body_of(items)))
    return pages


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.tuples(st.integers(0, 12), st.sampled_from([-5, 3, 30, 59, 61]), st.booleans()), max_size=8)),
    st.integers(1, 3),
    st.sampled_from([0, 3, 8, Sightings.COMPACT_AFTER]),
)
def test_marked_pages_write_what_the_writers_own_id_set_writes(
    specs: list[list[tuple[int, int, bool]]], reads: int, compact_after: int
) -> None:
    """Whether the ids moved to the compact set (from the first page, midway, never), the same bytes are written."""
    own = _pages(specs) * reads  # a query read again returns its pages again
    sightings = Sightings(compact_after)
    marked = [_marked(page, sightings) for _ in range(reads) for page in _pages(specs)]
    data_own, summary_own = write(own)
    data_marked, summary_marked = write(marked)
    assert data_marked == data_own
    assert summary_marked == summary_own
    ids = {i for page in own for i in page.ids} | {m.record_id for page in own for m in page.malformed if m.record_id}
    assert len(sightings.ids) == len(ids) and all(i in sightings.ids for i in ids)


def _marked(page: RawPage, sightings: Sightings) -> RawPage:
    sightings.mark(page)
    return page


def test_a_good_copy_after_a_broken_one_and_a_bleed_copy_is_still_written_once() -> None:
    sightings = Sightings()
    broken = _pages([[(1, 5, True)]])[0]
    bleed = page_from(body_of([graph_record(2, minute=61)]))
    later = page_from(body_of([graph_record(1, minute=5), graph_record(2, minute=7), graph_record(1, minute=5)]))
    for page in (broken, bleed, later):
        sightings.mark(page)
    data, summary = write([broken, bleed, later])
    assert [json.loads(line)["id"] for line in data.splitlines()] == [later.ids[0], later.ids[1]]
    assert (summary.records, summary.duplicates, summary.malformed, summary.trimmed) == (2, 2, 0, 1)


def test_a_chunk_cannot_mix_marked_and_unmarked_pages() -> None:
    sightings = Sightings()
    first = page_from(body_of([graph_record(0)]))
    sightings.mark(first)
    with pytest.raises(ValueError, match="marked"):
        write([first, page_from(body_of([graph_record(1)]))])


# -- Exchange: AuditData's text kept, the record mapped as before ----------------------------------------------
def exchange_row(n: int, audit: Any = None, **changes: Any) -> dict[str, Any]:
    data = (
        audit
        if audit is not None
        else {
            "CreationTime": "2024-11-17T10:05:00",
            "Id": f"ex-{n}",
            "Operation": "Send",
            "OrganizationId": "org",
            "RecordType": 2,
            "UserType": 0,
            "UserId": "adele@contoso.com",
            "Workload": "Exchange",
            "ClientIP": "203.0.113.7",
            "Size": 2.5e-5,
            "Nested": {"b": 1, "a": [1, {"z": None}]},
        }
    )
    row = {
        "RecordType": "ExchangeItem",
        "CreationDate": "2024-11-17T10:05:00Z",
        "UserIds": "adele@contoso.com",
        "Operations": "Send",
        "AuditData": data if isinstance(data, str) else json.dumps(data),
        "ResultIndex": n + 1,
        "ResultCount": 9,
        "Identity": f"ex-{n}",
    }
    row.update(changes)
    return row


@pytest.mark.parametrize(
    "row",
    [
        exchange_row(0),
        exchange_row(1, audit='{"Id":"ex-1","CreationTime":"2024-11-17T10:05:00","Operation":"\\u00e9"}'),
        exchange_row(2, audit='{ "Id" : "ex-2", "CreationTime" : "2024-11-17T10:05:00Z" }  '),
        exchange_row(3, audit='{"Id":"ex-3","CreationTime":"2024-11-17T10:05:00","N":123456789012345678901}'),
        exchange_row(4, audit='{"Id":"ex-4",\n"CreationTime":"2024-11-17T10:05:00"}'),
        exchange_row(5, audit='{"CreationTime":"2024-11-17T10:05:00"}'),
        exchange_row(6, audit='{"Id":"ex-6"}', CreationDate="2024-11-17T10:06:00"),
        exchange_row(8, audit='{"Id":"ex-8"'),
        exchange_row(9, audit="[1]"),
        exchange_row(
            10, audit='{"Id":"ex-10","CreationTime":"2024-11-17T10:05:00","UserType":"weird","RecordType":null}'
        ),
    ],
)
def test_an_exchange_row_gives_the_record_it_gave_before_with_auditdata_as_the_service_wrote_it(row: Any) -> None:
    page = exchange_page([row])
    before = page_of([row], exchange_item)
    assert page.malformed == before.malformed
    if before.records:
        (line,) = page.lines
        assert json.loads(bytes(line)) == json.loads(dump_line(before.records[0]))  # the same values
        assert page.ids == [before.records[0]["id"]] and page.times == before.times
        text = row["AuditData"]
        if "\n" not in text:
            assert b'"auditData":' + text.encode() + b"," in bytes(line)  # the service's text, as it came
        assert bytes(line).startswith(b'{"administrativeUnits":[],"auditData":')


def test_a_lone_surrogate_escape_is_written_as_the_service_wrote_it() -> None:
    """Decoded, ``\\ud800`` is no Unicode and could not be encoded again (the record used to be quarantined as
    unusable); kept as the service's text, the line is valid UTF-8 JSON text."""
    row = exchange_row(7, audit='{"Id":"ex-7","CreationTime":"2024-11-17T10:05:00","X":"\\ud800"}')
    page = exchange_page([row, exchange_row(8)])
    assert page.ids == ["ex-7", "ex-8"] and not page.malformed
    assert b'"X":"\\ud800"' in bytes(page.lines[0])
    graph = page_from(body_of([graph_record(0, operation="\ud800")]))
    assert b'"operation":"\\ud800"' in bytes(graph.lines[0]) and not graph.malformed
    assert exchange_page([{**row, "AuditData": "\ud800"}]).malformed[0].reason.startswith("AuditData is not JSON")
