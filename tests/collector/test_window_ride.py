"""Window version 2 (issue 28 item 2): the collection's renewal rides on the lanes' episodes (``BudgetOptions.ride``).

A renewal timer is an episode of its own, replaying the whole history to send one call, while the lanes' status checks
wake the window every few seconds to a minute. With ``ride`` the renewal is due at the same time and goes out with an
episode near it; its own timer is set only when no lane (its timer, its waiting status check) will wake the window
before the renewal's slack (``RIDE_SLACK`` of a period) ends and the renewal is not yet within the slack of its due
time (then it goes out early instead). The tenant simulator of ``test_window_budget`` plays the collections and the
real entity; queries run 30 s to 5 minutes of its time, as at ``bench/realistic_cost.py``'s latency; ``Waiting``
plays version 2's waiting status checks with the schedule of ``activities.graph_waits``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from activities.graph_waits import Check, checks
from shared import names
from shared.models import ActivityResult
from shared.requests.collection_spec import CollectionSpec
from shared.requests.run_options import TRANSITIONS_PER_EXECUTION, WINDOW_VERSION, RunOptions
from shared.sources.graph.calls import GraphPoll
from shared.sources.registry import window_for
from shared.timeline.planning import ChunkPlan
from shared.window.budget_keep import RIDE_SLACK
from shared.window.state import RENEW, CallActivity, CallEntity, Step, Wait, later
from tests.collector.test_window_budget import LEASE, T0, Collection, Tenant, done, entity, grant, spec

RENEW_SECONDS = LEASE / 3
SLACK = timedelta(seconds=RIDE_SLACK * RENEW_SECONDS)
"""Of ``test_window_budget``'s short lease (the unit tests below)."""


