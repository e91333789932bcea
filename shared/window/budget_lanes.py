"""The window's side of the tenant budget: lanes take a slot before server-side work and give it back as they end.

A mixin of ``shared.window.machine.CollectionWindow`` (kept apart so both stay small), pure like it: it only returns
steps.

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
* **The tenant's daily Graph quota.** Before every Graph query it submits (its first, and any again) a lane takes a
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

from datetime import datetime, timedelta

from shared.budget.quota import wait_until
from shared.budget.wire import BudgetOptions, BudgetRequest, holder_id
from shared.models import ActivityError, JsonDict, iso, parse_iso
from shared.requests.collection_spec import CollectionSpec
from shared.window.state import (
    BUDGET,
    COLLECT,
    POLL,
    RENEW,
    SUBMIT,
    CallActivity,
    CallEntity,
    Cancel,
    Carried,
    Lane,
    RunOptions,
    SignalEntity,
    Slot,
    Step,
    Wait,
    later,
)

QUOTA_WAIT = "waiting for the tenant's daily Graph quota"
"""The budget state while a lane waits for the quota (followed by " until <time>")."""
SERVER_PHASES = frozenset({SUBMIT, POLL, COLLECT})
"""Phases whose calls use the lane's slot (a DELETE ends a query: it needs none)."""


