"""The window's side of the tenant budget: lanes take a slot before server-side work and give it back as they end.

A mixin of ``shared.window.CollectionWindow`` (kept apart so both stay small), pure like it: it only returns steps.

* A lane begins in ``BUDGET`` ("waiting for tenant budget") and asks the ``tenant_budget`` entity to ``acquire``
  a slot for its holder id ``<collection>/<lane>``; the answer is a grant or a queue place, in one call. Granted, the
  lane starts its first server-side step; queued, it asks again after ``poll_seconds`` (a durable timer: an entity
  cannot call back). At most one lane of a collection waits: while it does, no other lane starts, and a second lane
  answered "queued" gives back its queue place and its chunk (which waits unstarted, first in line). So a waiting
  collection costs one timer and one entity call per poll, not K.
* A lane gives back its slot (or queue place) wherever it ends (done, failed, split, unstarted) with a one-way
  ``release`` signal; when it held a slot and a lane of the same collection waits on its poll timer, that timer is
  cancelled and the lane asks again at once, after the release (one sender's operations reach an entity in order).
* One ``renew_collection`` per ``renew_seconds`` (a third of the lease) renews every slot the collection holds: one
  timer and one call per period, whatever K. A slot the entity no longer knows (its lease ran out unrenewed) is
  counted as lost; its lane goes on.
* The renewal's due time is carried across continue-as-new, like every lane (holder ids stay the same because lane
  numbers do); an entity's answer reaches only the execution that asked, so no entity call may be in flight when an
  execution ends: an ``acquire`` in flight keeps its lane busy, a renewal in flight keeps the window busy.

With a budget of 0 (``RunOptions.budget_capacity``, also what an input written before the budget reads as) none of
this runs: lanes start in their first server-side phase and nothing is sent to the entity.
"""

from __future__ import annotations

from datetime import datetime

from shared.budget_wire import BudgetOptions, holder_id
from shared.collection_spec import CollectionSpec
from shared.models import ActivityError, JsonDict
from shared.window_state import (
    BUDGET,
    COLLECT,
    RENEW,
    SUBMIT,
    CallEntity,
    Cancel,
    Carried,
    Lane,
    RunOptions,
    SignalEntity,
    Step,
    Wait,
    later,
)


