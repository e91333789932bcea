"""A lane's tenant budget slot as an activity sees it: no request that uses the slot is sent once its lease has run out.

Activities cannot call entities, so the window hands each server-side activity the moment its slot's lease ends,
as the budget entity last told it (``leaseUntil`` of the grant or of the latest renewal), less a margin for the
clock difference between the worker that ran the entity and the one running the activity
(``BudgetOptions.margin_seconds``). The activity checks it when it starts, and runs its adapter calls inside
:meth:`SlotDeadline.guarding`, so that the audit HTTP client checks it again right before it sends each request
(``check_request``, after the token is fetched and before every retry): an Exchange call (the request that starts a
search block; its nextLink pages continue a block already started), a Graph create, status check or page. Once it
has passed, :class:`~shared.errors.SlotExpiredError` stops the activity and the window asks the budget again. A
renewal made while the activity runs is not seen by it: the activity may stop early, and the window, finding the
lease renewed, sends the call again without the per-request check (so an export longer than a lease still ends).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime

from shared.errors import SlotExpiredError
from shared.models import JsonDict, iso, parse_iso


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
    """Check before every request of the activity, pages included (off when the window resends a call that the
    deadline stopped although the lease was renewed)."""
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

    @contextmanager
    def guarding(self, *, every_request: bool) -> Iterator[None]:
        """Inside this block the audit HTTP client checks the deadline before each request it sends: every request
        (Graph), or only the requests that advance a session (Exchange: a block's first request and its retries)."""
        if self.until is None or not self.pages:
            yield
            return
        token = _GATE.set((self, every_request))
        try:
            yield
        finally:
            _GATE.reset(token)


_GATE: ContextVar[tuple[SlotDeadline, bool] | None] = ContextVar("slot_deadline_gate", default=None)


def check_request(step: str, *, advances_session: bool) -> None:
    """Called by the audit HTTP client right before it sends a request: ``SlotExpiredError`` once the deadline of the
    activity running it has passed (nothing to check outside :meth:`SlotDeadline.guarding`)."""
    gate = _GATE.get()
    if gate is None:
        return
    deadline, every_request = gate
    if every_request or advances_session:
        deadline.check(step)
