"""The window's side of the tenant budget: lanes take a slot before server-side work and give it back as they end.

An object the window holds (``CollectionWindow.budget``), pure like it: it only returns steps, and acts on lanes through
the window (``budget_host.BudgetHost``): the lane transitions, and the source's lanes for where a granted lane goes on.
This module starts lanes and reads the answers; its parts, each one responsibility:

* ``budget_calls`` (``BudgetCalls``): the entity protocol: ``acquire``, ``release``, ``renew_collection``, what the
  answers say (slots free, lanes waiting, the quota), holder ids, the collection's token on every operation;
* ``budget_keep`` (``SlotKeeper``): slots granted: handed on to the next chunk, kept across chunks, never used past
  their lease, renewed together, given back when someone waits;
* ``budget_credits`` (``QuotaCredits``): the tenant's daily Graph quota: a credit before every query submitted,
  taken a few at once and kept, refunded when the run ends, waiting when it is spent.

A lane begins in ``BUDGET`` ("waiting for tenant budget") and asks the ``tenant_budget`` entity to ``acquire`` a slot
for its holder id ``<collection>/<lane>``; the answer is a grant or a queue place, in one call. Granted, the lane
starts its first server-side step; queued, it asks again after ``poll_seconds`` (a durable timer: an entity cannot
call back). At most one lane of a collection waits: while it does, no other lane starts, and a second lane answered
"queued" (or "refused": the entity keeps one queue entry per collection) gives back its turn and its chunk (which
waits unstarted, first in line). So a waiting collection costs one timer and one entity call per poll.

With a budget of 0 (``RunOptions.budget_capacity``, also what an input written before the budget reads as) none of
this runs: lanes start in their first server-side phase and nothing is sent to the entity.
"""

from __future__ import annotations

from shared.budget.wire import BudgetOptions
from shared.models import ActivityError, JsonDict, parse_iso
from shared.window.budget_calls import BudgetCalls
from shared.window.budget_credits import QUOTA_WAIT, QuotaCredits
from shared.window.budget_host import BudgetHost, queued
from shared.window.budget_keep import SlotKeeper
from shared.window.state import BUDGET, RENEW, CallEntity, Lane, Slot, Step, later

__all__ = ["QUOTA_WAIT", "LaneBudget"]


