from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.timeline.planning import ChunkPlan, chunk_count, plan_chunks, smallest_interval_minutes

BASE = datetime(2024, 1, 1, tzinfo=UTC)


def test_seed_example_one_day_at_240_minutes_is_six_chunks() -> None:
    start = datetime(2024, 11, 17, 10, 14, 59, tzinfo=UTC)
    chunks = plan_chunks(start, start + timedelta(days=1), timedelta(minutes=240))
    assert len(chunks) == 6
    assert chunks[0].start == start and chunks[-1].end == start + timedelta(days=1)


def test_last_chunk_is_truncated_at_end() -> None:
    chunks = plan_chunks(BASE, BASE + timedelta(minutes=130), timedelta(minutes=60))
    assert [(c.end - c.start).total_seconds() / 60 for c in chunks] == [60, 60, 10]


@given(
    offset=st.integers(min_value=0, max_value=10**7),
    span=st.integers(min_value=1, max_value=10**7),
    interval=st.integers(min_value=1, max_value=10**6),
)
def test_windows_cover_range_exactly_without_gaps_or_overlaps(offset: int, span: int, interval: int) -> None:
    start = BASE + timedelta(seconds=offset)
    end = start + timedelta(seconds=span)
    plan = ChunkPlan(start, end, timedelta(seconds=interval))
    if plan.count > 2000:
        return  # the cover property is the same; keep the example fast
    chunks = list(plan)
    assert chunks[0].start == start
    assert chunks[-1].end == end
    for left, right in itertools.pairwise(chunks):
        assert left.end == right.start  # no gap, no overlap
        assert left.end - left.start == timedelta(seconds=interval)
    assert timedelta(0) < chunks[-1].end - chunks[-1].start <= timedelta(seconds=interval)
    assert len(chunks) == chunk_count(start, end, timedelta(seconds=interval))


@given(
    span_minutes=st.integers(min_value=1, max_value=200_000),
    max_chunks=st.integers(min_value=1, max_value=5_000),
)
def test_smallest_interval_fits_and_is_minimal(span_minutes: int, max_chunks: int) -> None:
    end = BASE + timedelta(minutes=span_minutes)
    minutes = smallest_interval_minutes(BASE, end, max_chunks)
    assert chunk_count(BASE, end, timedelta(minutes=minutes)) <= max_chunks
    if minutes > 1:
        assert chunk_count(BASE, end, timedelta(minutes=minutes - 1)) > max_chunks


def test_plan_round_trips_through_json_and_indexes_chunks() -> None:
    plan = ChunkPlan(BASE, BASE + timedelta(hours=5, minutes=30), timedelta(hours=1))
    again = ChunkPlan.from_json(plan.to_json())
    assert list(again) == list(plan)
    assert plan.chunk(5).end == BASE + timedelta(hours=5, minutes=30)
    with pytest.raises(IndexError):
        plan.chunk(6)


@pytest.mark.parametrize(
    ("start", "end", "interval"),
    [
        (BASE, BASE, timedelta(minutes=1)),
        (BASE, BASE - timedelta(minutes=1), timedelta(minutes=1)),
        (BASE, BASE + timedelta(minutes=1), timedelta(0)),
        (BASE.replace(tzinfo=None), BASE + timedelta(minutes=1), timedelta(minutes=1)),
    ],
)
def test_plan_rejects_bad_bounds(start: datetime, end: datetime, interval: timedelta) -> None:
    with pytest.raises(ValueError):
        ChunkPlan(start, end, interval)
