"""Properties of the tenant budget over random operation sequences (hypothesis stateful testing).

Each step applies one operation at a moment that never goes backwards; after it the machine must hold every
invariant, and applying the same operation again at the same moment (an orchestration's request re-sent with a
new id after a crash) must change nothing.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from shared.budget.machine import Budget
from shared.budget.wire import BudgetRequest, collection_of

T0 = datetime(2026, 1, 5, tzinfo=UTC)
HOLDERS = [f"{c}/{lane}" for c in ("x", "y", "z") for lane in range(3)]
holders = st.sampled_from(HOLDERS)
LEASE, WAIT = 30.0, 3.0


class BudgetMachine(RuleBasedStateMachine):
    @initialize(capacity=st.integers(min_value=1, max_value=4))
    def start(self, capacity: int) -> None:
        self.capacity = capacity
        self.budget = Budget()
        self.now = T0

    def apply(self, request: BudgetRequest) -> dict[str, object]:
        held_before = request.holder in self.budget.state.leases
        waiting_before = [w.holder for w in self.budget.state.waiters]
        answer = self.budget.handle(request, self.now, self.capacity)
        if request.op == "acquire" and answer["granted"] and not held_before:
            self.check_no_overtaking(request.holder, waiting_before)
        # Idempotence: the same operation once more, at the same moment, is a no-op with the same answer.
        twice = copy.deepcopy(self.budget)
        again = twice.handle(request, self.now, self.capacity)
        assert twice.state.to_json() == self.budget.state.to_json(), request
        if request.op in ("acquire", "renew"):
            assert again["granted"] == answer["granted"] and again.get("grant") == answer.get("grant")
        return answer

    def check_no_overtaking(self, holder: str, waiting: list[str]) -> None:
        """A new grant never leaves someone who queued ahead of the holder without a slot of their own."""
        ahead = waiting[: waiting.index(holder)] if holder in waiting else waiting
        still_waiting = [h for h in ahead if self.budget.position(h) is not None]
        assert len(self.budget.state.leases) + len(still_waiting) <= self.capacity, (holder, waiting)

    @rule(holder=holders)
    def acquire(self, holder: str) -> None:
        answer = self.apply(BudgetRequest("acquire", holder, lease_seconds=LEASE, wait_seconds=WAIT))
        if answer["granted"]:
            assert holder in self.budget.state.leases
        elif answer.get("refused"):  # another lane of its collection waits: one queue entry per collection
            mine = [w.holder for w in self.budget.state.waiters if collection_of(w.holder) == collection_of(holder)]
            assert self.budget.position(holder) is None and len(mine) == 1
        else:
            assert self.budget.position(holder) == int(str(answer["position"])) - 1

    @rule(holder=holders)
    def renew(self, holder: str) -> None:
        queued = self.budget.position(holder) is not None
        answer = self.apply(BudgetRequest("renew", holder, lease_seconds=LEASE, wait_seconds=WAIT))
        assert answer["granted"] == (holder in self.budget.state.leases)
        if not queued:
            assert self.budget.position(holder) is None  # renew never queues

    @rule(holder=holders)
    def release(self, holder: str) -> None:
        self.apply(BudgetRequest("release", holder))
        assert holder not in self.budget.state.leases and self.budget.position(holder) is None

    @rule(collection=st.sampled_from(["x", "y", "z"]))
    def release_collection(self, collection: str) -> None:
        self.apply(BudgetRequest("release_collection", collection=collection))
        remaining = [*self.budget.state.leases, *(w.holder for w in self.budget.state.waiters)]
        assert all(collection_of(h) != collection for h in remaining)

    @rule(seconds=st.floats(min_value=0, max_value=2 * LEASE))
    def time_passes(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    @rule(seconds=st.floats(min_value=0, max_value=LEASE))
    def a_worker_with_a_slow_clock_answers(self, seconds: float) -> None:
        clock_before = self.budget.state.clock
        self.budget.handle(BudgetRequest("status"), self.now - timedelta(seconds=seconds), self.capacity)
        clock_after = self.budget.state.clock
        assert clock_after is not None and (clock_before is None or clock_after >= clock_before)

    @invariant()
    def never_more_slots_than_the_capacity(self) -> None:
        assert len(self.budget.state.leases) <= self.capacity
        assert self.budget.state.peak <= self.capacity

    @invariant()
    def every_holder_is_in_one_place_once(self) -> None:
        queued = [w.holder for w in self.budget.state.waiters]
        assert len(queued) == len(set(queued))
        assert len({collection_of(h) for h in queued}) == len(queued)  # one entry per collection
        assert not set(queued) & set(self.budget.state.leases)

    @invariant()
    def no_slot_is_lost_or_doubled(self) -> None:
        state = self.budget.state
        assert state.granted - state.released - state.reclaimed == len(state.leases)

    @invariant()
    def nothing_expired_survives_an_operation(self) -> None:
        clock = self.budget.state.clock
        if clock is not None:
            assert all(lease.until > clock for lease in self.budget.state.leases.values())
            assert all(w.until > clock for w in self.budget.state.waiters)


TestBudgetMachine = BudgetMachine.TestCase
TestBudgetMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


@st.composite
def _scenario(draw: st.DrawFn) -> tuple[int, list[int]]:
    capacity = draw(st.integers(min_value=1, max_value=3))
    holds = draw(st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=9))
    return capacity, holds


@settings(max_examples=60, deadline=None)
@given(_scenario())
def test_every_holder_that_keeps_asking_is_served_in_bounded_time(scenario: tuple[int, list[int]]) -> None:
    """Holders arrive together, each asks every second (in arrival order) and holds its slot for some seconds: all
    are served, at most ``capacity`` at once, and each is served no later than its FIFO turn allows."""
    capacity, holds = scenario
    budget = Budget()
    names = [f"c{i}/0" for i in range(len(holds))]
    granted_at: dict[str, int] = {}
    released: set[str] = set()
    for second in range(1 + sum(holds) + len(holds)):
        now = T0 + timedelta(seconds=second)
        for name, hold in zip(names, holds):
            if name in released:
                continue
            if name in granted_at:
                if second - granted_at[name] >= hold:
                    budget.handle(BudgetRequest("release", name), now, capacity)
                    released.add(name)
                continue
            answer = budget.handle(BudgetRequest("acquire", name, lease_seconds=LEASE, wait_seconds=1), now, capacity)
            if answer["granted"]:
                granted_at[name] = second
        assert len(budget.state.leases) <= capacity
    assert released == set(names), (capacity, holds, granted_at)
    # Serving in arrival order: nobody is served before someone who arrived earlier (all keep asking each second).
    order = [granted_at[n] for n in names]
    assert order == sorted(order)
