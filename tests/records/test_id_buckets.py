"""``shared.records.id_buckets.IdBuckets`` is exactly a set of strings, however its ids arrive (one by one or a page
at a time), whatever mix of GUID and other ids it holds, and whatever ``set`` it took over."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.records.id_buckets import IdBuckets
from shared.records.id_set import guid_text

ZERO = "00000000-0000-0000-0000-000000000000"
GUIDS = st.uuids().map(str) | st.just(ZERO) | st.integers(0, 2**10).map(lambda n: str(uuid.UUID(int=n)))
IDS = GUIDS | GUIDS | GUIDS.map(str.upper) | GUIDS.map(lambda g: "{" + g + "}") | st.text(max_size=40)
PAGES = st.lists(st.tuples(st.booleans(), st.lists(IDS | GUIDS, max_size=30)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.sets(IDS, max_size=20), PAGES, st.integers(0, 3))
def test_pages_and_single_ids_behave_exactly_like_a_set_of_strings(
    frozen: set[str], pages: list[tuple[bool, list[str]]], bits: int
) -> None:
    """``bits`` 0 to 3: a handful of buckets, so buckets hold many keys and the table grows often."""
    model = set(frozen)
    ids = IdBuckets(frozen=set(frozen), bits=bits)
    for one_by_one, page in pages:
        expected = []
        for record_id in page:
            expected.append(record_id not in model)
            model.add(record_id)
        got = [ids.add(record_id) for record_id in page] if one_by_one else ids.add_many(page)
        assert got == expected
        assert len(ids) == len(model)
    for record_id in [*model, *(text for _, page in pages for text in page)]:
        assert record_id in ids
    assert (ZERO in ids) == (ZERO in model)
    assert str(uuid.uuid4()) not in ids and 7 not in ids


def test_a_key_that_straddles_two_kept_keys_is_not_a_member() -> None:
    """Bytes equal to the end of one kept key and the start of the next are found by ``bytes.find``: not a match."""
    first, second = 0x11111111111111112222222222222222, 0x33333333333333334444444444444444
    straddle = guid_text(0x22222222222222223333333333333333)
    ids = IdBuckets(bits=0)  # one bucket: every key side by side
    assert ids.add_many([guid_text(first), guid_text(second)]) == [True, True]
    assert straddle not in ids
    assert ids.add_many([straddle, guid_text(first)]) == [True, False]
    assert straddle in ids and len(ids) == 3


def test_a_page_of_new_guids_goes_in_at_once_and_the_table_grows() -> None:
    ids = IdBuckets(bits=2)
    guids = [str(uuid.UUID(int=n * 0x9E3779B97F4A7C15)) for n in range(1, 2001)]
    for start in range(0, len(guids), 500):
        assert ids.add_many(guids[start : start + 500]) == [True] * 500
    assert len(ids) == 2000 and all(g in ids for g in guids)
    assert ids.add_many(guids[:3] + guids[:1]) == [False] * 4
    assert len(ids._buckets) >= 2000 // 16  # grown: at most 16 ids a bucket on average
