"""The window with a tenant budget: lanes ask the real ``shared.budget.machine`` state machine for a slot before any
server-side work, give it back as they end, and renew all of a collection's slots in one operation per period.

A small simulator plays the orchestrators of several collections of one tenant and the entity between them: steps
are answered in random order, timers fire at their due time, entity calls run on one ``Budget`` at the simulated
clock, one collection's operations (calls and signals) reach it in the order they were sent, and a collection
switches executions (carrying its lanes and its renewal) whenever its window says so.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from shared import names
from shared.budget.machine import Budget, Limits
from shared.budget.wire import BudgetRequest
from shared.models import ActivityError, ActivityResult, Chunk, ChunkSummary, JsonDict, iso
from shared.sources.registry import window_for
from shared.timeline.planning import ChunkPlan
from shared.window.machine import CollectionSpec, CollectionWindow
from shared.window.state import (
    BUDGET,
    RENEW,
    CallActivity,
    CallEntity,
    Cancel,
    Carried,
    RunOptions,
    SignalEntity,
    Step,
    Wait,
)

T0 = datetime(2024, 11, 17, tzinfo=UTC)
LEASE = 30.0
POLL = 2.0


def spec(
    collection: str = "c1",
    n: int = 6,
    k: int = 3,
    source: str = "exchange",
    m: int = 1000,
    b: int = 2,
    **options: object,
) -> CollectionSpec:
    return CollectionSpec(
        collection_id=collection,
        tenant_id="contoso.onmicrosoft.com",
        source=source,
        filters={},
        options=RunOptions(
            max_concurrency=k,
            chunks_per_execution=m,
            budget_capacity=b,
            budget_lease_seconds=LEASE,
            budget_poll_seconds=POLL,
            poll_interval_seconds=1.0,
            poll_min_interval_seconds=1.0,
            retry_base_seconds=1.0,
            **options,  # type: ignore[arg-type]
        ),
        plan=ChunkPlan(T0, T0 + timedelta(hours=n), timedelta(hours=1)),
    )


def done(step: CallActivity, records: int = 5) -> ActivityResult:
    chunk = Chunk.from_json(step.input["chunk"])
    summary = ChunkSummary(chunk, records, 0, 0, 0, "b", "h", 1, False).to_json()
    if step.name == names.ACTIVITY_GRAPH_SUBMIT:
        return ActivityResult.success({"queryId": f"q-{step.lane}"})
    if step.name == names.ACTIVITY_GRAPH_COLLECT:
        return ActivityResult.success({"outcome": "export", "summary": summary})
    return ActivityResult.success({"summary": summary})


def grant(number: int = 1, until: float = LEASE, **counts: int) -> JsonDict:
    """A grant as the entity answers it: the grant number and the lease's end (from T0)."""
    return {"granted": True, "grant": number, "leaseUntil": iso(T0 + timedelta(seconds=until)), **counts}


def entity(budget: Budget, now: datetime, capacity: Limits | int, operation: str, data: JsonDict) -> JsonDict:
    """What ``orchestrators.budget_entity`` does with one operation (parse, handle), minus the storage."""
    return budget.handle(BudgetRequest.parse(operation, data), now, capacity)


@dataclass
class Collection:
    spec: CollectionSpec
    window: CollectionWindow
    pending: list[Step] = field(default_factory=list)
    outbox: list[CallEntity | SignalEntity] = field(default_factory=list)
    """Entity operations sent and not yet run, in the order sent (one sender's operations run in order)."""
    executions: int = 1


