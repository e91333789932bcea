"""How a collection keeps the tenant budget's slots it was granted: handed on to its next chunk, renewed, never used
past its lease, given back when someone waits.

* **Handed on.** A lane that ends with its slot leaves it to the collection's next chunk without asking the entity
  (same holder id, same lease) when the entity's latest answer is younger than ``poll_seconds`` and said nobody
  waits; otherwise the next chunk's ``acquire`` carries the ``release`` of the ended lane's slot (one call, not
  two), and the entity gives the slot to whoever is entitled. With no chunk to start, the slot goes to a lane of
  the collection that waits (its poll timer cancelled, it asks again at once with the release folded in) or back to
  the budget with a one-way ``release``.
* **Kept across chunks** (``BudgetOptions.keep``, collections started since issue 28). A slot is handed on
  however long its chunk ran, while the budget's latest answer (a renewal's at least every third of a lease) says
  nobody waits; the first answer that says someone waits sends the next ended slot back through the budget (folded
  into the next chunk's ``acquire``, which queues behind the waiter), so collections of one tenant share the slots
  and none is starved.
* **Never past its lease.** Each server-side call carries the slot's deadline (its lease end as the entity last said,
  less ``BudgetOptions.margin_seconds``); a lane whose deadline has passed, or whose slot a renewal found gone, asks
  the budget again before its next call, keeping what it did so far (its query, its session cursor). The activity
  checks the deadline too (``shared.budget.slot_deadline``) and answers ``slot_expired`` instead of calling. A lane that
  does not get the same grant back lost its slot: ``budget.lost`` counts it.
* One ``renew_collection`` per ``renew_seconds`` (a third of the lease) renews every slot the collection holds: one
  timer and one call per period, whatever K; its answer carries the new lease end.
* **Riding on the lanes' episodes** (``BudgetOptions.ride``, window version 2). A renewal timer is an episode of its
  own (replaying the whole history) to send one call, while the lanes wake the window every few seconds to a minute.
  So the renewal is due at the same time but goes out with an episode near it. At the end of each episode: sent if
  due; else, if a lane will wake the window by ``RIDE_SLACK`` of a period after the due time (its timer, its
  ``acquire`` in flight, or its waiting Graph status check, bounded by ``poll_wait`` and ``CHECK_RETURN_MARGIN``),
  left for that episode, which decides again; else sent now if at most the slack early, else its own timer is set at
  the due time (once per execution). So the renewal is never more than the slack late or early (the lease is three
  periods long). Twice the slack exceeds a waiting check's bound, so the check a lane calls in the last episode
  before the slack's start always counts.
* The renewal's due time is carried across continue-as-new, like every lane (holder ids stay the same because lane
  numbers do); an entity's answer reaches only the execution that asked, so no entity call may be in flight when an
  execution ends: an ``acquire`` in flight keeps its lane busy, a renewal in flight keeps the window busy.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from shared.budget.wire import BudgetOptions
from shared.models import JsonDict, iso, parse_iso
from shared.window.budget_calls import BudgetCalls
from shared.window.budget_host import BudgetHost, queued
from shared.window.state import BUDGET, RENEW, Cancel, Lane, Slot, Step, Wait, later

RIDE_SLACK = 0.2
"""``ride``: how late a renewal may go out waiting for a lane's episode, and how early it may go out rather than set a
timer of its own, as a share of the renewal period (40 s of a 600 s lease's 200 s; the lease is three periods long).
Twice it exceeds a waiting status check's bound (60 s and ``CHECK_RETURN_MARGIN``: 75 s) at the deployed lease."""

CHECK_RETURN_MARGIN = 15.0
"""``ride``: seconds a waiting Graph status check (``activities.graph_waits``) is allowed past its wait to return. It
waits at most ``RunOptions.poll_wait`` from its start, makes no check due past that, and its last check is one
status request (seconds at most, against the 60 s HTTP timeout: a request that hangs longer makes the renewal late
by as much, never the slot used past its lease, which the activity checks before each request). The margin covers
that request, the activity's start after it was called and the delivery of its result. A check that finds its query
finished exports it in the same call, which can take longer; the renewal then goes out when it returns (the lease
leaves two periods for it)."""


class SlotKeeper:
    """The collection's granted slots: which one a new chunk may take, their deadlines and renewals, giving back."""

    def __init__(self, window: BudgetHost, options: BudgetOptions, calls: BudgetCalls) -> None:
        self.window = window
        self.options = options
        self.calls = calls
        self.renewing = False
        """The collection-wide renewal is in flight (an entity call of this execution)."""
        self.renew_holders: list[str] = []
        """The holders that renewal names (only their leases move to its answer's ``leaseUntil``)."""
        self.timer_set = False
        """``ride``: this execution set a renewal timer that has not fired yet."""

    @property
    def spares(self) -> list[Slot]:
        """Slots of lanes that ended, not yet handed on (``fill`` settles them; a switch carries them)."""
        return self.window.state.spares

    # --- handing on -------------------------------------------------------------------------------------------
    def may_hand_on(self, spare: Slot) -> bool:
        """The entity's latest answer is younger than a poll and said nobody waits, and the chunk that ended kept
        the slot for at most a poll. A waiter that queued since that answer is therefore passed over only by chunks
        that end within about a poll, and is served at most about two polls later than if every slot went back
        through the budget (it asks again only every poll anyway); chunks longer than a poll never hand on."""
        if self.options.keep:  # however long the chunk ran: a waiter is seen at the next renewal at the latest
            return self.nobody_waits()
        poll = timedelta(seconds=self.options.poll_seconds)
        short = spare.since is not None and self.window.now - spare.since <= poll
        return short and self.nobody_waits()

    def nobody_waits(self) -> bool:
        """The entity's latest answer is recent and said nobody (of any collection) waits: younger than a poll, or
        with ``keep`` younger than a renewal period and a poll (the renewal answers at least that often)."""
        state = self.window.state
        seen = state.budget_seen_at
        horizon = self.options.poll_seconds + (self.options.renew_seconds if self.options.keep else 0.0)
        if self.options.ride:  # a renewal may ride up to its slack late
            horizon += RIDE_SLACK * self.options.renew_seconds
        fresh = seen is not None and self.window.now - seen <= timedelta(seconds=horizon)
        return fresh and state.budget_waiting == 0 and queued(self.window.lanes.values()) is None

    # --- the lease --------------------------------------------------------------------------------------------
    def uses_slot(self, lane: Lane) -> bool:
        """The lane's next call does server-side work under its slot (a budget is kept)."""
        return self.options.enabled and self.window.source.uses_slot(lane.phase)

    def needs_slot(self, lane: Lane) -> bool:
        """The lane's next call uses its slot, and the slot is gone or its deadline has passed."""
        if not self.uses_slot(lane):
            return False
        deadline = self._deadline(lane)
        return not lane.holds_slot or deadline is None or self.window.now >= deadline

    def _deadline(self, lane: Lane) -> datetime | None:
        if lane.slot is None or lane.slot.lease_until is None:
            return None
        return lane.slot.lease_until - timedelta(seconds=self.options.margin_seconds)

    def slot_fields(self, lane: Lane) -> tuple[str | None, bool | None]:
        """What the activity checks before each request: the slot's deadline and whether pages are checked (None: no
        deadline known)."""
        deadline = self._deadline(lane)
        if deadline is None:
            return None, None
        assert lane.slot is not None
        pages, lane.slot.pages_free = not lane.slot.pages_free, False
        return iso(deadline), pages

    # --- giving slots back ------------------------------------------------------------------------------------
    def give_back(self, lane: Lane) -> list[Step]:
        """A lane ended: a slot it holds is kept for the collection's next chunk (``fill`` settles it); a queue
        place, a slot of a doomed collection, or a slot whose deadline passed is given back at once."""
        if lane.holds_slot and lane.slot is not None and self.window.state.doomed is None:
            self.spares.append(lane.slot)
            lane.holds_slot = False
            return []
        if not (lane.holds_slot or lane.phase == BUDGET):
            return []
        lane.holds_slot = False
        return [self.calls.release(self.calls.holder(lane))]

    def settle_spares(self) -> list[Step]:
        """Slots no new chunk took: kept for the next execution while the window switches and nobody waits (as far
        as the entity's latest answer, younger than a poll, tells); otherwise to the collection's waiting lane (its
        timer cancelled, it asks again now with the release folded in), or back to the budget, where a waiter takes
        it at its next poll instead of it idling through the switch."""
        steps: list[Step] = []
        switching = self.window.switching
        if switching and self.nobody_waits():
            return steps
        while self.spares:
            spare = self.spares.pop(0)
            waiter = queued(self.window.lanes.values())
            # a queued lane asks again at once; one waiting for the quota does not (a slot does not end its wait)
            if waiter is not None and waiter.quota_until is None and _may_ask_now(waiter, switching):
                steps += [Cancel(waiter.id), self.calls.acquire(waiter, release=spare)]
            else:
                steps.append(self.calls.release(self.calls.slot_holder(spare)))
        return steps

    # --- renewals ---------------------------------------------------------------------------------------------
    def keep_renewing(self) -> list[Step]:
        """Start the collection's renewal timer if none is pending: one renewal for all its slots per period."""
        state = self.window.state
        if state.renew_due is not None or self.renewing:
            return []
        state.renew_due = later(self.window.now, self.options.renew_seconds)
        if self.options.ride:  # ``ride`` decides at the end of the episode: a lane's timer or one of its own
            return []
        return [Wait(RENEW, state.renew_due)]

    def resumed(self) -> list[Step]:
        """A new execution: the renewal timer of the previous one again (or the renewal, if due); ``ride`` decides at
        the end of the episode instead."""
        due = self.window.state.renew_due
        if due is None or self.options.ride:
            return []
        return [Wait(RENEW, due)] if due > self.window.now else self.renew()

    def timer_fired(self) -> list[Step]:
        """The renewal timer fired: renew (with ``ride``, unless a lane's episode sent the renewal already)."""
        if not self.options.ride:
            return self.renew()
        self.timer_set = False
        due = self.window.state.renew_due
        if due is None or self.renewing or self.window.now < due:
            return []
        return self.renew()

    def ride(self) -> list[Step]:
        """``ride``, at the end of every episode: the renewal if it is due, else its own timer unless a lane's timer
        (one that will fire in this execution) is due before the renewal's slack ends."""
        due = self.window.state.renew_due
        if not self.options.ride or due is None or self.renewing:
            return []
        if self.window.now >= due:
            return self.renew()
        slack = timedelta(seconds=RIDE_SLACK * self.options.renew_seconds)
        wakes = self._lane_wakes_before(due + slack)
        if not wakes and self.window.now >= due - slack:
            return self.renew()  # up to the slack early rather than a timer of its own: the lease is 3 periods long
        if self.timer_set or wakes:
            return []
        self.timer_set = True
        return [Wait(RENEW, due)]

    def _lane_wakes_before(self, limit: datetime) -> bool:
        """A lane will wake this execution by ``limit``: its timer is due by then (a switching window parks its lanes'
        timers), or it waits for the budget's answer to its ``acquire`` (the same entity would answer the renewal only
        after it: one entity runs its operations in order), or its waiting Graph status check (version 2: a lane
        with a query, in a phase that uses its slot) must return by then: called at ``issued_at``, it waits at most
        ``poll_wait`` and ``CHECK_RETURN_MARGIN`` more. Any other activity in flight may take longer: not counted."""
        if self.window.switching:
            return False
        now = self.window.now
        wait = self.window.spec.options.poll_wait
        for lane in self.window.lanes.values():
            if lane.parked:
                continue
            if lane.issued_at is None and lane.due is not None and now < lane.due <= limit:
                return True
            if lane.issued_at is not None and lane.phase == BUDGET:
                return True
            checking = wait > 0 and lane.query_id is not None and self.uses_slot(lane)  # a Graph status check
            issued = lane.issued_at
            if checking and issued is not None and later(issued, wait + CHECK_RETURN_MARGIN) <= limit:
                return True
        return False

    def renew(self) -> list[Step]:
        self.window.state.renew_due = None
        holders = [self.calls.holder(lane) for lane in self.window.lanes.values() if lane.holds_slot]
        holders += [self.calls.slot_holder(spare) for spare in self.spares]
        if not holders:
            return []
        self.renewing, self.renew_holders = True, holders
        return [self.calls.renew(holders)]

    def renewed(self, answer: JsonDict | None) -> list[Step]:
        """The renewed slots get the answer's lease end; a slot found lost (its lease ran out unrenewed) is counted
        and its lane asks for a slot again before its next call."""
        self.renewing = False
        lanes = self.window.lanes
        if answer is not None:
            self.calls.learn(answer)
            lost = set(answer.get("lost") or [])
            until = answer.get("leaseUntil")
            for lane in lanes.values():
                holder = self.calls.holder(lane)
                if not lane.holds_slot or lane.slot is None or holder not in self.renew_holders:
                    continue
                if holder in lost:
                    lane.holds_slot, lane.slot.grant = False, None
                    self.window.state.budget_lost += 1
                elif isinstance(until, str):
                    lane.slot.lease_until = parse_iso(until)
            for spare in list(self.spares):  # a kept slot found gone is simply forgotten: no lane was using it
                holder = self.calls.slot_holder(spare)
                if holder in lost:
                    self.spares.remove(spare)
                elif holder in self.renew_holders and isinstance(until, str):
                    spare.lease_until = parse_iso(until)
        holding = self.spares or any(lane.holds_slot for lane in lanes.values())
        return self.keep_renewing() if holding else []


def _may_ask_now(lane: Lane, switching: bool) -> bool:
    return lane.issued_at is None and not lane.parked and not switching
