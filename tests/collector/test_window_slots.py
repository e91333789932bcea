"""A lane never works past its slot's lease (issue 18.2), and a slot serves its collection's next chunk without an
entity round trip while nobody waits (issue 18.11), in the window (pure) and in the activities.

The window tests feed the entity's answers by hand (as ``orchestrators.collect`` would from ``call_entity``); the
tenant simulator of ``test_window_budget`` plays whole collections against the real ``shared.budget.machine``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from activities import bodies
from shared import names
from shared.budget.slot_deadline import SlotDeadline, check_request
from shared.errors import SlotExpiredError
from shared.models import ActivityError, ActivityResult, Chunk, JsonDict
from shared.sinks.memory import MemorySink
from shared.sources.registry import window_for
from shared.window.state import BUDGET, CallActivity, CallEntity, Carried, SignalEntity, Wait
from tests.collector.fakes import FakeQueryApi, FakeSearchApi, synthetic
from tests.collector.test_window_budget import LEASE, POLL, T0, Tenant, done, spec

MARGIN = LEASE / 10  # BudgetOptions.margin_seconds for a 30 s lease


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def stamp(seconds: float) -> str:
    return at(seconds).isoformat().replace("+00:00", "Z")


def granted(number: int, until: float, *, waiting: int = 0, held: int = 1, capacity: int = 1) -> JsonDict:
    return {
        "granted": True,
        "grant": number,
        "leaseUntil": stamp(until),
        "position": None,
        "held": held,
        "waiting": waiting,
        "capacity": capacity,
    }


def queued(position: int = 1, *, held: int = 1, waiting: int = 1, capacity: int = 1) -> JsonDict:
    return {"granted": False, "position": position, "held": held, "waiting": waiting, "capacity": capacity}


def only(steps: list[object]) -> object:
    assert len(steps) == 1, steps
    return steps[0]


# --- 18.2: a lane re-checks its slot before each server-side step ----------------------------------------------
def test_a_graph_lane_whose_lease_ran_out_asks_again_before_its_next_status_check_and_keeps_its_query() -> None:
    window = window_for(spec(b=1, k=1, n=2, source="graph"), now=at(0))
    window.fill()
    submit = only(window.on_budget(0, granted(1, LEASE))[:1])
    assert isinstance(submit, CallActivity) and submit.name == names.ACTIVITY_GRAPH_SUBMIT
    window.now = at(1)
    poll = only(window.on_result(0, ActivityResult.success({"queryId": "q-0"})))
    assert isinstance(poll, Wait)
    window.now = at(LEASE - 1)  # the host was paused: the poll fires after the slot's deadline
    again = only(window.on_timer(0))
    assert isinstance(again, CallEntity) and again.operation == "acquire", again  # no status check without a slot
    assert again.input["holder"] == "c1/0" and window.lanes[0].phase == BUDGET
    # Someone else got the slot meanwhile; ours comes back later as a new grant: the loss is counted and the lane
    # goes on where it stopped (its query, polled at once).
    assert window.on_budget(0, queued()) == [Wait(0, at(LEASE - 1 + POLL))]
    window.now = at(LEASE + 5)
    resumed = only(window.on_timer(0))
    assert isinstance(resumed, CallEntity)
    window.now = at(LEASE + 6)
    polled = window.on_budget(0, granted(2, 2 * LEASE))[0]
    assert isinstance(polled, CallActivity) and polled.name == names.ACTIVITY_GRAPH_COLLECT
    assert polled.input["queryId"] == "q-0" and polled.input["slotDeadline"] == stamp(2 * LEASE - MARGIN)
    assert window.status()["budget"]["lost"] == 1


def test_an_exchange_lane_told_by_a_renewal_that_its_slot_is_gone_asks_again_before_its_next_call() -> None:
    window = window_for(spec(b=1, k=1, n=1, m=1000), now=at(0))
    window.fill()
    call = window.on_budget(0, granted(1, LEASE))[0]
    assert isinstance(call, CallActivity) and call.input["slotDeadline"] == stamp(LEASE - MARGIN)
    window.now = at(LEASE / 3)
    renewal = only(window.on_timer(-1))
    assert isinstance(renewal, CallEntity)
    window.on_budget(-1, {"renewed": 0, "lost": ["c1/0"], "leaseUntil": stamp(LEASE / 3 + LEASE)})
    assert window.status()["budget"]["lost"] == 1
    window.now = at(LEASE / 3 + 1)  # the call that was in flight returns: the next one needs a slot first
    step = only(window.on_result(0, ActivityResult.success({"cursor": {"typeIndex": 0, "sessionId": "s"}})))
    assert isinstance(step, CallEntity) and step.operation == "acquire"
    nxt = window.on_budget(0, granted(2, 2 * LEASE))[0]
    assert isinstance(nxt, CallActivity) and nxt.input["cursor"] == {"typeIndex": 0, "sessionId": "s"}
    assert window.status()["budget"]["lost"] == 1  # counted once


def test_a_lane_that_gets_its_own_grant_back_lost_nothing() -> None:
    window = window_for(spec(b=1, k=1, n=1, m=1000), now=at(0))
    window.fill()
    window.on_budget(0, granted(7, LEASE))
    window.now = at(LEASE - MARGIN)  # its deadline: the next call asks first (the entity still has the lease)
    ask = only(window.on_result(0, ActivityResult.success({"cursor": {"typeIndex": 0}})))
    assert isinstance(ask, CallEntity)
    window.on_budget(0, granted(7, 2 * LEASE))  # renewed by the acquire: the same grant
    assert window.status()["budget"]["lost"] == 0


def test_an_activity_that_found_its_deadline_passed_sends_the_lane_back_to_the_budget() -> None:
    window = window_for(spec(b=1, k=1, n=1, m=1000), now=at(0))
    window.fill()
    window.on_budget(0, granted(1, LEASE))
    window.now = at(LEASE)  # the activity ran late (its worker was paused) and refused to call
    refused = ActivityResult(False, error=ActivityError("slot_expired", "the tenant budget slot ran out"))
    step = only(window.on_result(0, refused))
    assert isinstance(step, CallEntity) and step.operation == "acquire"
    assert window.state.failed == 0 and window.lanes[0].step_failures == 0  # not a failure of the chunk


def test_a_graph_export_stopped_at_a_deadline_the_window_saw_renewed_goes_again_without_the_page_check() -> None:
    window = window_for(spec(b=1, k=1, n=1, source="graph", max_attempts=3), now=at(0))
    window.fill()
    window.on_budget(0, granted(1, LEASE))
    window.on_result(0, ActivityResult.success({"queryId": "q"}))
    window.now = at(2)
    first = only(window.on_timer(0))
    assert isinstance(first, CallActivity) and first.input["slotPages"] is True
    window.now = at(LEASE / 3)
    window.on_timer(-1)
    window.on_budget(-1, {"renewed": 1, "lost": [], "leaseUntil": stamp(LEASE / 3 + LEASE)})
    window.now = at(LEASE - MARGIN + 1)  # the export stopped between pages at the deadline it carried
    stopped = ActivityResult(False, error=ActivityError("slot_expired", "the tenant budget slot ran out"))
    backoff = only(window.on_result(0, stopped))
    assert isinstance(backoff, Wait)
    window.now = backoff.until
    again = only(window.on_timer(0))
    assert isinstance(again, CallActivity) and again.input["slotPages"] is False
    assert again.input["slotDeadline"] == stamp(LEASE / 3 + LEASE - MARGIN)


def test_activities_refuse_to_start_a_server_side_step_past_the_deadline() -> None:
    chunk = Chunk(T0, T0 + timedelta(hours=1))
    past = {"slotDeadline": "2000-01-01T00:00:00Z"}
    base = {"collectionId": "c1", "tenantId": "contoso.onmicrosoft.com", "chunk": chunk.to_json(), "filters": {}}
    graph, sink = FakeQueryApi(records=synthetic(T0, 1, 10)), MemorySink()
    submit = ActivityResult.from_json(bodies.graph_submit(graph, sink, {**base, **past}))
    assert submit.error is not None and submit.error.kind == "slot_expired" and graph.created == 0
    query_id = str(ActivityResult.from_json(bodies.graph_submit(graph, sink, base)).data["queryId"])
    check = ActivityResult.from_json(bodies.graph_collect(graph, sink, {**base, **past, "queryId": query_id}))
    assert check.error is not None and check.error.kind == "slot_expired"
    assert graph.queries[query_id][1] == 0  # no status check was sent
    exchange = FakeSearchApi(records=synthetic(T0, 1, 10))
    call = ActivityResult.from_json(bodies.exchange_collect(exchange, MemorySink(), {**base, **past, "call": 0}))
    assert call.error is not None and call.error.kind == "slot_expired" and exchange.calls == 0
    future = {"slotDeadline": "2999-01-01T00:00:00Z"}
    assert ActivityResult.from_json(bodies.exchange_collect(exchange, MemorySink(), {**base, **future})).ok


def test_inside_guarding_every_request_is_checked_or_only_those_that_advance_a_session() -> None:
    now = [at(0)]
    deadline = SlotDeadline(at(10), clock=lambda: now[0])
    check_request("outside", advances_session=True)  # no activity guards this thread: nothing to check
    with deadline.guarding(every_request=True):
        check_request("a page", advances_session=False)
        now[0] = at(10)
        with pytest.raises(SlotExpiredError, match="a page not started"):
            check_request("a page", advances_session=False)
    with deadline.guarding(every_request=False):  # Exchange: a block's nextLink pages continue what was started
        check_request("a nextLink page", advances_session=False)
        with pytest.raises(SlotExpiredError):
            check_request("the next block", advances_session=True)
    with SlotDeadline(at(10), pages=False, clock=lambda: now[0]).guarding(every_request=True):
        check_request("a page", advances_session=True)  # resent after a renewal: checked when it started only
    assert SlotDeadline.of({}).until is None  # no budget: nothing to check
    assert SlotDeadline.of({"slotDeadline": stamp(27)}).until == datetime(2024, 11, 17, 0, 0, 27, tzinfo=UTC)


# --- 18.11: a slot serves the collection's next chunk without a round trip while nobody waits --------------------
def test_a_slot_goes_to_the_collection_s_next_chunk_without_asking_while_nobody_waits() -> None:
    window = window_for(spec(b=1, k=1, n=3, m=1000), now=at(0))
    window.fill()
    first = window.on_budget(0, granted(1, LEASE))[0]
    assert isinstance(first, CallActivity)
    window.now = at(1)
    steps = window.on_result(0, done(first)) + window.fill()
    assert [type(s) for s in steps] == [CallActivity]  # no release, no acquire: the same slot, the same lease
    assert steps[0].input["slotDeadline"] == stamp(LEASE - MARGIN)  # type: ignore[union-attr]


def test_a_slot_goes_through_the_budget_when_someone_waits_or_the_last_answer_is_older_than_a_poll() -> None:
    window = window_for(spec(b=1, k=1, n=3, m=1000), now=at(0))
    window.fill()
    first = window.on_budget(0, granted(1, LEASE, waiting=1))[0]  # another collection waits
    window.now = at(1)
    steps = window.on_result(0, done(first)) + window.fill()  # type: ignore[arg-type]
    assert steps == [
        CallEntity(1, "acquire", {"holder": "c1/1", "leaseSeconds": LEASE, "waitSeconds": POLL, "release": "c1/0"})
    ]
    second = window.on_budget(1, granted(2, LEASE + 1))[0]
    window.now = at(2 + POLL)  # nobody waited at the last answer, but it is older than a poll
    steps = window.on_result(1, done(second)) + window.fill()  # type: ignore[arg-type]
    assert [s.input.get("release") for s in steps if isinstance(s, CallEntity)] == ["c1/1"]


def test_with_nothing_left_to_start_the_slot_goes_back_to_the_budget() -> None:
    window = window_for(spec(b=1, k=1, n=1, m=1000), now=at(0))
    window.fill()
    call = window.on_budget(0, granted(1, LEASE))[0]
    assert window.on_result(0, done(call)) + window.fill() == [SignalEntity("release", {"holder": "c1/0"})]  # type: ignore[arg-type]


def test_one_collection_alone_asks_the_budget_a_few_times_not_once_per_chunk() -> None:
    tenant = Tenant([spec("c1", n=60, k=3, b=3, m=1000)], capacity=3, seed=1)
    tenant.run()
    window = tenant.collections[0].window
    assert window.state.completed == 60
    assert tenant.entity_calls <= 10, tenant.entity_calls  # was one acquire per chunk (60) and a release each
    assert tenant.budget.state.granted == tenant.budget.state.released


class Watched(Tenant):
    """Records, for each collection, when a lane of it was first answered "queued" and when it next held a slot."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.queued_at: dict[str, datetime] = {}
        self.served_at: dict[str, datetime] = {}

    def check(self) -> None:
        super().check()
        for c in self.collections:
            name, lanes = c.spec.collection_id, c.window.lanes.values()
            if name not in self.queued_at and any(lane.phase == BUDGET and lane.budget_waits for lane in lanes):
                self.queued_at[name] = self.now
            if name in self.queued_at and name not in self.served_at and any(lane.holds_slot for lane in lanes):
                self.served_at[name] = self.now