class LaneBudget:
    """The collection's slots of the tenant budget: when a lane may start, asks, holds, hands on and gives back."""

    def __init__(self, window: BudgetHost, options: BudgetOptions, token: str) -> None:
        self.window = window
        self.options = options
        """The collection's ``RunOptions.budget`` (built once: the window runs again on every replay)."""
        self.credits = QuotaCredits(window, options)
        self.calls = BudgetCalls(window, options, token, self.credits)
        self.keeper = SlotKeeper(window, options, self.calls)

    @property
    def enabled(self) -> bool:
        return self.options.enabled

    @property
    def token(self) -> str:
        return self.calls.token

    @property
    def free_slots(self) -> int:
        """Slots the budget's latest answer left free with nobody waiting (``BudgetCalls.free_slots``)."""
        return self.calls.free_slots

    @free_slots.setter
    def free_slots(self, value: int) -> None:
        self.calls.free_slots = value

    @property
    def spares(self) -> list[Slot]:
        return self.keeper.spares

    @property
    def renewing(self) -> bool:
        return self.keeper.renewing

    def queued(self) -> Lane | None:
        return queued(self.window.lanes.values())

    # --- starting a lane --------------------------------------------------------------------------------------
    def may_ask(self) -> bool:
        """Whether a new lane may start: no lane of this collection waits in the budget's queue, and a slot of an
        ended lane is at hand or fewer lanes ask than the latest answer left slots free (one at a time when nothing
        is known), so lanes rarely ask for slots that are not there."""
        if not self.options.enabled:
            return True
        if self.queued() is not None:
            return False
        asking = sum(1 for lane in self.window.lanes.values() if lane.phase == BUDGET)
        return bool(self.spares) or asking < max(1, self.free_slots)

    def take_slot(self, lane: Lane) -> list[Step]:
        """A new lane's first step: the slot of a lane that just ended when nobody waits for it, else ``acquire``
        (with that slot's release folded in)."""
        spare = self.spares.pop(0) if self.spares else None
        if self.credits.wants(lane):
            self.credits.take_kept(lane)
        if spare is not None and self.keeper.may_hand_on(spare) and not self.credits.wants(lane):
            lane.slot, lane.holds_slot = spare, True
            spare.since = self.window.now
            return [self.window.call(lane)]
        lane.phase = BUDGET
        return [self.acquire(lane, release=spare)]

    # --- before a lane's next call (``CollectionWindow.call``) ------------------------------------------------
    def acquire(self, lane: Lane, release: Slot | None = None) -> CallEntity:
        return self.calls.acquire(lane, release)

    def uses_slot(self, lane: Lane) -> bool:
        return self.keeper.uses_slot(lane)

    def needs_slot(self, lane: Lane) -> bool:
        return self.keeper.needs_slot(lane)

    def slot_fields(self, lane: Lane) -> tuple[str | None, bool | None]:
        return self.keeper.slot_fields(lane)

    def needs_credit(self, lane: Lane) -> bool:
        return self.credits.needs(lane)

    def kept_credit(self, lane: Lane) -> bool:
        return self.credits.take_kept(lane)

    def spend_credit(self, lane: Lane) -> None:
        self.credits.spend(lane)

    def ask_credit(self, lane: Lane) -> CallEntity:
        """A credit (and the slot, renewed when held) in one ``acquire`` before the lane submits."""
        lane.phase = BUDGET
        lane.budget_waits = 0
        return self.acquire(lane)

    def ask_again(self, lane: Lane) -> CallEntity:
        """The lane's slot is gone or its deadline passed: back to the queue with what it did so far."""
        lane.holds_slot = False
        lane.phase = BUDGET
        lane.budget_waits = 0
        return self.acquire(lane)

    # --- answers ----------------------------------------------------------------------------------------------
    def on_budget(self, lane_id: int, answer: JsonDict | None) -> list[Step]:
        """The tenant budget answered a lane's ``acquire`` (or the collection's renewal); ``None``: the call failed."""
        if lane_id == RENEW:
            return self.keeper.renewed(answer)
        window = self.window
        lane = window.lanes[lane_id]
        lane.issued_at = lane.due = None
        if answer is None:
            return window.error(lane, ActivityError("budget_unavailable", "the tenant budget entity did not answer"))
        self.calls.learn(answer)
        granted = bool(answer.get("granted"))
        quota_until = answer.get("quotaUntil") if not granted else None
        if isinstance(quota_until, str):  # the daily quota is spent: the entity took its slot back, no loss
            self.credits.out_of_quota(lane, quota_until)
        self.calls.count_loss(lane, answer)
        if granted:
            self.credits.granted(lane, answer)
            until = answer.get("leaseUntil")
            grant = answer.get("grant")
            lane.slot = Slot(
                self.calls.holder_number(lane),
                parse_iso(until) if isinstance(until, str) else None,
                int(grant) if isinstance(grant, int) else None,
                since=window.now,
            )
            lane.holds_slot = True
        if window.state.doomed is not None:  # nothing more starts: the chunk stays for a retry
            return window.conclude(lane, ("unstarted", None))
        lane.step_failures = 0
        if granted:
            lane.phase = window.source.resume_phase(lane)
            return window.next_call(lane) + self.keeper.keep_renewing()
        lane.budget_waits += 1
        window.state.budget_waits += 1
        waiter = self.queued()
        if waiter is not None and waiter is not lane and not window.source.has_progress(lane):
            return window.conclude(lane, ("unstarted", None))  # one lane per collection waits; this chunk waits
        quota_end = self.credits.wait_end(lane)
        if quota_end is not None:
            return window.wait(lane, quota_end)
        return window.wait(lane, later(window.now, self.options.poll_seconds))

    def slot_expired(self, lane: Lane, error: ActivityError) -> list[Step]:
        """The activity found the slot's deadline passed and sent nothing (or stopped between pages). Once the
        window sees it passed too, the lane asks the budget again. If the window has seen the lease renewed since
        the call was sent, the call goes again after a back-off, without the page check (so an export longer than
        a lease ends); counted as a failed step, so an activity that keeps refusing a lease the window sees renewed
        (a worker clock ahead by more than the margin) ends after the attempts instead of looping."""
        if self.needs_slot(lane):
            return self.window.next_call(lane)
        if lane.slot is not None:
            lane.slot.pages_free = True
        return self.window.error(lane, error)

    # --- ending -----------------------------------------------------------------------------------------------
    def give_back(self, lane: Lane) -> list[Step]:
        """A lane ended: a credit it did not spend stays with the collection (``keep``); its slot is kept for the
        next chunk or given back (``SlotKeeper.give_back``)."""
        self.credits.keep_unspent(lane)
        return self.keeper.give_back(lane)

    def settle(self) -> list[Step]:
        """The end of every episode (``CollectionWindow.fill``): slots no new chunk took, then the renewal if it rides
        on this episode (``SlotKeeper.ride``)."""
        return self.keeper.settle_spares() + self.keeper.ride()

    def resumed(self) -> list[Step]:
        return self.keeper.resumed()

    def renewal_timer(self) -> list[Step]:
        return self.keeper.timer_fired()

    def status(self) -> JsonDict | None:
        """The custom status's ``budget``: slots held, lanes asking for one, and "waiting for tenant budget" while a
        lane waits (``waits``: times a lane was answered "queued"; ``lost``: slots taken away from a lane that still
        had work), and the daily quota's figures (``QuotaCredits.add_status``)."""
        if not self.options.enabled:
            return None
        lanes = self.window.lanes.values()
        held = sum(1 for lane in lanes if lane.holds_slot)
        asking = sum(1 for lane in lanes if lane.phase == BUDGET)
        state = self.window.state
        status: JsonDict = {
            "capacity": self.options.capacity,
            "held": held,
            "asking": asking,
            "state": BUDGET if asking else "holding slots" if held else None,
            "waits": state.budget_waits,
            "lost": state.budget_lost,
        }
        self.credits.add_status(status)
        return status