class BudgetLanes:
    """Budget steps of the window; ``CollectionWindow`` provides the state and the lane transitions used here."""

    spec: CollectionSpec
    state: Carried
    lanes: dict[int, Lane]
    now: datetime
    renewing: bool
    """The collection-wide renewal is in flight (an entity call of this execution)."""
    free_slots: int
    """Slots the budget's latest answer left free with nobody waiting: how many lanes may ask at once."""
    budget: BudgetOptions
    """The collection's ``RunOptions.budget`` (built once: the window runs again on every replay)."""

    @property
    def options(self) -> RunOptions:
        raise NotImplementedError

    def _next_call(self, lane: Lane) -> list[Step]:
        raise NotImplementedError

    def _wait(self, lane: Lane, until: datetime) -> list[Step]:
        raise NotImplementedError

    def _error(self, lane: Lane, error: ActivityError) -> list[Step]:
        raise NotImplementedError

    def _conclude(self, lane: Lane, ending: tuple[str, object]) -> list[Step]:
        raise NotImplementedError

    def _may_ask(self) -> bool:
        """Whether a new lane may start (asking for a slot): no lane of this collection waits in the budget's queue,
        and fewer lanes ask than the latest answer left slots free (one at a time when nothing is known), so lanes
        rarely ask for slots that are not there."""
        if not self.budget.enabled:
            return True
        asking = [lane for lane in self.lanes.values() if lane.phase == BUDGET]
        return not any(lane.budget_waits for lane in asking) and len(asking) < max(1, self.free_slots)

    def _learn(self, answer: JsonDict) -> None:
        if all(isinstance(answer.get(key), int) for key in ("capacity", "held", "waiting")):
            self.free_slots = int(answer["capacity"]) - int(answer["held"]) - int(answer["waiting"])

    def _queued(self) -> Lane | None:
        """The lane that waits for tenant budget (answered "queued"): at most one per collection."""
        return next((lane for lane in self.lanes.values() if lane.phase == BUDGET and lane.budget_waits), None)

    def on_budget(self, lane_id: int, answer: JsonDict | None) -> list[Step]:
        """The tenant budget answered a lane's ``acquire`` (or the collection's renewal); ``None``: the call failed."""
        if lane_id == RENEW:
            return self._renewed(answer)
        lane = self.lanes[lane_id]
        lane.issued_at = lane.due = None
        if answer is not None:
            self._learn(answer)
        if answer is None:
            return self._error(lane, ActivityError("budget_unavailable", "the tenant budget entity did not answer"))
        if self.state.doomed is not None:  # nothing more starts: the chunk stays for a retry
            lane.holds_slot = bool(answer.get("granted"))
            return self._conclude(lane, ("unstarted", None))
        lane.step_failures = 0
        if answer.get("granted"):
            lane.holds_slot = True
            lane.phase = self._first_phase()
            return self._next_call(lane) + self._keep_renewing()
        lane.budget_waits += 1
        self.state.budget_waits += 1
        queued = self._queued()
        if queued is not None and queued is not lane:  # one lane per collection waits; this chunk waits unstarted
            return self._conclude(lane, ("unstarted", None))
        return self._wait(lane, later(self.now, self.budget.poll_seconds))

    def _first_phase(self) -> str:
        return SUBMIT if self.spec.source == "graph" else COLLECT

    def _holder(self, lane: Lane) -> str:
        return holder_id(self.spec.collection_id, lane.id)

    def _release(self, lane: Lane) -> list[Step]:
        """A lane that ended gives back its slot (or its queue place). When it held a slot and a lane of this
        collection waits on its poll timer, that lane asks again now, right after the release (one sender's
        operations reach the entity in order), instead of at its next poll."""
        if not (lane.holds_slot or lane.phase == BUDGET):
            return []
        steps: list[Step] = [SignalEntity("release", {"holder": self._holder(lane)})]
        queued = self._queued()
        if lane.holds_slot and queued is not None and queued.issued_at is None and not queued.parked:
            steps += [Cancel(queued.id), *self._next_call(queued)]
        lane.holds_slot = False
        return steps

    def _keep_renewing(self) -> list[Step]:
        """Start the collection's renewal timer if none is pending: one renewal for all its slots per period."""
        if self.state.renew_due is not None or self.renewing:
            return []
        self.state.renew_due = later(self.now, self.budget.renew_seconds)
        return [Wait(RENEW, self.state.renew_due)]

    def _renew(self) -> list[Step]:
        self.state.renew_due = None
        holders = [self._holder(lane) for lane in self.lanes.values() if lane.holds_slot]
        if not holders:
            return []
        self.renewing = True
        request = self.budget.renew_collection(self.spec.collection_id, holders)
        return [CallEntity(RENEW, "renew_collection", request.to_json())]

    def _renewed(self, answer: JsonDict | None) -> list[Step]:
        """A slot a renewal found lost (its lease ran out unrenewed) is counted; its lane goes on regardless."""
        self.renewing = False
        if answer is not None:
            self._learn(answer)
            self.state.budget_lost += len(answer.get("lost") or [])
        return self._keep_renewing() if any(lane.holds_slot for lane in self.lanes.values()) else []

    def _acquire(self, lane: Lane) -> CallEntity:
        lane.issued_at = self.now
        return CallEntity(lane.id, "acquire", self.budget.acquire(self._holder(lane)).to_json())

    def _budget_status(self) -> JsonDict | None:
        """The custom status's ``budget``: slots held, lanes asking for one, and "waiting for tenant budget" while a
        lane waits (``waits``: times a lane was answered "queued"; ``lost``: slots a renewal found gone)."""
        if not self.budget.enabled:
            return None
        held = sum(1 for lane in self.lanes.values() if lane.holds_slot)
        asking = sum(1 for lane in self.lanes.values() if lane.phase == BUDGET)
        return {
            "capacity": self.budget.capacity,
            "held": held,
            "asking": asking,
            "state": BUDGET if asking else "holding slots" if held else None,
            "waits": self.state.budget_waits,
            "lost": self.state.budget_lost,
        }