class BudgetLanes:
    """Budget steps of the window; ``CollectionWindow`` provides the state and the lane transitions used here."""

    spec: CollectionSpec
    state: Carried
    lanes: dict[int, Lane]
    now: datetime
    renewing: bool
    """The collection-wide renewal is in flight (an entity call of this execution)."""
    renew_holders: list[str]
    """The holders that renewal names (only their leases move to its answer's ``leaseUntil``)."""
    free_slots: int
    """Slots the budget's latest answer left free with nobody waiting: how many lanes may ask at once."""
    budget: BudgetOptions
    """The collection's ``RunOptions.budget`` (built once: the window runs again on every replay)."""
    budget_token: str
    """The collection's token, sent with every operation (from the orchestration input; "" without a secret)."""

    @property
    def options(self) -> RunOptions:
        raise NotImplementedError

    @property
    def switching(self) -> bool:
        raise NotImplementedError

    @property
    def spares(self) -> list[Slot]:
        """Slots of lanes that ended, not yet handed on (``fill`` settles them; a switch carries them)."""
        return self.state.spares

    def _next_call(self, lane: Lane) -> list[Step]:
        raise NotImplementedError

    def _wait(self, lane: Lane, until: datetime) -> list[Step]:
        raise NotImplementedError

    def _error(self, lane: Lane, error: ActivityError) -> list[Step]:
        raise NotImplementedError

    def _conclude(self, lane: Lane, ending: tuple[str, object]) -> list[Step]:
        raise NotImplementedError

    def _call(self, lane: Lane) -> CallActivity | CallEntity:
        raise NotImplementedError

    # --- starting a lane --------------------------------------------------------------------------------------
    def _may_ask(self) -> bool:
        """Whether a new lane may start: no lane of this collection waits in the budget's queue, and a slot of an
        ended lane is at hand or fewer lanes ask than the latest answer left slots free (one at a time when nothing
        is known), so lanes rarely ask for slots that are not there."""
        if not self.budget.enabled:
            return True
        if self._queued() is not None:
            return False
        asking = sum(1 for lane in self.lanes.values() if lane.phase == BUDGET)
        return bool(self.spares) or asking < max(1, self.free_slots)

    def _take_slot(self, lane: Lane) -> list[Step]:
        """A new lane's first step: the slot of a lane that just ended when nobody waits for it, else ``acquire``
        (with that slot's release folded in)."""
        spare = self.spares.pop(0) if self.spares else None
        if spare is not None and self._may_hand_on(spare) and not self._wants_credit(lane):
            lane.slot, lane.holds_slot = spare, True
            spare.since = self.now
            return [self._call(lane)]
        lane.phase = BUDGET
        return [self._acquire(lane, release=spare)]

    def _may_hand_on(self, spare: Slot) -> bool:
        """The entity's latest answer is younger than a poll and said nobody waits, and the chunk that ended kept
        the slot for at most a poll. A waiter that queued since that answer is therefore passed over only by chunks
        that end within about a poll, and is served at most about two polls later than if every slot went back
        through the budget (it asks again only every poll anyway); chunks longer than a poll never hand on."""
        poll = timedelta(seconds=self.budget.poll_seconds)
        short = spare.since is not None and self.now - spare.since <= poll
        return short and self._nobody_waits()

    def _nobody_waits(self) -> bool:
        """The entity's latest answer is younger than a poll and said nobody (of any collection) waits."""
        seen = self.state.budget_seen_at
        fresh = seen is not None and self.now - seen <= timedelta(seconds=self.budget.poll_seconds)
        return fresh and self.state.budget_waiting == 0 and self._queued() is None

    def _needs_slot(self, lane: Lane) -> bool:
        """The lane's next call uses its slot, and the slot is gone or its deadline has passed."""
        if not self.budget.enabled or lane.phase not in SERVER_PHASES:
            return False
        deadline = self._deadline(lane)
        return not lane.holds_slot or deadline is None or self.now >= deadline

    def _deadline(self, lane: Lane) -> datetime | None:
        if lane.slot is None or lane.slot.lease_until is None:
            return None
        return lane.slot.lease_until - timedelta(seconds=self.budget.margin_seconds)

    def _slot_payload(self, lane: Lane) -> JsonDict:
        """What the activity checks before each request: the slot's deadline (and whether pages are checked)."""
        deadline = self._deadline(lane)
        if deadline is None:
            return {}
        assert lane.slot is not None
        pages, lane.slot.pages_free = not lane.slot.pages_free, False
        return {"slotDeadline": iso(deadline), "slotPages": pages}

    def _wants_credit(self, lane: Lane) -> bool:
        """The lane's next server-side call submits a Graph query and it holds no quota credit for it."""
        return self.budget.keeps_quota and self._resume_phase(lane) == SUBMIT and not lane.credited

    def _needs_credit(self, lane: Lane) -> bool:
        """The lane is about to submit a Graph query without a quota credit (its first, or a submission again)."""
        return self.budget.keeps_quota and lane.phase == SUBMIT and not lane.credited

    def _ask_credit(self, lane: Lane) -> CallEntity:
        """A credit (and the slot, renewed when held) in one ``acquire`` before the lane submits."""
        lane.phase = BUDGET
        lane.budget_waits = 0
        return self._acquire(lane)

    def _spend_credit(self, lane: Lane) -> None:
        """The lane's submit is issued: its credit is used (a submission again needs another)."""
        lane.credited, lane.submission = False, 0

    def _ask_again(self, lane: Lane) -> CallEntity:
        """The lane's slot is gone or its deadline passed: back to the queue with what it did so far."""
        lane.holds_slot = False
        lane.phase = BUDGET
        lane.budget_waits = 0
        return self._acquire(lane)

    # --- answers ----------------------------------------------------------------------------------------------
    def on_budget(self, lane_id: int, answer: JsonDict | None) -> list[Step]:
        """The tenant budget answered a lane's ``acquire`` (or the collection's renewal); ``None``: the call failed."""
        if lane_id == RENEW:
            return self._renewed(answer)
        lane = self.lanes[lane_id]
        lane.issued_at = lane.due = None
        if answer is None:
            return self._error(lane, ActivityError("budget_unavailable", "the tenant budget entity did not answer"))
        self._learn(answer)
        granted = bool(answer.get("granted"))
        quota_until = answer.get("quotaUntil") if not granted else None
        if isinstance(quota_until, str):  # the daily quota is spent: the entity took its slot back, no loss
            lane.holds_slot = False
            if lane.slot is not None:
                lane.slot.grant = None
            lane.quota_until = parse_iso(quota_until)
            self.state.quota_waits += 1
        self._count_loss(lane, answer)
        if granted:
            lane.quota_until = None
            # its credit: the entity says so, or keeps no quota (it then counts nothing, and the lane must not ask
            # again for ever); an acquire that carried no submission takes none
            credit = answer.get("credit") == lane.submission or "quota" not in answer
            lane.credited = lane.credited or (lane.submission > 0 and credit)
            until = answer.get("leaseUntil")
            grant = answer.get("grant")
            lane.slot = Slot(
                self._holder_number(lane),
                parse_iso(until) if isinstance(until, str) else None,
                int(grant) if isinstance(grant, int) else None,
                since=self.now,
            )
            lane.holds_slot = True
        if self.state.doomed is not None:  # nothing more starts: the chunk stays for a retry
            return self._conclude(lane, ("unstarted", None))
        lane.step_failures = 0
        if granted:
            lane.phase = self._resume_phase(lane)
            return self._next_call(lane) + self._keep_renewing()
        lane.budget_waits += 1
        self.state.budget_waits += 1
        queued = self._queued()
        if queued is not None and queued is not lane and not _has_progress(lane):
            return self._conclude(lane, ("unstarted", None))  # one lane per collection waits; this chunk waits
        if lane.quota_until is not None:
            margin, poll = self.budget.margin_seconds, self.budget.poll_seconds
            return self._wait(lane, wait_until(lane.quota_until, self.now, margin, poll))
        return self._wait(lane, later(self.now, self.budget.poll_seconds))

    def _slot_expired(self, lane: Lane, error: ActivityError) -> list[Step]:
        """The activity found the slot's deadline passed and sent nothing (or stopped between pages). Once the
        window sees it passed too, the lane asks the budget again. If the window has seen the lease renewed since
        the call was sent, the call goes again after a back-off, without the page check (so an export longer than
        a lease ends); counted as a failed step, so an activity that keeps refusing a lease the window sees renewed
        (a worker clock ahead by more than the margin) ends after the attempts instead of looping."""
        if self._needs_slot(lane):
            return self._next_call(lane)
        if lane.slot is not None:
            lane.slot.pages_free = True
        return self._error(lane, error)

    def _count_loss(self, lane: Lane, answer: JsonDict) -> None:
        """A lane that asked again with a slot it held counts a loss unless it got the same grant back."""
        if lane.slot is None or lane.slot.grant is None:
            return
        if not answer.get("granted") or answer.get("grant") != lane.slot.grant:
            self.state.budget_lost += 1
        lane.slot.grant = None

    def _learn(self, answer: JsonDict) -> None:
        quota = answer.get("quota")
        if isinstance(quota, dict):
            self.state.budget_quota = dict(quota)
        if all(isinstance(answer.get(key), int) for key in ("capacity", "held", "waiting")):
            self.free_slots = int(answer["capacity"]) - int(answer["held"]) - int(answer["waiting"])
            self.state.budget_waiting = int(answer["waiting"])
            self.state.budget_seen_at = self.now

    def _resume_phase(self, lane: Lane) -> str:
        """Where a granted lane goes on: its first step, or the one it stopped at when its slot was lost."""
        if self.spec.source == "graph":
            return POLL if lane.query_id is not None else SUBMIT
        return COLLECT

    def _first_phase(self) -> str:
        return SUBMIT if self.spec.source == "graph" else COLLECT

    def _queued(self) -> Lane | None:
        """The lane that waits for tenant budget (answered "queued"): at most one per collection."""
        return next((lane for lane in self.lanes.values() if lane.phase == BUDGET and lane.budget_waits), None)

    # --- giving slots back ------------------------------------------------------------------------------------
    def _give_back(self, lane: Lane) -> list[Step]:
        """A lane ended: a slot it holds is kept for the collection's next chunk (``fill`` settles it); a queue
        place, a slot of a doomed collection, or a slot whose deadline passed is given back at once."""
        if lane.holds_slot and lane.slot is not None and self.state.doomed is None:
            self.spares.append(lane.slot)
            lane.holds_slot = False
            return []
        if not (lane.holds_slot or lane.phase == BUDGET):
            return []
        lane.holds_slot = False
        return [self._release_signal(self._holder(lane))]

    def _settle_spares(self) -> list[Step]:
        """Slots no new chunk took: kept for the next execution while the window switches and nobody waits (as far
        as the entity's latest answer, younger than a poll, tells); otherwise to the collection's waiting lane (its
        timer cancelled, it asks again now with the release folded in), or back to the budget, where a waiter takes
        it at its next poll instead of it idling through the switch."""
        steps: list[Step] = []
        if self.switching and self._nobody_waits():
            return steps
        while self.spares:
            spare = self.spares.pop(0)
            queued = self._queued()
            # a queued lane asks again at once; one waiting for the quota does not (a slot does not end its wait)
            if queued is not None and queued.quota_until is None and self._may_ask_now(queued):
                steps += [Cancel(queued.id), self._acquire(queued, release=spare)]
            else:
                steps.append(self._release_signal(holder_id(self.spec.collection_id, spare.holder)))
        return steps

    def _may_ask_now(self, lane: Lane) -> bool:
        return lane.issued_at is None and not lane.parked and not self.switching

    def _release_signal(self, holder: str) -> SignalEntity:
        return SignalEntity("release", BudgetRequest("release", holder, token=self.budget_token).to_json())

    # --- renewals ---------------------------------------------------------------------------------------------
    def _keep_renewing(self) -> list[Step]:
        """Start the collection's renewal timer if none is pending: one renewal for all its slots per period."""
        if self.state.renew_due is not None or self.renewing:
            return []
        self.state.renew_due = later(self.now, self.budget.renew_seconds)
        return [Wait(RENEW, self.state.renew_due)]

    def _renew(self) -> list[Step]:
        self.state.renew_due = None
        holders = [self._holder(lane) for lane in self.lanes.values() if lane.holds_slot]
        holders += [holder_id(self.spec.collection_id, spare.holder) for spare in self.spares]
        if not holders:
            return []
        self.renewing, self.renew_holders = True, holders
        request = self.budget.renew_collection(self.spec.collection_id, holders, token=self.budget_token)
        return [CallEntity(RENEW, "renew_collection", request.to_json())]

    def _renewed(self, answer: JsonDict | None) -> list[Step]:
        """The renewed slots get the answer's lease end; a slot found lost (its lease ran out unrenewed) is counted
        and its lane asks for a slot again before its next call."""
        self.renewing = False
        if answer is not None:
            self._learn(answer)
            lost = set(answer.get("lost") or [])
            until = answer.get("leaseUntil")
            for lane in self.lanes.values():
                holder = self._holder(lane)
                if not lane.holds_slot or lane.slot is None or holder not in self.renew_holders:
                    continue
                if holder in lost:
                    lane.holds_slot, lane.slot.grant = False, None
                    self.state.budget_lost += 1
                elif isinstance(until, str):
                    lane.slot.lease_until = parse_iso(until)
            for spare in list(self.spares):  # a kept slot found gone is simply forgotten: no lane was using it
                holder = holder_id(self.spec.collection_id, spare.holder)
                if holder in lost:
                    self.spares.remove(spare)
                elif holder in self.renew_holders and isinstance(until, str):
                    spare.lease_until = parse_iso(until)
        holding = self.spares or any(lane.holds_slot for lane in self.lanes.values())
        return self._keep_renewing() if holding else []

    # --- requests ---------------------------------------------------------------------------------------------
    def _holder_number(self, lane: Lane) -> int:
        return lane.slot.holder if lane.slot is not None else lane.id

    def _holder(self, lane: Lane) -> str:
        return holder_id(self.spec.collection_id, self._holder_number(lane))

    def _acquire(self, lane: Lane, release: Slot | None = None) -> CallEntity:
        lane.issued_at = self.now
        released = holder_id(self.spec.collection_id, release.holder) if release is not None else ""
        if self._wants_credit(lane) and not lane.submission:  # a number of its own, kept until it is granted
            self.state.submissions += 1
            lane.submission = self.state.submissions
        submit = lane.submission if self._wants_credit(lane) else 0
        request = self.budget.acquire(self._holder(lane), token=self.budget_token, release=released, submit=submit)
        return CallEntity(lane.id, "acquire", request.to_json())

    def _budget_status(self) -> JsonDict | None:
        """The custom status's ``budget``: slots held, lanes asking for one, and "waiting for tenant budget" while a
        lane waits (``waits``: times a lane was answered "queued"; ``lost``: slots taken away from a lane that still
        had work)."""
        if not self.budget.enabled:
            return None
        held = sum(1 for lane in self.lanes.values() if lane.holds_slot)
        asking = sum(1 for lane in self.lanes.values() if lane.phase == BUDGET)
        status: JsonDict = {
            "capacity": self.budget.capacity,
            "held": held,
            "asking": asking,
            "state": BUDGET if asking else "holding slots" if held else None,
            "waits": self.state.budget_waits,
            "lost": self.state.budget_lost,
        }
        if self.budget.keeps_quota:
            waits = [lane.quota_until for lane in self.lanes.values() if lane.phase == BUDGET and lane.quota_until]
            until = min(waits) if waits else None
            if until is not None:
                status["state"] = f"{QUOTA_WAIT} until {iso(until)}"
            status["quota"] = {
                **(self.state.budget_quota or {"allowed": self.budget.quota}),
                "waitingUntil": iso(until) if until else None,
                "waits": self.state.quota_waits,
                "submissions": self.state.submissions,
            }
        return status


def _has_progress(lane: Lane) -> bool:
    """The lane did server-side work it would lose by giving its chunk back (a query, a session cursor)."""
    return lane.query_id is not None or lane.cursor is not None
