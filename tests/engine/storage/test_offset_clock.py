"""``OffsetFileClock``: the wall clock plus an offset a file holds, shared by every process reading the file."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from durable_local.clock import OffsetFileClock, write_offset


def test_a_missing_file_is_the_wall_clock(tmp_path: Path) -> None:
    clock = OffsetFileClock(tmp_path / "clock")
    before = datetime.now(UTC)
    assert before - timedelta(seconds=1) <= clock.now() <= datetime.now(UTC) + timedelta(seconds=1)
    assert clock.offset() == 0.0


def test_advance_moves_every_reader_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "clock"
    mover, reader = OffsetFileClock(path), OffsetFileClock(path)
    moved = mover.advance(timedelta(days=7))
    assert reader.offset() == pytest.approx(7 * 86400)
    assert abs((reader.now() - moved).total_seconds()) < 5
    assert reader.now() - datetime.now(UTC) > timedelta(days=7) - timedelta(seconds=5)
    mover.advance(3600)  # offsets add up
    assert reader.offset() == pytest.approx(7 * 86400 + 3600)


def test_time_never_runs_backwards(tmp_path: Path) -> None:
    clock = OffsetFileClock(tmp_path / "clock")
    with pytest.raises(ValueError, match="non-negative"):
        clock.advance(-1)


def test_the_file_is_plain_seconds(tmp_path: Path) -> None:
    """Other processes (the app, the emulator) read the same file: its format is the offset as decimal text."""
    path = tmp_path / "clock"
    write_offset(path, 90.5)
    assert path.read_text() == "90.5"
    assert OffsetFileClock(path).offset() == 90.5
