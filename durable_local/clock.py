"""Clocks for the local durable engine.

Every component that needs "now" or has to wait takes a ``Clock`` (``durable_local.ports.Clock``) so that
tests can drive time by hand: visibility timeouts, abandon back-offs (up to 600 s) and durable timers then
run in microseconds of real time instead of minutes.

* ``SystemClock`` — the wall clock (UTC) and ``time.sleep``. Used by the host and the CLI.
* ``ManualClock`` — time moves only when told to. ``sleep(s)`` advances the clock by ``s`` and returns at
  once, so code under test that "waits" for a back-off simply jumps ahead.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

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


def _aware_utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("ManualClock needs a timezone-aware datetime (e.g. datetime(2024, 1, 1, tzinfo=UTC))")
    return moment.astimezone(UTC)