class Tenant:
    """Several collections of one tenant, their steps answered in a seeded random order."""

    def __init__(self, specs: list[CollectionSpec], capacity: int, seed: int = 0, quota: int = 0) -> None:
        self.capacity = capacity
        self.limits = Limits(capacity, quota=quota) if quota else capacity
        """What the entity is given with each operation (with ``quota``: the daily Graph quota too)."""
        self.budget = Budget()
        self.rng = random.Random(seed)
        self.now = T0
        self.collections = [Collection(s, window_for(s, now=T0)) for s in specs]
        self.working_peak = 0
        self.entity_calls = 0
        self.signals: list[tuple[str, JsonDict]] = []
        for c in self.collections:
            self.take(c, c.window.resume() + c.window.fill())

    def take(self, c: Collection, steps: list[Step]) -> None:
        """What the orchestrator does with new steps: signals go out now, cancels drop a timer, the rest waits."""
        for step in steps:
            if isinstance(step, SignalEntity):
                self.signals.append((step.operation, step.input))
                c.outbox.append(step)
            elif isinstance(step, Cancel):
                c.pending = [s for s in c.pending if not (isinstance(s, Wait) and s.lane == step.lane)]
            elif isinstance(step, Wait) and c.window.switching and step.lane != RENEW:
                c.window.park(step.lane)
            else:
                c.pending.append(step)
                if isinstance(step, CallEntity):
                    c.outbox.append(step)
        self.flush(c)
        if c.window.switching:
            for timer in [s for s in c.pending if isinstance(s, Wait) and s.lane != RENEW]:
                c.pending.remove(timer)
                c.window.park(timer.lane)
        if c.window.should_continue_as_new:
            carried = c.window.carry()
            c.window = window_for(c.spec, Carried.from_json(carried.to_json()), now=self.now)
            c.pending = []  # only the renewal timer can be left; its due time was carried
            c.executions += 1
            self.take(c, c.window.resume() + c.window.fill())

    def flush(self, c: Collection) -> None:
        """Signals at the head of the collection's outbox reach the entity (a call waits to be answered)."""
        while c.outbox and isinstance(c.outbox[0], SignalEntity):
            signal = c.outbox.pop(0)
            entity(self.budget, self.now, self.limits, signal.operation, signal.input)

    def check(self) -> None:
        working = [
            lane
            for c in self.collections
            for lane in c.window.lanes.values()
            if any(isinstance(s, CallActivity) and s.lane == lane.id for s in c.pending)
        ]
        assert self.capacity == 0 or all(lane.holds_slot for lane in working)  # no server-side work without a slot
        self.working_peak = max(self.working_peak, len(working))
        assert len(self.budget.state.leases) <= self.capacity

    def run(self, respond: object = done, max_steps: int = 20_000) -> None:
        for _ in range(max_steps):
            self.check()
            live = [c for c in self.collections if c.pending]
            if not live:
                assert not any(c.outbox for c in self.collections)
                return
            due = [(c, s) for c in live for s in c.pending if isinstance(s, Wait) and s.until <= self.now]
            others = [
                (c, s)
                for c in live
                for s in c.pending
                if isinstance(s, CallActivity) or (c.outbox and s is c.outbox[0])
            ]
            if due:
                c, step = due[0]
            elif others:
                c, step = others[self.rng.randrange(len(others))]
                self.now += timedelta(milliseconds=100)
            else:
                c, step = min(((c, s) for c in live for s in c.pending), key=lambda pair: pair[1].until)  # type: ignore[union-attr]
                assert isinstance(step, Wait)
                self.now = step.until
            c.pending.remove(step)
            c.window.now = self.now
            if isinstance(step, Wait):
                new = c.window.on_timer(step.lane)
            elif isinstance(step, CallEntity):
                assert c.outbox.pop(0) is step
                self.entity_calls += 1
                answer = entity(self.budget, self.now, self.limits, step.operation, step.input)
                new = c.window.on_budget(step.lane, answer)
            else:
                assert isinstance(step, CallActivity)
                new = c.window.on_result(step.lane, respond(step))  # type: ignore[operator]
            if not c.window.busy:  # the orchestrator leaves the loop and cancels the renewal timer
                c.pending = [s for s in c.pending if not (isinstance(s, Wait) and s.lane == RENEW)]
            self.take(c, new + c.window.fill())
        raise AssertionError("the simulation did not end")