class Watched(Tenant):
    """The tenant simulator, counting the renewal timers that fired and the renewals sent, and how late each renewal
    went out after it was due."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.fired = 0
        self.renewals = 0
        self.late: list[timedelta] = []
        self.due: dict[str, datetime | None] = {}
        self.watched: list[object] = []
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def take(self, c: Collection, steps: list[Step]) -> None:
        for step in steps:
            if isinstance(step, CallEntity) and step.lane == RENEW:
                self.renewals += 1
                due = self.due.get(c.spec.collection_id)
                assert due is not None
                self.late.append(self.now - due)
        super().take(c, steps)
        self.due[c.spec.collection_id] = c.window.state.renew_due
        if c.window not in self.watched:  # a new execution's window
            self.watched.append(c.window)
            c.window.on_timer = self._counted(c.window.on_timer)  # type: ignore[method-assign]

    def _counted(self, on_timer: Callable[[int], list[Step]]) -> Callable[[int], list[Step]]:
        def counted(lane_id: int) -> list[Step]:
            self.fired += lane_id == RENEW
            return on_timer(lane_id)

        return counted


class Realistic:
    """Graph as deployed, in the simulator's time: a query runs 30 s to 5 minutes (a seeded draw per query); the
    collection's status checks follow its default schedule (first after 30 s or 0.9 x the shortest recent query, then
    every tenth of the running time, at least 10 s apart)."""

    def __init__(self, tenant: Tenant, seed: int) -> None:
        self.tenant = tenant
        self.rng = random.Random(seed)
        self.ends: dict[str, datetime] = {}

    def __call__(self, step: CallActivity) -> ActivityResult:
        if step.name == names.ACTIVITY_GRAPH_SUBMIT:
            query = f"{step.input['collectionId']}:{step.lane}:{step.input['chunk']['start']}"
            self.ends[query] = self.tenant.now + timedelta(seconds=30 + 270 * self.rng.random())
            return ActivityResult.success({"queryId": query})
        if step.name == names.ACTIVITY_GRAPH_COLLECT and self.tenant.now < self.ends[step.input["queryId"]]:
            return ActivityResult.success({"outcome": "pending", "rawStatus": "running"})
        return done(step)


def deployed(version: int, n: int = 30, collection: str = "c1", wait: float = 0.0) -> CollectionSpec:
    """A Graph collection with the deployed defaults (lease 600 s, renewal every 200 s, polls from 30 s; ``wait``:
    the status checks' wait, 60 s as deployed)."""
    return CollectionSpec(
        collection_id=collection,
        tenant_id="contoso.onmicrosoft.com",
        source="graph",
        filters={},
        options=RunOptions(
            max_concurrency=3,
            budget_capacity=3,
            budget_quota=1000,
            window_version=version,
            poll_wait_seconds=wait,
            transitions_per_execution=TRANSITIONS_PER_EXECUTION if version else 0,
        ),
        plan=ChunkPlan(T0, T0 + timedelta(hours=n), timedelta(hours=1)),
    )


def realistic(version: int, seed: int, wait: float = 0.0) -> Watched:
    tenant = (Waiting if wait else Watched)([deployed(version, wait=wait)], 3, seed, quota=1000)
    tenant.run(Realistic(tenant, seed))
    window = tenant.collections[0].window
    assert window.state.completed == 30 and window.output("m")["status"] == "Completed"
    assert window.state.budget_lost == 0 and tenant.collections[0].executions > (1 if wait else 3)
    state = tenant.budget.state
    assert tenant.working_peak <= 3 and state.leases == {} and state.reclaimed == 0  # no lease ever lapsed
    return tenant


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_at_realistic_latency_renewals_ride_on_the_lanes_episodes_instead_of_timers_of_their_own(seed: int) -> None:
    """Version 1 wakes the collection once per renewal just to send it (8-10 per 30 chunks); version 2 sends the same
    renewals with the lanes' status checks, at most ``RIDE_SLACK`` of a period late, and hardly any timer fires."""
    kept, riding = realistic(1, seed), realistic(WINDOW_VERSION, seed)
    assert kept.fired == kept.renewals >= 6
    assert riding.renewals == kept.renewals  # the lease is renewed as often...
    assert riding.fired <= kept.fired / 2  # ...with at most half the timers (0-1 of 8-10 in these runs)
    slack = timedelta(seconds=RIDE_SLACK * deployed(WINDOW_VERSION).options.budget.renew_seconds)
    assert max(riding.late) <= slack + timedelta(seconds=1)  # (the simulator's calls take 0.1 s each)


def _window_holding_a_slot() -> object:
    window = window_for(spec(b=1, k=1, n=2, source="graph", window_version=WINDOW_VERSION), now=T0)
    (ask,) = window.fill()
    assert isinstance(ask, CallEntity)
    steps = window.on_budget(0, grant(1))
    assert not any(isinstance(s, Wait) and s.lane == RENEW for s in steps)  # no timer yet: the episode's end decides
    assert window.state.renew_due == T0 + timedelta(seconds=RENEW_SECONDS)
    return window


def test_a_renewal_timer_is_set_only_when_no_lane_timer_wakes_the_window_in_time() -> None:
    window = _window_holding_a_slot()
    # the lane's submit is in flight: nothing else will wake the window before the renewal is due
    assert window.fill() == [Wait(RENEW, T0 + timedelta(seconds=RENEW_SECONDS))]  # type: ignore[attr-defined]
    assert window.fill() == []  # type: ignore[attr-defined]  # once per execution
    # the timer fires after a lane's episode sent the renewal already: nothing more
    window.now = T0 + timedelta(seconds=RENEW_SECONDS)  # type: ignore[attr-defined]
    (renewal,) = window.fill()  # type: ignore[attr-defined]
    assert isinstance(renewal, CallEntity) and renewal.operation == "renew_collection"
    assert window.on_timer(RENEW) == [] and window.renewing  # type: ignore[attr-defined]


def test_a_lane_timer_due_within_the_slack_carries_the_renewal() -> None:
    window = _window_holding_a_slot()
    submitted = window.on_result(0, ActivityResult.success({"queryId": "q-0"}))  # type: ignore[attr-defined]
    (check,) = [s for s in submitted if isinstance(s, Wait)]
    assert check.until <= T0 + timedelta(seconds=RENEW_SECONDS) + SLACK
    assert window.fill() == []  # type: ignore[attr-defined]  # the lane's status check will wake the window
    window.now = check.until  # type: ignore[attr-defined]
    steps = window.on_timer(0) + window.fill()  # type: ignore[attr-defined]
    assert [s.name for s in steps if isinstance(s, CallActivity)] == [names.ACTIVITY_GRAPH_COLLECT]
    if window.now >= T0 + timedelta(seconds=RENEW_SECONDS):  # type: ignore[attr-defined]
        assert any(isinstance(s, CallEntity) and s.lane == RENEW for s in steps)
    else:  # checked before the renewal was due; with the check in flight, the renewal's own timer is set now
        assert Wait(RENEW, T0 + timedelta(seconds=RENEW_SECONDS)) in steps


class Waiting(Watched):
    """The simulator with waiting status checks (version 2 as deployed): a check activity returns when the schedule of
    ``activities.graph_waits.checks`` does, on the simulator's clock (its query finished, or no check due within its
    wait), a tenth of a second later; other activities and entity calls take a tenth of a second, as before."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.ready: dict[int, tuple[datetime, ActivityResult]] = {}
        self.early: list[timedelta] = []
        super().__init__(*args, **kwargs)

    def take(self, c: Collection, steps: list[Step]) -> None:
        for step in steps:
            if isinstance(step, CallActivity) and step.name == names.ACTIVITY_GRAPH_COLLECT:
                self.ready[id(step)] = self._played(step)
        super().take(c, steps)

    def _played(self, step: CallActivity) -> tuple[datetime, ActivityResult]:
        respond: Realistic = self.respond  # type: ignore[attr-defined]
        clock = [self.now]
        schedule = checks(GraphPoll.from_json(step.input), lambda: clock[0])
        answer: ActivityResult | None = None
        try:
            while True:
                moment = schedule.send(answer) if answer is not None else next(schedule)
                answer = None
                if isinstance(moment, Check):  # checked at the schedule's moment
                    saved, self.now = self.now, clock[0]
                    answer, self.now = respond(step), saved
                else:
                    clock[0] = max(clock[0], moment)
        except StopIteration as stop:
            return later(clock[0], 0.1), stop.value

    def run(self, respond: object = done, max_steps: int = 20_000) -> None:
        self.respond = respond
        for _ in range(max_steps):
            self.check()
            live = [c for c in self.collections if c.pending]
            if not live:
                return
            waiting = [(c, s) for c in live for s in c.pending if id(s) in self.ready]
            due = [(c, s) for c in live for s in c.pending if isinstance(s, Wait) and s.until <= self.now]
            due += [(c, s) for c, s in waiting if self.ready[id(s)][0] <= self.now]
            others = [
                (c, s)
                for c in live
                for s in c.pending
                if (isinstance(s, CallActivity) and id(s) not in self.ready) or (c.outbox and s is c.outbox[0])
            ]
            if due:
                c, step = due[0]
            elif others:
                c, step = others[self.rng.randrange(len(others))]
                self.now += timedelta(milliseconds=100)
            else:
                moments = [(s.until, c, s) for c in live for s in c.pending if isinstance(s, Wait)]
                moments += [(self.ready[id(s)][0], c, s) for c, s in waiting]
                at, c, step = min(moments, key=lambda m: m[0])
                self.now = at
            c.pending.remove(step)
            c.window.now = self.now
            if isinstance(step, Wait):
                new = c.window.on_timer(step.lane)
            elif isinstance(step, CallEntity):
                assert c.outbox.pop(0) is step
                answer = entity(self.budget, self.now, self.limits, step.operation, step.input)
                new = c.window.on_budget(step.lane, answer)
            else:
                assert isinstance(step, CallActivity)
                result = self.ready.pop(id(step))[1] if id(step) in self.ready else respond(step)  # type: ignore[operator]
                new = c.window.on_result(step.lane, result)
            if not c.window.busy:
                c.pending = [s for s in c.pending if not (isinstance(s, Wait) and s.lane == RENEW)]
            self.take(c, new + c.window.fill())
        raise AssertionError("the simulation did not end")


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_with_waiting_checks_renewals_ride_on_their_results_within_the_slack_either_side(seed: int) -> None:
    """Version 2 as deployed: lanes mostly have a waiting check in flight rather than a timer. The renewal still rides
    on the lanes' episodes (a check that must return by the slack's end counts; it may go out up to the slack early),
    so its own timer hardly ever fires; it goes out at most the slack late and at most the slack early."""
    kept, riding = realistic(1, seed), realistic(WINDOW_VERSION, seed, wait=60.0)
    slack = timedelta(seconds=RIDE_SLACK * deployed(WINDOW_VERSION).options.budget.renew_seconds)
    assert kept.renewals <= riding.renewals <= kept.renewals + 1  # the lease is renewed as often...
    assert riding.fired <= kept.fired / 4  # ...and hardly a timer fires (1 of 8-10 in these runs; all before)
    assert max(riding.late) <= slack + timedelta(seconds=1)  # (the simulator's calls take 0.1 s each)
    assert min(riding.late) >= -slack