@pytest.mark.parametrize("seed", range(8))
def test_a_waiting_collection_is_served_within_two_polls_although_the_holder_hands_its_slot_on(seed: int) -> None:
    """FIFO between collections holds: the holder stops handing its slot on within a poll of the waiter's arrival,
    and the waiter (asking every poll) takes the next slot given back."""
    tenant = Watched([spec("a", n=40, k=1, b=1), spec("b", n=3, k=1, b=1)], capacity=1, seed=seed)
    tenant.run()
    assert tenant.queued_at, "one collection waited for the other"
    for name, queued_at in tenant.queued_at.items():
        assert tenant.served_at[name] - queued_at <= timedelta(seconds=2 * POLL + 1), (name, seed)


def test_slots_of_lanes_that_end_while_switching_go_to_the_next_execution_and_are_renewed_meanwhile() -> None:
    window = window_for(spec(b=2, k=2, n=6, m=3), now=at(0))
    window.budget.free_slots = 2
    first = window.fill()
    zero, one = (window.on_budget(s.lane, granted(s.lane + 1, LEASE, held=s.lane + 1, capacity=2))[0] for s in first)
    window.now = at(1)
    third = only(window.on_result(0, done(zero)) + window.fill())  # type: ignore[arg-type]
    assert isinstance(third, CallActivity) and window.lanes[2].slot.holder == 0  # type: ignore[union-attr]
    assert window.switching  # three chunks started: this execution's budget of chunks is spent
    ended = window.on_result(1, done(one)) + window.fill() + window.on_result(2, done(third)) + window.fill()  # type: ignore[arg-type]
    assert ended == []  # kept for the next execution, not released
    renewal = only(window.on_timer(-1))
    assert isinstance(renewal, CallEntity) and renewal.input["holders"] == ["c1/1", "c1/0"]
    window.on_budget(-1, {"renewed": 2, "lost": [], "leaseUntil": stamp(1 + LEASE)})
    assert window.should_continue_as_new
    carried = Carried.from_json(window.carry().to_json())
    assert [(s.holder, s.lease_until) for s in carried.spares] == [(1, at(1 + LEASE)), (0, at(1 + LEASE))]
    nxt = window_for(window.spec, carried, now=at(1.5))
    steps = nxt.resume() + nxt.fill()
    assert [type(s) for s in steps] == [Wait, CallActivity, CallActivity]  # the renewal's timer, two chunks at once
    assert [nxt.lanes[lane].slot.holder for lane in (3, 4)] == [1, 0]  # type: ignore[union-attr]


def test_while_switching_a_slot_someone_waits_for_goes_back_at_once_instead_of_idling_through_the_switch() -> None:
    window = window_for(spec(b=2, k=2, n=6, m=3), now=at(0))
    window.budget.free_slots = 2
    first = window.fill()
    zero = window.on_budget(first[0].lane, granted(1, LEASE, held=1, capacity=2))[0]
    one = window.on_budget(first[1].lane, granted(2, LEASE, held=2, waiting=1, capacity=2))[0]  # someone waits
    window.now = at(1)
    third = only(window.on_result(0, done(zero)) + window.fill())  # type: ignore[arg-type]
    assert isinstance(third, CallEntity) and third.input["release"] == "c1/0"  # through the entity, FIFO
    assert window.switching
    assert window.on_result(1, done(one)) + window.fill() == [SignalEntity("release", {"holder": "c1/1"})]  # type: ignore[arg-type]