@settings(max_examples=30, deadline=None)
@given(
    collections=st.integers(1, 3),
    n=st.integers(1, 12),
    k=st.integers(1, 5),
    b=st.integers(1, 4),
    m=st.sampled_from([2, 5, 1000]),
    source=st.sampled_from(["graph", "exchange"]),
    seed=st.integers(0, 10**6),
)
def test_collections_of_one_tenant_never_work_beyond_b_and_every_chunk_completes_once(
    collections: int, n: int, k: int, b: int, m: int, source: str, seed: int
) -> None:
    specs = [spec(f"c{i}", n=n, k=k, source=source, m=m, b=b) for i in range(collections)]
    tenant = Tenant(specs, b, seed)
    tenant.run()
    assert tenant.working_peak <= b
    for c in tenant.collections:
        window = c.window
        assert not window.lanes and not window.has_pending()
        assert window.state.completed == n and window.state.failed == 0 and window.state.records == 5 * n
        assert window.output("m")["status"] == "Completed"
    state = tenant.budget.state
    assert state.leases == {} and state.waiters == []  # every slot and queue place given back
    # every slot granted came back (a slot may serve several chunks of its collection: handed on, not re-granted)
    assert 0 < state.granted == state.released <= collections * n and state.reclaimed == 0
    assert state.peak <= b


def test_three_collections_share_two_slots_first_come_first_served() -> None:
    tenant = Tenant([spec(f"c{i}", n=6, k=3, b=2, m=4) for i in range(3)], capacity=2, seed=7)
    tenant.run()
    assert tenant.working_peak == 2
    assert sum(c.window.state.budget_waits for c in tenant.collections) > 0  # they did wait for one another
    assert all(c.executions > 1 for c in tenant.collections)  # and switched executions while holding slots
    state = tenant.budget.state
    assert 0 < state.granted == state.released <= 18 and state.reclaimed == 0


def test_budget_off_asks_nothing_of_the_entity() -> None:
    window = window_for(spec(b=0, k=2))
    steps = window.fill()
    assert [type(s) for s in steps] == [CallActivity, CallActivity]
    assert window.status()["budget"] is None
    assert window.on_result(0, done(steps[0])) == []  # no release either
    tenant = Tenant([spec(b=0, n=5, k=3)], capacity=0)
    tenant.run()
    assert tenant.entity_calls == 0 and tenant.signals == []
    assert tenant.collections[0].window.state.completed == 5


def test_a_lane_waits_for_tenant_budget_before_its_first_call() -> None:
    window = window_for(spec(b=1, k=3, source="graph"), now=T0)
    window.budget.free_slots = 3  # what an earlier answer said: three lanes ask at once (and race for one slot)
    first = window.fill()
    assert [(type(s), s.lane) for s in first] == [(CallEntity, 0), (CallEntity, 1), (CallEntity, 2)]
    acquire = first[0]
    assert isinstance(acquire, CallEntity) and acquire.operation == "acquire"
    assert acquire.input == {"holder": "c1/0", "leaseSeconds": LEASE, "waitSeconds": POLL}
    assert window.lanes[0].phase == BUDGET
    # granted: the lane submits its query and the collection's renewal timer starts (one for all its slots)
    granted = window.on_budget(0, grant())
    assert isinstance(granted[0], CallActivity) and granted[0].name == names.ACTIVITY_GRAPH_SUBMIT
    assert granted[0].input["slotDeadline"] == "2024-11-17T00:00:27Z"  # its lease's end, less the margin
    assert granted[1:] == [Wait(RENEW, T0 + timedelta(seconds=LEASE / 3))]
    # queued: it asks again after a poll; the status says so
    assert window.on_budget(1, {"granted": False, "position": 1}) == [Wait(1, T0 + timedelta(seconds=POLL))]
    assert window.status()["budget"]["state"] == "waiting for tenant budget"
    assert window.status()["grid"]["lanes"][1][2] == "waiting for tenant budget"
    # a second queued lane gives its turn back (one waiter per collection): its queue place and its chunk
    assert window.on_budget(2, {"granted": False, "position": 2}) == [SignalEntity("release", {"holder": "c1/2"})]
    assert 2 not in window.lanes and window.state.requeued == [window.spec.planned_chunk(2)]
    assert window.fill() == []  # nothing starts while a lane waits for tenant budget


