"""The window's side of the tenant budget: lanes take a slot before server-side work and give it back as they end.

An object the window holds (``CollectionWindow.budget``), pure like it: it only returns steps, and acts on lanes through
the window (``BudgetHost``): the lane transitions, and the source's lanes for where a granted lane goes on.

* A lane begins in ``BUDGET`` ("waiting for tenant budget") and asks the ``tenant_budget`` entity to ``acquire``
  a slot for its holder id ``<collection>/<lane>``; the answer is a grant or a queue place, in one call. Granted, the
  lane starts its first server-side step; queued, it asks again after ``poll_seconds`` (a durable timer: an entity
  cannot call back). At most one lane of a collection waits: while it does, no other lane starts, and a second lane
  answered "queued" (or "refused": the entity keeps one queue entry per collection) gives back its turn and its
  chunk (which waits unstarted, first in line). So a waiting collection costs one timer and one entity call per poll.
* **Handed on.** A lane that ends with its slot leaves it to the collection's next chunk without asking the entity
  (same holder id, same lease) when the entity's latest answer is younger than ``poll_seconds`` and said nobody
  waits; otherwise the next chunk's ``acquire`` carries the ``release`` of the ended lane's slot (one call, not
  two), and the entity gives the slot to whoever is entitled. With no chunk to start, the slot goes to a lane of
  the collection that waits (its poll timer cancelled, it asks again at once with the release folded in) or back to
  the budget with a one-way ``release``.
* **Never past its lease.** Each server-side call carries the slot's deadline (its lease end as the entity last said,
  less ``BudgetOptions.margin_seconds``); a lane whose deadline has passed, or whose slot a renewal found gone, asks
  the budget again before its next call, keeping what it did so far (its query, its session cursor). The activity
  checks the deadline too (``shared.budget.slot_deadline``) and answers ``slot_expired`` instead of calling. A lane that
  does not get the same grant back lost its slot: ``budget.lost`` counts it.
* One ``renew_collection`` per ``renew_seconds`` (a third of the lease) renews every slot the collection holds: one
  timer and one call per period, whatever K; its answer carries the new lease end.
* The renewal's due time is carried across continue-as-new, like every lane (holder ids stay the same because lane
  numbers do); an entity's answer reaches only the execution that asked, so no entity call may be in flight when an
  execution ends: an ``acquire`` in flight keeps its lane busy, a renewal in flight keeps the window busy.
* Every operation carries the collection's token (``shared.budget.token``) from the orchestration input.
* **Kept across chunks** (``BudgetOptions.keep``, collections started since issue 28). A slot is handed on
  however long its chunk ran, while the budget's latest answer (a renewal's at least every third of a lease) says
  nobody waits; the first answer that says someone waits sends the next ended slot back through the budget (folded
  into the next chunk's ``acquire``, which queues behind the waiter), so collections of one tenant share the slots
  and none is starved. Graph credits come a few at once (``CREDIT_BATCH``), kept in ``Carried.credits`` and spent by
  the next submissions without a call; the run's unspent ones go back with its closing ``release_collection``.
* **The tenant's daily Graph quota.** Before every query it submits (its first, and any again: a phase its source's
  ``SourceLanes.submits`` names, Graph's submit; the budget keeps a quota only for a source with one) a lane takes a
  submission credit with the ``acquire`` that gives it its slot (``submit``: a number unique in the collection, so a
  re-sent ``acquire`` takes it once); a slot it holds already is renewed by the same call. A lane whose next call
  submits never takes a slot handed on without asking. When the tenant's allowance is spent the answer says until
  when (``quotaUntil``): the lane gives its slot back and waits on a durable timer until then ("waiting for the
  tenant's daily Graph quota until <time>" in the custom status), then asks again; like a queued lane it is the
  collection's one waiter. Never a loop, never an error that fails the chunk.

With a budget of 0 (``RunOptions.budget_capacity``, also what an input written before the budget reads as) none of
this runs: lanes start in their first server-side phase and nothing is sent to the entity.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Protocol

from shared.budget.quota import wait_until
from shared.budget.wire import BudgetOptions, BudgetRequest, holder_id
from shared.models import ActivityError, JsonDict, iso, parse_iso
from shared.requests.collection_spec import CollectionSpec
from shared.window.lanes import SourceLanes
from shared.window.state import (
    BUDGET,
    RENEW,
    CallActivity,
    CallEntity,
    Cancel,
    Carried,
    Lane,
    SignalEntity,
    Slot,
    Step,
    Wait,
    later,
)

CREDIT_BATCH = 8
"""``BudgetOptions.keep``: the most daily-quota credits a collection takes with one ``acquire`` (no more than it has
chunks left to start, plus the lane's own): a lane that keeps its slot then submits its next queries without asking
the budget. What the run did not spend goes back when it ends."""

QUOTA_WAIT = "waiting for the tenant's daily Graph quota"
"""The budget state while a lane waits for the quota (followed by " until <time>")."""


class BudgetHost(Protocol):
    """The window as its budget sees it: its lanes and state, the lane transitions, its source's lanes."""

    @property
    def now(self) -> datetime: ...

    @property
    def spec(self) -> CollectionSpec: ...

    @property
    def state(self) -> Carried: ...

    @property
    def lanes(self) -> Mapping[int, Lane]: ...

    @property
    def source(self) -> SourceLanes: ...

    @property
    def switching(self) -> bool: ...

    def next_call(self, lane: Lane) -> list[Step]: ...

    def wait(self, lane: Lane, until: datetime) -> list[Step]: ...

    def error(self, lane: Lane, error: ActivityError) -> list[Step]: ...

    def conclude(self, lane: Lane, ending: tuple[str, object]) -> list[Step]: ...

    def call(self, lane: Lane) -> CallActivity | CallEntity: ...


class LaneBudget:
    """The collection's slots of the tenant budget: when a lane may start, asks, holds, hands on and gives back."""

    def __init__(self, window: BudgetHost, options: BudgetOptions, token: str) -> None:
        self.window = window
        self.options = options
        """The collection's ``RunOptions.budget`` (built once: the window runs again on every replay)."""
        self.token = token
        """The collection's token, sent with every operation (from the orchestration input; "" without a secret)."""
        self.free_slots = 1
        """Slots the budget's latest answer left free with nobody waiting: how many lanes may ask at once (one before
        any answer)."""
        self.renewing = False
        """The collection-wide renewal is in flight (an entity call of this execution)."""
        self.renew_holders: list[str] = []
        """The holders that renewal names (only their leases move to its answer's ``leaseUntil``)."""

    @property
    def enabled(self) -> bool:
        return self.options.enabled

    @property
    def spares(self) -> list[Slot]:
        """Slots of lanes that ended, not yet handed on (``fill`` settles them; a switch carries them)."""
        return self.window.state.spares

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
        if self.wants_credit(lane):
            self.kept_credit(lane)
        if spare is not None and self._may_hand_on(spare) and not self.wants_credit(lane):
            lane.slot, lane.holds_slot = spare, True
            spare.since = self.window.now
            return [self.window.call(lane)]
        lane.phase = BUDGET
        return [self.acquire(lane, release=spare)]

    def _may_hand_on(self, spare: Slot) -> bool:
        """The entity's latest answer is younger than a poll and said nobody waits, and the chunk that ended kept
        the slot for at most a poll. A waiter that queued since that answer is therefore passed over only by chunks
        that end within about a poll, and is served at most about two polls later than if every slot went back
        through the budget (it asks again only every poll anyway); chunks longer than a poll never hand on."""
        if self.options.keep:  # however long the chunk ran: a waiter is seen at the next renewal at the latest
            return self._nobody_waits()
        poll = timedelta(seconds=self.options.poll_seconds)
        short = spare.since is not None and self.window.now - spare.since <= poll
        return short and self._nobody_waits()

    def _nobody_waits(self) -> bool:
        """The entity's latest answer is recent and said nobody (of any collection) waits: younger than a poll, or
        with ``keep`` younger than a renewal period and a poll (the renewal answers at least that often)."""
        state = self.window.state
        seen = state.budget_seen_at
        horizon = self.options.poll_seconds + (self.options.renew_seconds if self.options.keep else 0.0)
        fresh = seen is not None and self.window.now - seen <= timedelta(seconds=horizon)
        return fresh and state.budget_waiting == 0 and self.queued() is None

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

    def wants_credit(self, lane: Lane) -> bool:
        """The lane's next server-side call submits a query that costs a credit of the tenant's daily quota (its
        source says which phase does: Graph's submit) and it holds no credit for it."""
        source = self.window.source
        return self.options.keeps_quota and source.submits(source.resume_phase(lane)) and not lane.credited

    def needs_credit(self, lane: Lane) -> bool:
        """The lane is about to submit a query without a quota credit (its first, or a submission again)."""
        return self.options.keeps_quota and self.window.source.submits(lane.phase) and not lane.credited

    def kept_credit(self, lane: Lane) -> bool:
        """``keep``: the lane's submission spends a credit the collection took earlier (no entity call)."""
        state = self.window.state
        if not self.options.keep or state.credits <= 0:
            return False
        state.credits -= 1
        lane.credited = True
        return True

    def _credits_wanted(self) -> int:
        """How many credits an ``acquire`` asks for: with ``keep``, the lane's own and one per chunk still to start,
        at most ``CREDIT_BATCH``; otherwise one."""
        if not self.options.keep:
            return 0
        state = self.window.state
        unstarted = max(0, self.window.spec.planned - state.cursor) + len(state.requeued)
        return min(CREDIT_BATCH, 1 + unstarted)

    def ask_credit(self, lane: Lane) -> CallEntity:
        """A credit (and the slot, renewed when held) in one ``acquire`` before the lane submits."""
        lane.phase = BUDGET
        lane.budget_waits = 0
        return self.acquire(lane)

    def spend_credit(self, lane: Lane) -> None:
        """The lane's submit is issued: its credit is used (a submission again needs another)."""
        lane.credited, lane.submission = False, 0

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
            return self._renewed(answer)
        window = self.window
        lane = window.lanes[lane_id]
        lane.issued_at = lane.due = None
        if answer is None:
            return window.error(lane, ActivityError("budget_unavailable", "the tenant budget entity did not answer"))
        self._learn(answer)
        granted = bool(answer.get("granted"))
        quota_until = answer.get("quotaUntil") if not granted else None
        if isinstance(quota_until, str):  # the daily quota is spent: the entity took its slot back, no loss
            lane.holds_slot = False
            if lane.slot is not None:
                lane.slot.grant = None
            lane.quota_until = parse_iso(quota_until)
            window.state.quota_waits += 1
        self._count_loss(lane, answer)
        if granted:
            lane.quota_until = None
            # its credit: the entity says so, or keeps no quota (it then counts nothing, and the lane must not ask
            # again for ever); an acquire that carried no submission takes none
            credit = answer.get("credit") == lane.submission or "quota" not in answer
            taken = answer.get("credits")
            if self.options.keep and lane.submission > 0 and credit and not lane.credited and isinstance(taken, int):
                window.state.credits += max(0, taken - 1)  # the others are kept for the next submissions
            lane.credited = lane.credited or (lane.submission > 0 and credit)
            until = answer.get("leaseUntil")
            grant = answer.get("grant")
            lane.slot = Slot(
                self._holder_number(lane),
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
            return window.next_call(lane) + self._keep_renewing()
        lane.budget_waits += 1
        window.state.budget_waits += 1
        queued = self.queued()
        if queued is not None and queued is not lane and not window.source.has_progress(lane):
            return window.conclude(lane, ("unstarted", None))  # one lane per collection waits; this chunk waits
        if lane.quota_until is not None:
            margin, poll = self.options.margin_seconds, self.options.poll_seconds
            return window.wait(lane, wait_until(lane.quota_until, window.now, margin, poll))
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

    def _count_loss(self, lane: Lane, answer: JsonDict) -> None:
        """A lane that asked again with a slot it held counts a loss unless it got the same grant back."""
        if lane.slot is None or lane.slot.grant is None:
            return
        if not answer.get("granted") or answer.get("grant") != lane.slot.grant:
            self.window.state.budget_lost += 1
        lane.slot.grant = None

    def _learn(self, answer: JsonDict) -> None:
        quota = answer.get("quota")
        if isinstance(quota, dict):
            self.window.state.budget_quota = dict(quota)
        if all(isinstance(answer.get(key), int) for key in ("capacity", "held", "waiting")):
            state = self.window.state
            self.free_slots = int(answer["capacity"]) - int(answer["held"]) - int(answer["waiting"])
            state.budget_waiting = int(answer["waiting"])
            state.budget_seen_at = self.window.now

    def queued(self) -> Lane | None:
        """The lane that waits for tenant budget (answered "queued"): at most one per collection."""
        return next((lane for lane in self.window.lanes.values() if lane.phase == BUDGET and lane.budget_waits), None)

    # --- giving slots back ------------------------------------------------------------------------------------
    def give_back(self, lane: Lane) -> list[Step]:
        """A lane ended: a slot it holds is kept for the collection's next chunk (``fill`` settles it); a queue
        place, a slot of a doomed collection, or a slot whose deadline passed is given back at once."""
        if self.options.keep and lane.credited:  # a credit it did not spend stays with the collection
            self.window.state.credits += 1
            lane.credited = False
        if lane.holds_slot and lane.slot is not None and self.window.state.doomed is None:
            self.spares.append(lane.slot)
            lane.holds_slot = False
            return []
        if not (lane.holds_slot or lane.phase == BUDGET):
            return []
        lane.holds_slot = False
        return [self._release_signal(self._holder(lane))]

    def settle_spares(self) -> list[Step]:
        """Slots no new chunk took: kept for the next execution while the window switches and nobody waits (as far
        as the entity's latest answer, younger than a poll, tells); otherwise to the collection's waiting lane (its
        timer cancelled, it asks again now with the release folded in), or back to the budget, where a waiter takes
        it at its next poll instead of it idling through the switch."""
        steps: list[Step] = []
        switching = self.window.switching
        if switching and self._nobody_waits():
            return steps
        while self.spares:
            spare = self.spares.pop(0)
            queued = self.queued()
            # a queued lane asks again at once; one waiting for the quota does not (a slot does not end its wait)
            if queued is not None and queued.quota_until is None and _may_ask_now(queued, switching):
                steps += [Cancel(queued.id), self.acquire(queued, release=spare)]
            else:
                steps.append(self._release_signal(holder_id(self.window.spec.collection_id, spare.holder)))
        return steps

    def _release_signal(self, holder: str) -> SignalEntity:
        return SignalEntity("release", BudgetRequest("release", holder, token=self.token).to_json())

    # --- renewals ---------------------------------------------------------------------------------------------
    def _keep_renewing(self) -> list[Step]:
        """Start the collection's renewal timer if none is pending: one renewal for all its slots per period."""
        state = self.window.state
        if state.renew_due is not None or self.renewing:
            return []
        state.renew_due = later(self.window.now, self.options.renew_seconds)
        return [Wait(RENEW, state.renew_due)]

    def renew(self) -> list[Step]:
        self.window.state.renew_due = None
        collection = self.window.spec.collection_id
        holders = [self._holder(lane) for lane in self.window.lanes.values() if lane.holds_slot]
        holders += [holder_id(collection, spare.holder) for spare in self.spares]
        if not holders:
            return []
        self.renewing, self.renew_holders = True, holders
        request = self.options.renew_collection(collection, holders, token=self.token)
        return [CallEntity(RENEW, "renew_collection", request.to_json())]

    def _renewed(self, answer: JsonDict | None) -> list[Step]:
        """The renewed slots get the answer's lease end; a slot found lost (its lease ran out unrenewed) is counted
        and its lane asks for a slot again before its next call."""
        self.renewing = False
        lanes = self.window.lanes
        if answer is not None:
            self._learn(answer)
            lost = set(answer.get("lost") or [])
            until = answer.get("leaseUntil")
            for lane in lanes.values():
                holder = self._holder(lane)
                if not lane.holds_slot or lane.slot is None or holder not in self.renew_holders:
                    continue
                if holder in lost:
                    lane.holds_slot, lane.slot.grant = False, None
                    self.window.state.budget_lost += 1
                elif isinstance(until, str):
                    lane.slot.lease_until = parse_iso(until)
            for spare in list(self.spares):  # a kept slot found gone is simply forgotten: no lane was using it
                holder = holder_id(self.window.spec.collection_id, spare.holder)
                if holder in lost:
                    self.spares.remove(spare)
                elif holder in self.renew_holders and isinstance(until, str):
                    spare.lease_until = parse_iso(until)
        holding = self.spares or any(lane.holds_slot for lane in lanes.values())
        return self._keep_renewing() if holding else []

    # --- requests ---------------------------------------------------------------------------------------------
    def _holder_number(self, lane: Lane) -> int:
        return lane.slot.holder if lane.slot is not None else lane.id

    def _holder(self, lane: Lane) -> str:
        return holder_id(self.window.spec.collection_id, self._holder_number(lane))

    def acquire(self, lane: Lane, release: Slot | None = None) -> CallEntity:
        lane.issued_at = self.window.now
        released = holder_id(self.window.spec.collection_id, release.holder) if release is not None else ""
        wants_credit = self.wants_credit(lane)
        if wants_credit and not lane.submission:  # a number of its own, kept until it is granted
            self.window.state.submissions += 1
            lane.submission = self.window.state.submissions
        submit = lane.submission if wants_credit else 0
        credits = self._credits_wanted() if wants_credit else 0
        request = self.options.acquire(
            self._holder(lane), token=self.token, release=released, submit=submit, credits=credits
        )
        return CallEntity(lane.id, "acquire", request.to_json())

    def status(self) -> JsonDict | None:
        """The custom status's ``budget``: slots held, lanes asking for one, and "waiting for tenant budget" while a
        lane waits (``waits``: times a lane was answered "queued"; ``lost``: slots taken away from a lane that still
        had work)."""
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
        if self.options.keeps_quota:
            waits = [lane.quota_until for lane in lanes if lane.phase == BUDGET and lane.quota_until]
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
        return status


def _may_ask_now(lane: Lane, switching: bool) -> bool:
    return lane.issued_at is None and not lane.parked and not switching
