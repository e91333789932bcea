"""Issue 28 item 2: a lane's budget slot kept across the chunks it serves (``BudgetOptions.keep``, window version 1).

At realistic latency a Graph chunk runs minutes, longer than the budget's poll, and version 0 sent every chunk's slot
back through the entity (one ``acquire`` per chunk, with its credit). With ``keep`` the slot goes to the next chunk
while the latest answer (a renewal's at the latest) says nobody waits, and credits come a few at once. The tenant
simulator of ``test_window_budget`` plays the collections and the entity; queries stay pending for a few checks, so
every chunk runs longer than a poll.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared import names
from shared.budget.machine import Budget, Limits
from shared.budget.wire import BudgetRequest
from shared.models import ActivityResult
from shared.requests.run_options import WINDOW_VERSION
from shared.window.state import CallActivity
from tests.collector.test_window_budget import T0, Tenant, done, spec

RUN = "a" * 32 + "b" * 32
"""A run's token (its run id, then an HMAC): closing the run remembers its id."""
CHECKS = 6
"""Status checks a query answers "running" before it is finished: at 1 s apart, a chunk runs 6-7 s (3 polls)."""


class Slow:
    """Graph activities whose queries finish only at their ``CHECKS + 1``-th status check."""

    def __init__(self) -> None:
        self.checks: Counter[str] = Counter()

    def __call__(self, step: CallActivity) -> ActivityResult:
        if step.name == names.ACTIVITY_GRAPH_COLLECT:
            query = f"{step.input['collectionId']}:{step.input['queryId']}"
            self.checks[query] += 1
            if self.checks[query] <= CHECKS:
                return ActivityResult.success({"outcome": "pending", "rawStatus": "running"})
        if step.name == names.ACTIVITY_GRAPH_SUBMIT:
            return ActivityResult.success({"queryId": f"q-{step.lane}-{step.input['chunk']['start']}"})
        return done(step)


def keeping(collection: str = "c1", version: int = WINDOW_VERSION, **options: object) -> object:
    return spec(collection, source="graph", window_version=version, **options)


KEEPING = pytest.mark.parametrize("version", [1, WINDOW_VERSION])
"""Version 1 (slots kept, credits a few at once) and the current one (2: renewals ride on the lanes' episodes)."""


def test_a_slot_serves_the_chunks_of_its_lane_without_asking_the_budget_again() -> None:
    """Version 0 is granted a slot once per chunk (its chunks are longer than a poll); version 1 once per lane (the
    collection's renewals, one per third of a lease for all its slots, are the same in both)."""
    n, k = 24, 2
    grants = {}
    for version in (0, WINDOW_VERSION):
        tenant = Tenant([spec("c1", n=n, k=k, b=k, source="graph", window_version=version)], capacity=k)
        tenant.run(Slow())
        window = tenant.collections[0].window
        assert window.state.completed == n and window.output("m")["status"] == "Completed"
        assert tenant.budget.state.leases == {} and tenant.budget.state.peak <= k
        grants[version] = tenant.budget.state.granted
    assert grants == {0: n, WINDOW_VERSION: k}


@KEEPING
def test_two_collections_of_one_tenant_share_the_slots_and_neither_is_starved(version: int) -> None:
    """Both at K = B: the first takes every slot; the second queues, the first sees it at its next renewal and sends
    its next ended slot back through the budget, so both work side by side long before the first is done."""
    b = 2
    first, second = keeping("c1", version, n=40, k=b, b=b), keeping("c2", version, n=40, k=b, b=b)
    tenant = Tenant([first, second], capacity=b, seed=3)
    holding: list[tuple[int, int]] = []
    check = tenant.check

    def watched() -> None:
        check()
        holding.append(
            tuple(sum(1 for lane in c.window.lanes.values() if lane.holds_slot) for c in tenant.collections)  # type: ignore[arg-type]
        )

    tenant.check = watched  # type: ignore[method-assign]
    tenant.run(Slow())
    for c in tenant.collections:
        assert c.window.state.completed == 40 and c.window.output("m")["status"] == "Completed"
    assert tenant.working_peak <= b
    assert sum(c.window.state.budget_waits for c in tenant.collections) > 0  # one did wait for the other
    shared = [i for i, (one, two) in enumerate(holding) if one and two]
    assert shared, "the collections never held slots at the same time"
    # the waiter was served while the other still had most of its work ahead: no starvation until it ended
    first_done_at = max(i for i, (one, _) in enumerate(holding) if one)
    assert shared[0] < first_done_at / 2, (shared[0], first_done_at)
    assert len(shared) > len(holding) / 4  # and they went on sharing, not taking turns a whole collection each


