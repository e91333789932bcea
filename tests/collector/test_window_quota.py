"""The window and the tenant's daily Graph quota: every query a lane submits takes a credit with the ``acquire`` of
its slot, a lane told the quota is spent waits on a durable timer until it frees (the collection's one waiter, shown
in its status), and collections of one tenant never submit more than the allowance in any 24 hours.

The simulator of ``test_window_budget`` plays the orchestrators and the real ``shared.budget.machine`` between them,
here with the quota on (``Limits.quota``).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from shared import names
from shared.budget.machine import Limits
from shared.models import ActivityError, ActivityResult, JsonDict, iso
from shared.sources.registry import window_for
from shared.window.budget import QUOTA_WAIT
from shared.window.state import BUDGET, CallActivity, CallEntity, SignalEntity, Wait
from tests.collector.test_window_budget import LEASE, POLL, T0, Tenant, done, grant, spec

DAY = timedelta(hours=24)
MARGIN = min(10.0, LEASE / 10)


class QuotaTenant(Tenant):
    """The simulator with the budget's quota on; it records when each query was submitted."""

    def __init__(self, specs: list, capacity: int, quota: int, seed: int = 0) -> None:  # type: ignore[type-arg]
        self.submitted: list[datetime] = []
        super().__init__(specs, capacity, seed)
        self.slots = capacity
        self.capacity = Limits(capacity, LEASE, POLL, quota)  # type: ignore[assignment]
        self.limits = self.capacity

    def check(self) -> None:
        assert len(self.budget.state.leases) <= self.slots

    def respond(self, step: CallActivity) -> ActivityResult:
        if step.name == names.ACTIVITY_GRAPH_SUBMIT:
            self.submitted.append(self.now)
        return done(step)

    def most_in_a_day(self) -> int:
        times = sorted(self.submitted)
        return max((sum(1 for t in times if start <= t < start + DAY) for start in times), default=0)


def quota_spec(collection: str = "c1", n: int = 6, k: int = 3, b: int = 3, quota: int = 4, **options: object):  # type: ignore[no-untyped-def]
    return spec(collection, n=n, k=k, source="graph", b=b, budget_quota=quota, **options)


@settings(max_examples=25, deadline=None)
@given(
    collections=st.integers(1, 3),
    n=st.integers(1, 9),
    k=st.integers(1, 4),
    b=st.integers(1, 3),
    quota=st.integers(1, 6),
    m=st.sampled_from([2, 1000]),
    seed=st.integers(0, 10**6),
)
def test_collections_of_one_tenant_never_submit_more_than_the_quota_in_24_hours_and_all_complete(
    collections: int, n: int, k: int, b: int, quota: int, m: int, seed: int
) -> None:
    specs = [quota_spec(f"c{i}", n=n, k=k, b=b, quota=quota, m=m) for i in range(collections)]
    tenant = QuotaTenant(specs, b, quota, seed)
    tenant.run(respond=tenant.respond, max_steps=60_000)
    assert len(tenant.submitted) == collections * n  # one submission per chunk, each once
    assert tenant.most_in_a_day() <= quota
    for c in tenant.collections:
        assert c.window.state.completed == n and c.window.output("m")["status"] == "Completed"
    if collections * n > quota:  # they had to wait a day for the quota, on timers, not by asking in a loop
        assert tenant.now - T0 >= DAY
        waits = sum(c.window.state.quota_waits for c in tenant.collections)
        assert waits > 0 and tenant.entity_calls < 20 * collections * n
    assert tenant.budget.state.leases == {} and tenant.budget.state.waiters == []