def test_lanes_ask_one_at_a_time_until_an_answer_says_more_slots_are_free() -> None:
    window = window_for(spec(b=4, k=4, n=10), now=T0)
    assert [s.lane for s in window.fill()] == [0]  # nothing known yet: one lane asks
    window.on_budget(0, grant(capacity=4, held=1, waiting=0))
    assert [s.lane for s in window.fill()] == [1, 2, 3]  # three slots free, nobody waiting: three ask at once
    window.on_budget(1, grant(2, capacity=4, held=4, waiting=0))
    window.on_budget(2, {"granted": False, "position": 1, "capacity": 4, "held": 4, "waiting": 1})
    # lane 2 already waits, so lane 3 steps back: its chunk waits unstarted and does not count as a start
    assert window.on_budget(3, {"granted": False, "position": 2, "capacity": 4, "held": 4, "waiting": 2}) == [
        SignalEntity("release", {"holder": "c1/3"})
    ]
    assert window.started_this_execution == 3 and window.fill() == []


def test_a_slot_given_back_goes_to_the_collection_s_waiting_lane_at_once() -> None:
    window = window_for(spec(b=1, k=2), now=T0)
    window.budget.free_slots = 2
    window.fill()
    window.on_budget(0, grant())
    window.on_budget(1, {"granted": False, "position": 1})
    work = CallActivity(0, names.ACTIVITY_EXCHANGE_COLLECT, {"chunk": window.lanes[0].chunk_json()})
    ended = window.on_result(0, done(work)) + window.fill()
    # lane 1 asks again now, the ended lane's slot released in the same call (given to whoever is entitled)
    acquire = {"holder": "c1/1", "leaseSeconds": LEASE, "waitSeconds": POLL, "release": "c1/0"}
    assert ended == [Cancel(1), CallEntity(1, "acquire", acquire)]


def test_every_ending_gives_the_slot_back() -> None:
    window = window_for(spec(b=3, k=3, source="graph", max_attempts=1), now=T0)
    window.budget.free_slots = 3
    window.fill()
    for lane in range(3):
        window.on_budget(lane, grant(lane + 1, capacity=3, held=lane + 1, waiting=0))
    split = window.on_result(0, ActivityResult(False, error=ActivityError("needs_split", "over"), needs_split=True))
    assert split == [] and [s.holder for s in window.budget.spares] == [0]  # kept for the next chunk...
    halves = window.fill()  # ...which takes it at once (the budget answered just now, nobody waits)
    assert [(type(s), s.lane) for s in halves] == [(CallActivity, 3)] and window.lanes[3].slot.holder == 0  # type: ignore[union-attr]
    failed = window.on_result(1, ActivityResult(False, error=ActivityError("bad_request", "no")))
    submitted = window.on_result(2, ActivityResult.success({"queryId": "q"}))
    assert not any(isinstance(s, SignalEntity) for s in submitted)  # still working: it keeps its slot
    window.state.cursor = window.planned  # nothing left to start: the slot goes back to the budget
    window.state.requeued = []
    assert failed + window.fill() == [SignalEntity("release", {"holder": "c1/1"})]
    assert window.state.splits == 1 and window.state.failed == 1


