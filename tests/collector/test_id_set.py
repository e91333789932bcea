"""``shared.records.id_set.IdSet`` is exactly a set of strings, whatever mix of GUID and other ids it holds."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.records.id_set import IdSet, guid_key, guid_text, page_keys
from shared.records.rules import Deduplicator

ZERO = "00000000-0000-0000-0000-000000000000"
GUIDS = st.uuids().map(str) | st.just(ZERO) | st.integers(0, 2**16).map(lambda n: str(uuid.UUID(int=n)))
IDS = (
    GUIDS
    | GUIDS.map(str.upper)  # the same GUID in upper case is another id
    | GUIDS.map(lambda g: "{" + g + "}")
    | GUIDS.map(lambda g: g.replace("-", ""))
    | st.text(max_size=40)
)
OPS = st.lists(st.tuples(st.sampled_from(["add", "discard", "contains"]), IDS), max_size=300)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_it_behaves_exactly_like_a_set_of_strings(ops: list[tuple[str, str]]) -> None:
    ids, model = IdSet(), set[str]()
    for op, record_id in ops:
        if op == "add":
            assert ids.add(record_id) == (record_id not in model)
            model.add(record_id)
        elif op == "discard":
            ids.discard(record_id)
            model.discard(record_id)
        assert (record_id in ids) == (record_id in model)
        assert len(ids) == len(model)
    assert set(ids) == model
    assert set(IdSet.from_bytes(ids.to_bytes())) == model


@settings(max_examples=200, deadline=None)
@given(OPS, OPS)
def test_copy_and_update_are_a_set_copy_and_union(first: list[tuple[str, str]], second: list[tuple[str, str]]) -> None:
    def build(ops: list[tuple[str, str]]) -> tuple[IdSet, set[str]]:
        ids, model = IdSet(), set[str]()
        for op, record_id in ops:
            if op == "add":
                ids.add(record_id)
                model.add(record_id)
            elif op == "discard":
                ids.discard(record_id)
                model.discard(record_id)
        return ids, model

    (a, model_a), (b, model_b) = build(first), build(second)
    twin = a.copy()
    twin.update(b)
    assert set(twin) == model_a | model_b and len(twin) == len(model_a | model_b)
    assert set(a) == model_a  # the original is untouched
    for record_id in model_b:
        twin.discard(record_id)
        assert record_id not in twin and (record_id in a) == (record_id in model_a)
    assert set(IdSet.from_bytes(twin.to_bytes())) == (model_a | model_b) - model_b


def test_it_stays_exact_through_many_growths_and_near_keys() -> None:
    ids = IdSet()
    # Keys that differ only in their top bits or only in their low bits: a weak slot function would pile them up.
    near = [str(uuid.UUID(int=n << 100 | 7)) for n in range(1, 3000)] + [str(uuid.UUID(int=n)) for n in range(3000)]
    randoms = [str(uuid.UUID(int=(n * 0x9E3779B97F4A7C15_F39CC0605CEDC835) % 2**128)) for n in range(1, 60_000)]
    for record_id in near + randoms:
        assert ids.add(record_id)
    for record_id in near + randoms:
        assert record_id in ids and not ids.add(record_id)
    assert ZERO in ids and len(ids) == len(set(near + randoms))
    assert "not-an-id" not in ids and randoms[5].upper() not in ids
    # At most 3/4 full, and at least 3/8 after each doubling: 21 to 43 bytes per GUID.
    assert 16 * len(ids) / 0.75 <= ids.memory_bytes() <= 16 * len(ids) / 0.375


def test_a_guid_maps_to_one_number_and_back() -> None:
    guid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    assert guid_text(guid_key(guid) or 0) == guid
    assert guid_key(guid.upper()) is None and guid_key("{" + guid + "}") is None
    assert guid_key("0f8fad5b-d9cb-469f-a165-7086772895_e") is None


def test_damaged_bytes_are_refused() -> None:
    data = IdSet().to_bytes()
    ids = IdSet()
    ids.add("a")
    ids.add(str(uuid.uuid4()))
    for bad in (b"", b"nope", data[:-1] + b"", ids.to_bytes()[:-1], ids.to_bytes()[:20]):
        if bad == data:
            continue
        with pytest.raises(ValueError):
            IdSet.from_bytes(bad)


def test_the_deduplicator_counts_what_it_drops() -> None:
    dedupe = Deduplicator()
    guid = str(uuid.uuid4())
    kept, removed = dedupe.filter([{"id": guid}, {"id": "x"}, {"id": guid}, {"id": guid.upper()}])
    assert [r["id"] for r in kept] == [guid, "x", guid.upper()] and removed == 1
    assert dedupe.duplicates_removed == 1 and guid in dedupe and len(dedupe) == 3


@pytest.mark.parametrize("record_id", ["0f8fad5b-d9cb-469f-a165-70867728950e", "rec-1", ZERO])
def test_an_id_added_again_after_a_discard_is_a_member_once(record_id: str) -> None:
    """Issue 18.9: discard then add must make the id a member again, so a second add says "already there"."""
    ids = IdSet()
    assert ids.add(record_id) and not ids.add(record_id)
    ids.discard(record_id)
    assert record_id not in ids and len(ids) == 0
    assert ids.add(record_id) and record_id in ids
    assert not ids.add(record_id) and len(ids) == 1
    twin = IdSet.from_bytes(ids.to_bytes())
    assert record_id in twin and not twin.add(record_id)


PAGES = st.lists(st.lists(IDS | GUIDS, max_size=40), max_size=8)


@settings(max_examples=300, deadline=None)
@given(PAGES, st.lists(IDS, max_size=5))
def test_a_page_added_at_once_is_each_id_added_in_turn(pages: list[list[str]], removed: list[str]) -> None:
    """``add_many`` and ``contains_many`` (the page checked and converted at once) answer as ``add`` and ``in`` do,
    also after a discard (which sends the page id by id)."""
    batched, single = IdSet(), IdSet()
    for number, page in enumerate(pages):
        assert batched.contains_many(page) == [record_id in single for record_id in page]
        assert batched.add_many(page) == [single.add(record_id) for record_id in page]
        if number == 1:
            for record_id in removed:
                batched.discard(record_id)
                single.discard(record_id)
    assert set(batched) == set(single) and len(batched) == len(single)


def test_a_page_of_guids_is_read_as_numbers_only_when_every_id_is_one() -> None:
    guids = [str(uuid.uuid4()) for _ in range(3)]
    highs, lows = page_keys(guids) or ((), ())
    assert [h << 64 | low for h, low in zip(highs, lows, strict=True)] == [guid_key(g) for g in guids]
    shifted = [guids[0][:35], guids[1][0] + guids[1]]  # 35 + 37 characters: the same text run, other ids
    for page in (
        [*guids, guids[0].upper()],
        [*guids, "{" + guids[0][1:]],
        shifted,
        [guids[0][:8] + " " + guids[0][9:]],
    ):
        assert page_keys(page) is None
    ids = IdSet()
    assert ids.add_many(shifted) == [True, True] and set(ids) == set(shifted)
