"""Which parts of a collection may still gain records (``shared.timeline.latency``), and where users see it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.models import Chunk
from shared.timeline.latency import AUDIT_LATENCY, latency_report, provisional_parts

T = datetime(2024, 11, 18, 12, 0, tzinfo=UTC)


def test_a_range_that_ended_a_day_before_the_start_is_settled() -> None:
    old = Chunk(T - timedelta(days=10), T - AUDIT_LATENCY)
    assert provisional_parts([old], T) == []
    assert latency_report([old], T)["settledAfter"] is None


def test_only_the_last_day_before_the_start_is_provisional() -> None:
    ranges = [Chunk(T - timedelta(days=3), T)]
    parts = provisional_parts(ranges, T)
    assert parts == [Chunk(T - AUDIT_LATENCY, T)]
    report = latency_report(ranges, T)
    assert report["provisional"] == [{"start": "2024-11-17T12:00:00Z", "end": "2024-11-18T12:00:00Z"}]
    assert report["settledAfter"] == "2024-11-19T12:00:00Z"  # collect [start, end) again after this: final


def test_a_retry_of_scattered_windows_flags_each_recent_one_whole_or_in_part() -> None:
    windows = [
        Chunk(T - timedelta(hours=30), T - timedelta(hours=29)),  # settled
        Chunk(T - timedelta(hours=25), T - timedelta(hours=23)),  # straddles the cut-off
        Chunk(T - timedelta(hours=2), T - timedelta(hours=1)),  # recent
    ]
    assert provisional_parts(windows, T) == [
        Chunk(T - AUDIT_LATENCY, T - timedelta(hours=23)),
        Chunk(T - timedelta(hours=2), T - timedelta(hours=1)),
    ]
    assert latency_report(windows, T)["settledAfter"] == "2024-11-19T11:00:00Z"


def test_unknown_start_time_claims_nothing() -> None:
    assert latency_report([Chunk(T - timedelta(hours=1), T)], None)["provisional"] is None


def test_the_cut_off_is_a_whole_second_rounded_down() -> None:
    started = T + timedelta(microseconds=707829)
    assert provisional_parts([Chunk(T - timedelta(days=3), T)], started) == [Chunk(T - AUDIT_LATENCY, T)]