def test_one_renewal_per_period_lists_every_held_slot_and_stops_when_none_is_held() -> None:
    window = window_for(spec(b=3, k=3), now=T0)
    window.budget.free_slots = 3
    window.fill()
    assert window.on_budget(0, grant(1))[-1] == Wait(RENEW, T0 + timedelta(seconds=10))
    assert not any(isinstance(s, Wait) for s in window.on_budget(1, grant(2)))  # the same timer serves
    window.now = T0 + timedelta(seconds=10)
    renew = window.on_timer(RENEW)
    assert renew == [
        CallEntity(
            RENEW,
            "renew_collection",
            {"collection": "c1", "holders": ["c1/0", "c1/1"], "leaseSeconds": LEASE, "waitSeconds": POLL},
        )
    ]
    assert window.busy and window.should_continue_as_new is False
    renewed = {"renewed": 1, "lost": ["c1/1"], "leaseUntil": iso(T0 + timedelta(seconds=40))}
    assert window.on_budget(RENEW, renewed) == [Wait(RENEW, T0 + timedelta(seconds=20))]
    assert window.status()["budget"]["lost"] == 1
    assert window.lanes[0].slot.lease_until == T0 + timedelta(seconds=40)  # type: ignore[union-attr]
    assert not window.lanes[1].holds_slot  # its next call asks for a slot first
    window.state.cursor = window.planned  # no chunk left to start
    for lane in (0, 1):  # both chunks end and give their slots back: the next renewal finds nothing and stops
        window.on_result(
            lane, done(CallActivity(lane, names.ACTIVITY_EXCHANGE_COLLECT, {"chunk": window.lanes[lane].chunk_json()}))
        )
        window.fill()
    window.now = T0 + timedelta(seconds=20)
    assert window.on_timer(RENEW) == [] and window.state.renew_due is None


def test_slots_and_the_renewal_are_carried_across_continue_as_new() -> None:
    window = window_for(spec(b=2, k=2, m=2, n=6, source="graph"), now=T0)
    window.budget.free_slots = 2
    window.fill()
    window.on_budget(0, grant())
    window.on_budget(1, {"granted": False, "position": 1})  # lane 1 waits for tenant budget on its poll timer
    assert window.switching  # two chunks started: this execution has spent its budget of chunks
    window.park(1)
    submitted = window.on_result(0, ActivityResult.success({"queryId": "q-0"}))
    assert submitted == []  # its poll timer is parked
    assert window.should_continue_as_new
    carried = Carried.from_json(window.carry().to_json())
    assert carried.renew_due == T0 + timedelta(seconds=10)
    assert [(lane.id, lane.holds_slot, lane.phase) for lane in carried.lanes] == [(0, True, "poll"), (1, False, BUDGET)]
    later = T0 + timedelta(seconds=1)
    resumed = window_for(window.spec, carried, now=later)
    steps = resumed.resume()
    assert Wait(RENEW, T0 + timedelta(seconds=10)) in steps
    assert Wait(1, T0 + timedelta(seconds=POLL)) in steps  # asks again at the same due time, with the same holder
    resumed.now = T0 + timedelta(seconds=10)
    renew = resumed.on_timer(RENEW)
    assert isinstance(renew[0], CallEntity) and renew[0].input["holders"] == ["c1/0"]


def test_a_doomed_collection_gives_back_its_turn_and_keeps_the_chunk_for_a_retry() -> None:
    window = window_for(spec(b=1, k=2, n=3), now=T0)
    window.budget.free_slots = 2
    window.fill()
    window.on_budget(0, grant())
    window.on_budget(1, {"granted": False, "position": 1})
    doom = ActivityError("forbidden", "missing permission", dooms_collection=True)
    ended = window.on_result(0, ActivityResult(False, error=doom)) + window.fill()
    assert ended == [SignalEntity("release", {"holder": "c1/0"})]  # a doomed collection hands nothing on
    # lane 1's poll comes: it starts nothing more, gives back its queue place, and its chunk stays for a retry
    assert window.on_timer(1) == [SignalEntity("release", {"holder": "c1/1"})]
    output = window.output(None)
    assert output["status"] == "Failed" and not window.busy
    assert [c["start"] for c in output["remaining"]["requeued"]] == ["2024-11-17T01:00:00Z"]


def test_an_entity_that_does_not_answer_fails_only_that_chunk_after_the_retries() -> None:
    window = window_for(spec(b=1, k=1, n=1, max_attempts=2), now=T0)
    window.fill()
    retry = window.on_budget(0, None)
    assert len(retry) == 1 and isinstance(retry[0], Wait)
    window.now = retry[0].until
    again = window.on_timer(0)
    assert isinstance(again[0], CallEntity)
    failed = window.on_budget(0, None)
    assert failed == [SignalEntity("release", {"holder": "c1/0"})]  # its queue place, if any
    assert window.state.failures[0].kind == "budget_unavailable"
