"""Clocks for the local durable engine.

Every component that needs "now" or has to wait takes a ``Clock`` (``durable_local.ports.Clock``) so that
tests can drive time by hand: visibility timeouts, abandon back-offs (up to 600 s) and durable timers then
run in microseconds of real time instead of minutes.

* ``SystemClock`` — the wall clock (UTC) and ``time.sleep``. Used by the host and the CLI.
* ``ManualClock`` — time moves only when told to. ``sleep(s)`` advances the clock by ``s`` and returns at
  once, so code under test that "waits" for a back-off simply jumps ahead.
* ``OffsetFileClock`` — the wall clock plus an offset kept in a file, so several processes (a host in a
  subprocess, the audit API emulator, the test itself) share one moved time: a test moves every one of them at
  once by writing the file (``advance``). Time still flows at its real rate in between; ``sleep`` is real.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from durable_local.model import utc_now


class SystemClock:
    """Real time: ``now()`` is the UTC wall clock and ``sleep`` blocks the calling thread."""

    def now(self) -> datetime:
        return utc_now()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class ManualClock:
    """A clock that only moves when a test (or a ``sleep`` call) moves it. Thread-safe.

    Args:
        start: the initial time; must be timezone-aware (it is converted to UTC).

    ``sleep(s)`` advances this clock by ``s`` seconds and returns immediately (after yielding the GIL once, so
    that a polling loop in one thread does not starve the others). Several threads sleeping concurrently
    each advance the shared time: the clock is a simple counter, not a discrete-event scheduler.
    """

    def __init__(self, start: datetime) -> None:
        self._now = _aware_utc(start)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.advance(seconds)
        # Yield so that other threads observe the new time before this one polls again.
        time.sleep(0)

    def advance(self, amount: float | timedelta) -> datetime:
        """Move time forward by ``amount`` (seconds or a timedelta); returns the new time.

        Raises:
            ValueError: if ``amount`` is negative (use ``set`` to move backwards on purpose).
        """
        delta = amount if isinstance(amount, timedelta) else timedelta(seconds=amount)
        if delta < timedelta(0):
            raise ValueError(f"ManualClock.advance needs a non-negative amount, got {delta}")
        with self._lock:
            self._now += delta
            return self._now

    def set(self, moment: datetime) -> None:
        """Jump to ``moment`` (timezone-aware). Moving backwards is allowed, for tests of clock skew."""
        value = _aware_utc(moment)
        with self._lock:
            self._now = value


class OffsetFileClock:
    """The UTC wall clock moved forward by the offset a file holds (shared by every process that reads the file).

    The file holds the offset in seconds as decimal text; a missing or empty file is an offset of 0. ``now()`` reads
    it every time (a few microseconds; ``advance`` writes a new file and renames it over the old one, so a reader
    sees the old offset or the new one, never a torn write), so a test that calls ``advance`` moves the time of
    every reader at once: durable timers come due, the emulator's late records become visible, and the app's HTTP
    edge validates against the same "now". For tests only.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def offset(self) -> float:
        """Seconds this clock is ahead of the wall clock."""
        try:
            text = self.path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return 0.0
        return float(text) if text else 0.0

    def now(self) -> datetime:
        return utc_now() + timedelta(seconds=self.offset())

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def advance(self, amount: float | timedelta) -> datetime:
        """Move this clock (and every reader of its file) forward by ``amount``; returns the new time.

        Raises:
            ValueError: if ``amount`` is negative (time never runs backwards for the readers).
        """
        seconds = amount.total_seconds() if isinstance(amount, timedelta) else float(amount)
        if seconds < 0:
            raise ValueError(f"OffsetFileClock.advance needs a non-negative amount, got {seconds}")
        write_offset(self.path, self.offset() + seconds)
        return self.now()


def write_offset(path: str | os.PathLike[str], seconds: float) -> None:
    """Replace the clock file at ``path`` with ``seconds`` (written to a temporary file, then renamed over it)."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=".clock-", dir=target.parent)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(repr(float(seconds)))
    os.replace(tmp, target)


def _aware_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("ManualClock needs a timezone-aware datetime (e.g. datetime(2024, 1, 1, tzinfo=UTC))")
    return moment.astimezone(UTC)
