"""Record time parsing, window trimming and de-duplication (pure helpers)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from shared.audit.ports import TimeWindow
from shared.records.rules import (
    Deduplicator,
    canonical_time,
    format_timestamp,
    parse_record_time,
    parse_timestamp,
    trim_to_window,
)

T0 = datetime(2024, 3, 1, tzinfo=UTC)


def rec(record_id: str, moment: datetime) -> dict[str, object]:
    return {"id": record_id, "createdDateTime": format_timestamp(moment)}


def test_parse_timestamp_forms() -> None:
    assert parse_timestamp("2024-03-01T00:00:00Z") == T0
    assert parse_timestamp("2024-03-01T00:00:00") == T0  # UAL CreationTime has no offset: UTC
    assert parse_timestamp("2024-03-01T02:00:00+02:00") == T0
    assert parse_timestamp("2024-03-01T00:00:00.1234567Z") == T0 + timedelta(microseconds=123456)
    assert parse_record_time({"createdDateTime": "2024-03-01T00:00:00.5Z"}) == T0 + timedelta(milliseconds=500)


def test_parse_record_time_requires_the_field() -> None:
    for bad in ({}, {"createdDateTime": ""}, {"createdDateTime": 5}):
        try:
            parse_record_time(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")


def test_format_timestamp_is_utc_z() -> None:
    assert format_timestamp(T0) == "2024-03-01T00:00:00Z"
    assert format_timestamp(T0 + timedelta(microseconds=500000)) == "2024-03-01T00:00:00.5Z"


def test_trim_is_half_open() -> None:
    window = TimeWindow(T0, T0 + timedelta(hours=1))
    records = [
        rec("before", T0 - timedelta(seconds=1)),
        rec("start", T0),
        rec("inside", T0 + timedelta(minutes=30)),
        rec("end", T0 + timedelta(hours=1)),
        rec("bleed", T0 + timedelta(hours=9)),
    ]
    kept, removed = trim_to_window(records, window)
    assert [r["id"] for r in kept] == ["start", "inside"]
    assert removed == 3


def test_deduplicator_across_batches() -> None:
    dedupe = Deduplicator()
    kept, removed = dedupe.filter([rec("a", T0), rec("b", T0), rec("a", T0)])
    assert [r["id"] for r in kept] == ["a", "b"] and removed == 1
    kept, removed = dedupe.filter([rec("b", T0), rec("c", T0)])
    assert [r["id"] for r in kept] == ["c"] and removed == 1
    assert dedupe.duplicates_removed == 2 and len(dedupe) == 3


@given(
    offsets=st.lists(st.integers(min_value=-7200, max_value=7200), max_size=60),
    ids=st.lists(st.integers(min_value=0, max_value=20), max_size=60),
)
def test_trim_then_dedupe_properties(offsets: list[int], ids: list[int]) -> None:
    window = TimeWindow(T0, T0 + timedelta(hours=1))
    records = [rec(str(i), T0 + timedelta(seconds=o)) for o, i in zip(offsets, ids)]
    kept, removed = trim_to_window(records, window)
    assert len(kept) + removed == len(records)
    assert all(window.contains(parse_record_time(r)) for r in kept)
    unique, dupes = Deduplicator().filter(kept)
    assert len(unique) + dupes == len(kept)
    assert len({r["id"] for r in unique}) == len(unique) == len({r["id"] for r in kept})


@given(st.datetimes(min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)))
def test_canonical_text_is_recognised_and_parsed_once_to_the_same_moment(moment: datetime) -> None:
    text = format_timestamp(moment)
    assert canonical_time(text) == (text, moment)


OFFSETS = st.sampled_from(["Z", "z", "+00:00", "-07:30", "+14:00", ""])
FRACTIONS = st.sampled_from(["", ".5", ".50", ".000001", ".1234567", ".0000000", ".9999999"])


@given(
    st.datetimes(min_value=datetime(1000, 1, 2), max_value=datetime(9999, 12, 30)),
    FRACTIONS,
    OFFSETS,
    st.sampled_from(["", " "]),
)
def test_any_other_timestamp_text_gets_the_general_paths_canonical_form(
    naive: datetime, fraction: str, offset: str, pad: str
) -> None:
    text = f"{pad}{naive:%Y-%m-%dT%H:%M:%S}{fraction}{offset}{pad}"
    moment = parse_timestamp(text)
    assert canonical_time(text) == (format_timestamp(moment), moment)


def test_text_that_looks_canonical_but_is_no_date_is_refused() -> None:
    for bad in ("2024-02-30T00:00:00Z", "2024-13-01T00:00:00Z", "2024-01-01T24:00:00Z", "٢٠٢٤-01-01T00:00:00Z"):
        try:
            canonical_time(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad}")