@settings(max_examples=40, deadline=None)
@given(
    collections=st.integers(1, 3),
    n=st.integers(1, 10),
    k=st.integers(1, 4),
    b=st.integers(1, 3),
    m=st.sampled_from([2, 5, 1000]),
    seed=st.integers(0, 10**6),
    version=st.sampled_from([1, WINDOW_VERSION]),
)
def test_kept_slots_never_work_beyond_b_and_every_chunk_completes_once(
    collections: int, n: int, k: int, b: int, m: int, seed: int, version: int
) -> None:
    specs = [keeping(f"c{i}", version, n=n, k=k, m=m, b=b, budget_quota=1000) for i in range(collections)]
    tenant = Tenant(specs, b, seed, quota=1000)
    tenant.run(Slow())
    assert tenant.working_peak <= b
    submitted = 0
    for c in tenant.collections:
        window = c.window
        assert not window.lanes and not window.has_pending()
        assert window.state.completed == n and window.output("m")["status"] == "Completed"
        submitted += n
        assert 0 <= window.state.credits <= 8  # credits taken and not spent: given back when the run closes
    state = tenant.budget.state
    assert state.leases == {} and state.waiters == [] and state.reclaimed == 0
    kept = sum(c.window.state.credits for c in tenant.collections)
    assert state.submissions.used(tenant.now) == submitted + kept  # a credit per query, and the kept ones


def test_credits_come_a_few_at_once_and_the_unspent_ones_go_back_once() -> None:
    budget, limits = Budget(), Limits(6, 600.0, 10.0, quota=150)
    ask = BudgetRequest("acquire", "c1/0", submit=1, credits=3, token="")
    answer = budget.handle(ask, T0, limits)
    assert answer["granted"] and answer["credit"] == 1 and answer["credits"] == 3
    assert budget.handle(ask, T0, limits)["credits"] == 3  # re-sent after a crash: none taken again
    assert budget.state.submissions.used(T0) == 3
    close = BudgetRequest.parse("release_collection", {"collection": "c1", "close": True, "refund": 2, "token": RUN})
    assert budget.handle(close, T0, limits)["refunded"] == 2
    assert "refunded" not in budget.handle(close, T0, limits)  # the run is closed: nothing goes back twice
    assert budget.state.submissions.used(T0) == 1
    # near the end of the allowance it takes what is left, at least one
    budget.state.submissions.buckets = [[int(T0.timestamp()), 148]]
    later = T0 + timedelta(minutes=2)
    answer = budget.handle(BudgetRequest("acquire", "c2/0", submit=1, credits=5), later, limits)
    assert answer["credits"] == 2 and budget.state.submissions.used(later) == 150


def test_an_execution_continues_as_new_after_its_transitions_whatever_its_chunk_count() -> None:
    """Issue 28 item 3: at realistic latency a chunk is about 25 completions (its status checks), so 20 chunk starts
    let an execution's history grow to thousands of events; version 1 also bounds the completions per execution."""
    executions = {}
    for bound in (0, 20):
        tenant = Tenant([keeping("c1", n=8, k=2, b=2, m=1000, transitions_per_execution=bound)], capacity=2)
        tenant.run(Slow())
        window = tenant.collections[0].window
        assert window.state.completed == 8 and window.output("m")["status"] == "Completed"
        assert tenant.budget.state.leases == {} and tenant.budget.state.reclaimed == 0
        executions[bound] = tenant.collections[0].executions
    assert executions[0] == 1 and executions[20] >= 5, executions
