"""A lane's tenant budget slot as an activity sees it: no server-side step starts once the slot's lease has run out.

Activities cannot call entities, so the window hands each server-side activity the moment its slot's lease ends,
as the budget entity last told it (``leaseUntil`` of the grant or of the latest renewal), less a margin for the
clock difference between the worker that ran the entity and the one running the activity
(``BudgetOptions.margin_seconds``). The activity checks it right before each request that uses the slot (an
Exchange call, a Graph create or status check) and, for a Graph export, before each page; once it has passed, it
stops with :class:`~shared.errors.SlotExpiredError` and the window asks the budget again. A renewal made while the
activity runs is not seen by it: the activity may stop early, and the window then finds the lease renewed and
sends the call again without the page check (so an export longer than a lease still ends).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from shared.errors import SlotExpiredError
from shared.models import JsonDict, iso, parse_iso

T = TypeVar("T")


def _utc_now() -> datetime:
    return datetime.now(UTC)


_CLOCK: ContextVar[Callable[[], datetime]] = ContextVar("slot_deadline_clock", default=_utc_now)


@contextmanager
def activity_clock(clock: Callable[[], datetime]) -> Iterator[None]:
    """Activities run inside this block read ``clock`` for their deadline checks (a simulation's clock; the wall
    clock otherwise)."""
    token = _CLOCK.set(clock)
    try:
        yield
    finally:
        _CLOCK.reset(token)


@dataclass(frozen=True, slots=True)
class SlotDeadline:
    until: datetime | None = None
    """None: the collection takes no budget slots (nothing to check)."""
    pages: bool = True
    """Check before each page too (off when the window resends a call the deadline stopped although renewed)."""
    clock: Callable[[], datetime] = field(default=_utc_now, compare=False)

    @classmethod
    def of(cls, payload: JsonDict, clock: Callable[[], datetime] | None = None) -> SlotDeadline:
        raw = payload.get("slotDeadline")
        until = parse_iso(raw) if isinstance(raw, str) and raw else None
        return cls(until, bool(payload.get("slotPages", True)), clock or _CLOCK.get())

    def check(self, step: str) -> None:
        """Raise ``SlotExpiredError`` when the slot's lease has run out (``step`` says what was not started)."""
        if self.until is not None and self.clock() >= self.until:
            raise SlotExpiredError(f"the tenant budget slot ran out at {iso(self.until)}: {step} not started")

    def guard(self, pages: Iterable[T], step: str) -> Iterator[T]:
        """``pages``, checked before each one is fetched (when ``pages`` checks are on)."""
        iterator = iter(pages)
        try:
            while True:
                if self.pages:
                    self.check(step)
                try:
                    page = next(iterator)
                except StopIteration:
                    return
                yield page
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()