def test_a_lane_told_the_quota_is_spent_waits_on_a_timer_and_the_status_says_until_when() -> None:
    window = window_for(quota_spec(n=4, k=2), now=T0)
    first = window.fill()
    assert first == [
        CallEntity(0, "acquire", {"holder": "c1/0", "leaseSeconds": LEASE, "waitSeconds": POLL, "submit": 1})
    ]
    submitted = window.on_budget(0, {**grant(capacity=3, held=1, waiting=0), "credit": 1})
    assert isinstance(submitted[0], CallActivity) and submitted[0].name == names.ACTIVITY_GRAPH_SUBMIT
    assert window.lanes[0].credited is False  # spent by the submit it issued
    asked = window.fill()  # the answer said two slots are free: the next lane asks, with its own number
    assert [(s.lane, s.input["submit"]) for s in asked if isinstance(s, CallEntity)] == [(1, 2)]
    until = T0 + timedelta(hours=20)
    quota = {"allowed": 4, "used": 4, "left": 0, "until": iso(until)}
    refused = {"granted": False, "position": None, "quotaUntil": iso(until), "quota": quota, "capacity": 3,
               "held": 1, "waiting": 0}  # fmt: skip
    wait = window.on_budget(1, refused)
    assert wait == [Wait(1, until + timedelta(seconds=MARGIN))]  # one durable timer, not a poll every 2 s
    status = window.status()["budget"]
    assert status["state"] == f"{QUOTA_WAIT} until {iso(until)}"
    assert status["state"] == "waiting for the tenant's daily Graph quota until 2024-11-17T20:00:00Z"
    assert status["quota"]["left"] == 0 and status["quota"]["waitingUntil"] == iso(until)
    assert window.lanes[1].phase == BUDGET and window.fill() == []  # the collection's one waiter: nothing starts
    window.now = until + timedelta(seconds=MARGIN)
    again = window.on_timer(1)
    assert again == [
        CallEntity(1, "acquire", {"holder": "c1/1", "leaseSeconds": LEASE, "waitSeconds": POLL, "submit": 2})
    ]  # the same number: a credit is taken once for it


def test_a_slot_coming_back_does_not_end_a_wait_for_the_quota() -> None:
    window = window_for(quota_spec(n=3, k=2), now=T0)
    window.fill()
    window.on_budget(0, {**grant(capacity=3, held=1, waiting=0), "credit": 1})
    window.fill()
    until = T0 + timedelta(hours=3)
    window.on_budget(1, {"granted": False, "position": None, "quotaUntil": iso(until)})
    window.on_result(0, ActivityResult.success({"queryId": "q-0"}))
    lane = window.lanes[0]
    lane.phase = "poll"
    ended = window.on_result(0, done(CallActivity(0, names.ACTIVITY_GRAPH_COLLECT, {"chunk": lane.chunk_json()})))
    steps = ended + window.fill()
    assert steps == [SignalEntity("release", {"holder": "c1/0"})]  # no Cancel of lane 1's timer, no acquire


def test_a_submit_that_failed_asks_a_new_credit_on_the_slot_it_holds() -> None:
    window = window_for(quota_spec(n=1, k=1), now=T0)
    window.fill()
    window.on_budget(0, {**grant(capacity=3, held=1, waiting=0), "credit": 1})
    retry = window.on_result(0, ActivityResult(False, error=ActivityError("transient", "503")))
    assert len(retry) == 1 and isinstance(retry[0], Wait)
    window.now = retry[0].until
    again = window.on_timer(0)
    assert again == [
        CallEntity(0, "acquire", {"holder": "c1/0", "leaseSeconds": LEASE, "waitSeconds": POLL, "submit": 2})
    ]
    resubmit = window.on_budget(0, {**grant(capacity=3, held=1, waiting=0), "credit": 2})
    assert isinstance(resubmit[0], CallActivity) and resubmit[0].name == names.ACTIVITY_GRAPH_SUBMIT
    assert window.state.budget_lost == 0  # the same grant back: nothing lost


def test_a_graph_lane_that_would_submit_never_takes_a_slot_handed_on_without_asking() -> None:
    window = window_for(quota_spec(n=3, k=1), now=T0)
    window.fill()
    window.on_budget(0, {**grant(capacity=3, held=1, waiting=0), "credit": 1})
    window.on_result(0, ActivityResult.success({"queryId": "q-0"}))
    lane = window.lanes[0]
    ended = window.on_result(0, done(CallActivity(0, names.ACTIVITY_GRAPH_COLLECT, {"chunk": lane.chunk_json()})))
    nxt = ended + window.fill()
    expected: JsonDict = {"holder": "c1/1", "leaseSeconds": LEASE, "waitSeconds": POLL, "release": "c1/0", "submit": 2}
    assert nxt == [CallEntity(1, "acquire", expected)]  # one call: the slot through the budget, with the credit


def test_without_the_quota_a_lane_asks_no_credit() -> None:
    window = window_for(spec(b=3, k=1, source="graph"), now=T0)
    assert window.fill() == [CallEntity(0, "acquire", {"holder": "c1/0", "leaseSeconds": LEASE, "waitSeconds": POLL})]
    assert "quota" not in window.status()["budget"]
