"""The tenant's daily Graph quota as a collection spends it: a credit before every query it submits.

Before every query it submits (its first, and any again: a phase its source's ``SourceLanes.submits`` names, Graph's
submit; the budget keeps a quota only for a source with one) a lane takes a submission credit with the ``acquire``
that gives it its slot (``submit``: a number unique in the collection, so a re-sent ``acquire`` takes it once); a slot
it holds already is renewed by the same call. A lane whose next call submits never takes a slot handed on without
asking. When the tenant's allowance is spent the answer says until when (``quotaUntil``): the lane gives its slot back
and waits on a durable timer until then ("waiting for the tenant's daily Graph quota until <time>" in the custom
status), then asks again; like a queued lane it is the collection's one waiter. Never a loop, never an error that
fails the chunk.

**Kept** (``BudgetOptions.keep``, collections started since issue 28): credits come a few at once (``CREDIT_BATCH``),
kept in ``Carried.credits`` and spent by the next submissions without a call; a lane that ends with a credit it did
not spend leaves it to the collection, and the run's unspent ones go back with its closing ``release_collection``.
"""

from __future__ import annotations

from datetime import datetime

from shared.budget.quota import wait_until
from shared.budget.wire import BudgetOptions
from shared.models import JsonDict, iso, parse_iso
from shared.window.budget_host import BudgetHost
from shared.window.state import BUDGET, Lane

CREDIT_BATCH = 8
"""``BudgetOptions.keep``: the most daily-quota credits a collection takes with one ``acquire`` (no more than it has
chunks left to start, plus the lane's own): a lane that keeps its slot then submits its next queries without asking
the budget. What the run did not spend goes back when it ends."""

QUOTA_WAIT = "waiting for the tenant's daily Graph quota"
"""The budget state while a lane waits for the quota (followed by " until <time>")."""


class QuotaCredits:
    """The collection's credits of the tenant's daily quota: when a lane needs one, asks, spends and keeps it."""

    def __init__(self, window: BudgetHost, options: BudgetOptions) -> None:
        self.window = window
        self.options = options

    def wants(self, lane: Lane) -> bool:
        """The lane's next server-side call submits a query that costs a credit of the tenant's daily quota (its
        source says which phase does: Graph's submit) and it holds no credit for it."""
        source = self.window.source
        return self.options.keeps_quota and source.submits(source.resume_phase(lane)) and not lane.credited

    def needs(self, lane: Lane) -> bool:
        """The lane is about to submit a query without a quota credit (its first, or a submission again)."""
        return self.options.keeps_quota and self.window.source.submits(lane.phase) and not lane.credited

    def take_kept(self, lane: Lane) -> bool:
        """``keep``: the lane's submission spends a credit the collection took earlier (no entity call)."""
        state = self.window.state
        if not self.options.keep or state.credits <= 0:
            return False
        state.credits -= 1
        lane.credited = True
        return True

    def spend(self, lane: Lane) -> None:
        """The lane's submit is issued: its credit is used (a submission again needs another)."""
        lane.credited, lane.submission = False, 0

    def keep_unspent(self, lane: Lane) -> None:
        """``keep``: a lane ended; a credit it did not spend stays with the collection."""
        if self.options.keep and lane.credited:
            self.window.state.credits += 1
            lane.credited = False

    def for_acquire(self, lane: Lane) -> tuple[int, int]:
        """What an ``acquire`` for the lane carries: its submission's number (given once, kept until it is granted)
        and the credits it asks for (0, 0: none wanted)."""
        if not self.wants(lane):
            return 0, 0
        if not lane.submission:
            self.window.state.submissions += 1
            lane.submission = self.window.state.submissions
        return lane.submission, self._wanted()

    def _wanted(self) -> int:
        """How many credits an ``acquire`` asks for: with ``keep``, the lane's own and one per chunk still to start,
        at most ``CREDIT_BATCH``; otherwise one."""
        if not self.options.keep:
            return 0
        state = self.window.state
        unstarted = max(0, self.window.spec.planned - state.cursor) + len(state.requeued)
        return min(CREDIT_BATCH, 1 + unstarted)

    # --- answers ----------------------------------------------------------------------------------------------
    def out_of_quota(self, lane: Lane, quota_until: str) -> None:
        """The daily quota is spent: the entity took the lane's slot back (no loss); it waits until ``quota_until``."""
        lane.holds_slot = False
        if lane.slot is not None:
            lane.slot.grant = None
        lane.quota_until = parse_iso(quota_until)
        self.window.state.quota_waits += 1

    def granted(self, lane: Lane, answer: JsonDict) -> None:
        """The lane was granted: its credit if the entity says so, or keeps no quota (it then counts nothing, and the
        lane must not ask again for ever); an acquire that carried no submission takes none. With ``keep`` the
        answer's other credits are kept for the next submissions."""
        lane.quota_until = None
        credit = answer.get("credit") == lane.submission or "quota" not in answer
        taken = answer.get("credits")
        if self.options.keep and lane.submission > 0 and credit and not lane.credited and isinstance(taken, int):
            self.window.state.credits += max(0, taken - 1)
        lane.credited = lane.credited or (lane.submission > 0 and credit)

    def wait_end(self, lane: Lane) -> datetime | None:
        """When a lane refused for the quota asks again (None: it was not)."""
        if lane.quota_until is None:
            return None
        margin, poll = self.options.margin_seconds, self.options.poll_seconds
        return wait_until(lane.quota_until, self.window.now, margin, poll)

    def add_status(self, status: JsonDict) -> None:
        """The custom status's ``quota`` (and the budget's state while a lane waits for the quota)."""
        if not self.options.keeps_quota:
            return
        state = self.window.state
        waits = [lane.quota_until for lane in self.window.lanes.values() if lane.phase == BUDGET and lane.quota_until]
        until = min(waits) if waits else None
        if until is not None:
            status["state"] = f"{QUOTA_WAIT} until {iso(until)}"
        status["quota"] = {
            **(state.budget_quota or {"allowed": self.options.quota}),
            "waitingUntil": iso(until) if until else None,
            "waits": state.quota_waits,
            "submissions": state.submissions,
        }
        if self.options.keep:
            status["quota"]["kept"] = state.credits
