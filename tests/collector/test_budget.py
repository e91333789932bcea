"""The tenant budget state machine (shared.budget.machine) and its wire types (shared.budget.wire), step by step."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from shared.budget.machine import (
    MAX_WAITERS,
    REFUSED_COLLECTION_WAITS,
    REFUSED_QUEUE_FULL,
    Budget,
    BudgetState,
    Limits,
    waiter_ttl,
)
from shared.budget.wire import BudgetOptions, BudgetRequest, entity_key, holder_id, parse_entity_key
from shared.errors import RequestValidationError

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
LEASE, WAIT = 60.0, 2.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def acquire(holder: str) -> BudgetRequest:
    return BudgetRequest("acquire", holder, lease_seconds=LEASE, wait_seconds=WAIT)


def renew(holder: str) -> BudgetRequest:
    return BudgetRequest("renew", holder, lease_seconds=LEASE, wait_seconds=WAIT)


def release(holder: str) -> BudgetRequest:
    return BudgetRequest("release", holder)


def test_grants_up_to_capacity_then_queues_in_arrival_order() -> None:
    budget = Budget()
    answers = [budget.handle(acquire(f"c{i}/0"), at(i), 2) for i in range(5)]
    assert [a["granted"] for a in answers] == [True, True, False, False, False]
    assert [a["position"] for a in answers] == [None, None, 1, 2, 3]
    assert [a.get("grant") for a in answers[:2]] == [1, 2]
    assert (answers[-1]["held"], answers[-1]["waiting"], answers[-1]["capacity"]) == (2, 3, 2)


def test_a_freed_slot_goes_to_the_head_of_the_queue_not_to_a_newcomer_or_a_later_waiter() -> None:
    budget = Budget()
    budget.handle(acquire("a/0"), at(0), 1)
    assert budget.handle(acquire("b/0"), at(1), 1)["position"] == 1
    assert budget.handle(acquire("c/0"), at(2), 1)["position"] == 2
    budget.handle(release("a/0"), at(3), 1)
    assert budget.handle(acquire("d/0"), at(3.1), 1)["granted"] is False  # newcomer queues behind b and c
    assert budget.handle(acquire("c/0"), at(3.2), 1)["granted"] is False  # c is second: the slot is b's
    head = budget.handle(acquire("b/0"), at(3.3), 1)
    assert head["granted"] is True and head["grant"] == 2
    assert [w.holder for w in budget.state.waiters] == ["c/0", "d/0"]


def test_two_free_slots_serve_the_first_two_waiters_in_whichever_order_they_ask() -> None:
    budget = Budget()
    for holder in ("a/0", "a/1", "b/0", "c/0"):
        budget.handle(acquire(holder), at(0), 2)
    budget.handle(release("a/0"), at(1), 2)
    budget.handle(release("a/1"), at(1), 2)
    assert budget.handle(acquire("c/0"), at(2), 2)["granted"] is True  # second in the queue, two slots free
    assert budget.handle(acquire("b/0"), at(2), 2)["granted"] is True


def test_an_expired_lease_is_reclaimed_and_its_slot_granted_to_the_waiter() -> None:
    budget = Budget()
    budget.handle(acquire("dead/0"), at(0), 1)
    assert budget.handle(acquire("live/0"), at(1), 1)["granted"] is False
    assert budget.handle(acquire("live/0"), at(LEASE - 1), 1)["granted"] is False  # not yet
    answer = budget.handle(acquire("live/0"), at(LEASE), 1)
    assert answer["granted"] is True and budget.state.reclaimed == 1
    assert list(budget.state.leases) == ["live/0"]


def test_renewing_keeps_a_slot_past_its_first_lease() -> None:
    budget = Budget()
    budget.handle(acquire("a/0"), at(0), 1)
    for moment in (LEASE / 3, 2 * LEASE / 3, LEASE, 4 * LEASE / 3):
        assert budget.handle(renew("a/0"), at(moment), 1)["granted"] is True
        assert budget.handle(acquire("b/0"), at(moment), 1)["granted"] is False
    assert budget.state.reclaimed == 0 and budget.state.leases["a/0"].until == at(4 * LEASE / 3 + LEASE)


def test_a_renewal_never_takes_a_lapsed_lease_back_and_the_loss_is_counted_once() -> None:
    budget = Budget()
    budget.handle(acquire("a/0"), at(0), 1)
    late = budget.handle(renew("a/0"), at(LEASE + 1), 1)  # lapsed: free, nobody queued, still not taken back
    assert late["granted"] is False and late["position"] is None and budget.state.leases == {}
    assert budget.handle(renew("a/0"), at(LEASE + 2), 1)["granted"] is False  # re-sent after a crash
    assert (budget.state.reclaimed, budget.state.lost) == (1, 1)
    assert budget.position("a/0") is None  # renew never joins the queue
    assert budget.handle(acquire("a/0"), at(LEASE + 3), 1)["granted"] is True  # asking again, like anyone


def test_a_holder_that_asks_again_after_its_lease_was_reclaimed_counts_as_lost() -> None:
    budget = Budget()
    budget.handle(acquire("a/0"), at(0), 1)
    assert budget.handle(acquire("b/0"), at(LEASE), 1)["granted"] is True  # a/0 reclaimed, b/0 served
    assert budget.handle(acquire("a/0"), at(LEASE + 1), 1)["position"] == 1
    assert (budget.state.reclaimed, budget.state.lost, budget.state.peak) == (1, 1, 1)


def test_a_release_folded_into_the_next_acquire_gives_the_slot_to_whoever_is_entitled() -> None:
    budget = Budget()
    budget.handle(acquire("a/0"), at(0), 1)
    folded = replace(acquire("a/1"), release="a/0")
    nobody_waits = budget.handle(folded, at(1), 1)
    assert nobody_waits["granted"] is True and list(budget.state.leases) == ["a/1"]
    assert budget.handle(acquire("b/0"), at(2), 1)["position"] == 1
    someone_waits = budget.handle(replace(acquire("a/2"), release="a/1"), at(3), 1)
    assert someone_waits["granted"] is False and someone_waits["position"] == 2  # b/0 is entitled to the slot
    assert budget.handle(acquire("b/0"), at(4), 1)["granted"] is True
    assert (budget.state.granted, budget.state.released) == (3, 2)


def test_leases_and_waits_are_clamped_to_the_limits() -> None:
    budget = Budget()
    limits = Limits(1, lease_seconds=LEASE, wait_seconds=WAIT)
    day = BudgetRequest("acquire", "a/0", lease_seconds=86_400, wait_seconds=86_400)
    assert budget.handle(day, at(0), limits)["leaseUntil"] == "2026-01-05T09:01:00Z"
    budget.handle(replace(day, holder="b/0"), at(0), limits)
    assert budget.state.waiters[0].until == at(waiter_ttl(LEASE, WAIT))


def test_the_queue_takes_one_entry_per_collection_and_at_most_max_waiters() -> None:
    budget = Budget()
    budget.handle(acquire("a/0"), at(0), 1)
    assert budget.handle(acquire("b/0"), at(0), 1)["position"] == 1
    second = budget.handle(acquire("b/1"), at(0), 1)
    assert second["position"] is None and second["refused"] == REFUSED_COLLECTION_WAITS
    for i in range(2 * MAX_WAITERS):
        budget.handle(acquire(f"c{i}/0"), at(0), 1)
    assert len(budget.state.waiters) == MAX_WAITERS
    assert budget.handle(acquire("late/0"), at(0), 1)["refused"] == REFUSED_QUEUE_FULL


def test_a_waiter_that_stops_asking_lapses_so_it_never_blocks_the_head_for_long() -> None:
    budget = Budget()
    budget.handle(acquire("a/0"), at(0), 1)
    budget.handle(acquire("dead/0"), at(1), 1)  # queued first, then never asks again
    budget.handle(acquire("live/0"), at(2), 1)
    budget.handle(release("a/0"), at(3), 1)
    assert budget.handle(acquire("live/0"), at(4), 1)["granted"] is False  # the dead waiter is still entitled
    ttl = waiter_ttl(LEASE, WAIT)
    assert budget.handle(acquire("live/0"), at(1 + ttl), 1)["granted"] is True
    assert budget.state.lapsed_waiters == 1


def test_waiter_ttl_allows_late_timers_but_never_exceeds_a_lease() -> None:
    assert waiter_ttl(600, 10) == 70  # one poll plus a minute
    assert waiter_ttl(600, 100) == 300  # three polls
    assert waiter_ttl(5, 0.2) == 5  # capped by the lease


def test_operations_are_idempotent_by_holder() -> None:
    budget = Budget()
    first = budget.handle(acquire("a/0"), at(0), 2)
    again = budget.handle(acquire("a/0"), at(0.5), 2)  # re-sent after a crash, with a new request id
    assert (first["grant"], again["grant"], again["held"]) == (1, 1, 1)
    budget.handle(acquire("b/0"), at(1), 1)
    budget.handle(acquire("b/0"), at(1.5), 1)
    assert [w.holder for w in budget.state.waiters] == ["b/0"]
    assert budget.handle(release("a/0"), at(2), 2)["released"] is True
    assert budget.handle(release("a/0"), at(2), 2)["released"] is False
    assert (budget.state.granted, budget.state.released) == (1, 1)


def test_release_gives_back_a_queue_place_too() -> None:
    budget = Budget()
    budget.handle(acquire("a/0"), at(0), 1)
    budget.handle(acquire("b/0"), at(0), 1)
    assert budget.handle(release("b/0"), at(1), 1) == {"released": False, "held": 1, "waiting": 0, "capacity": 1}


def test_one_renew_collection_renews_every_listed_slot_and_names_the_lost_ones() -> None:
    budget = Budget()
    for holder in ("c/0", "c/1", "d/0"):
        budget.handle(acquire(holder), at(0), 3)
    request = BudgetRequest("renew_collection", collection="c", lease_seconds=LEASE, wait_seconds=WAIT)
    answer = budget.handle(replace(request, holders=("c/0", "c/1")), at(50), 3)
    assert (answer["renewed"], answer["lost"]) == (2, [])
    budget.handle(BudgetRequest("status"), at(61), 3)
    leases = budget.state.leases
    assert leases["c/0"].until == leases["c/1"].until == at(110) and "d/0" not in leases  # d/0 was not renewed

    # A lapsed slot is taken back only if that overtakes no one (here g/0 waits for the only slot).
    budget = Budget()
    budget.handle(acquire("c/0"), at(0), 1)
    budget.handle(acquire("g/0"), at(1), 1)
    budget.handle(acquire("g/0"), at(59), 1)  # still queued, still asking
    lapsed = budget.handle(replace(request, holders=("c/0",)), at(70), 1)
    assert (lapsed["renewed"], lapsed["lost"]) == (0, ["c/0"])
    assert budget.handle(acquire("g/0"), at(71), 1)["granted"] is True


def test_release_collection_frees_every_slot_and_queue_place_of_that_collection_only() -> None:
    budget = Budget()
    for holder in ("x/0", "y/0", "x/1", "x/2", "y/1"):
        budget.handle(acquire(holder), at(0), 2)
    answer = budget.handle(BudgetRequest("release_collection", collection="x"), at(1), 2)
    assert answer["released"] == 1
    assert list(budget.state.leases) == ["y/0"] and [w.holder for w in budget.state.waiters] == ["y/1"]


def test_the_budget_clock_never_moves_backwards() -> None:
    budget = Budget()
    budget.handle(acquire("a/0"), at(100), 1)
    late_worker = budget.handle(acquire("b/0"), at(10), 1)  # a worker whose clock is 90 s behind
    assert late_worker["granted"] is False and budget.state.clock == at(100)
    assert budget.state.waiters[0].since == at(100)


def test_capacity_zero_means_no_limit_and_a_lowered_capacity_grants_nothing_until_slots_return() -> None:
    budget = Budget()
    assert all(budget.handle(acquire(f"z/{i}"), at(0), 0)["granted"] for i in range(20))
    assert budget.state.leases == {} and budget.state.granted == 0  # no limit: nothing to keep
    for i in range(5):
        budget.handle(acquire(f"a/{i}"), at(0), 5)
    assert budget.handle(acquire("b/0"), at(1), 3)["granted"] is False  # 5 held, budget now 3
    for i in range(3):
        budget.handle(release(f"a/{i}"), at(2), 3)
    assert budget.handle(acquire("b/0"), at(3), 3)["granted"] is True


def test_state_round_trips_through_json_and_keeps_deciding_the_same() -> None:
    budget = Budget()
    for i, holder in enumerate(("a/0", "b/0", "c/0")):
        budget.handle(acquire(holder), at(i), 1)
    copy = Budget(BudgetState.from_json(budget.state.to_json()))
    assert copy.state.to_json() == budget.state.to_json()
    for each in (budget, copy):
        each.handle(release("a/0"), at(5), 1)
    assert copy.handle(acquire("c/0"), at(6), 1) == budget.handle(acquire("c/0"), at(6), 1)
    assert copy.handle(acquire("b/0"), at(7), 1) == budget.handle(acquire("b/0"), at(7), 1)
    assert Budget(BudgetState.from_json(None)).state.to_json() == BudgetState().to_json()


def test_status_answers_a_snapshot() -> None:
    budget = Budget()
    budget.handle(acquire("a/0"), at(0), 1)
    budget.handle(acquire("b/0"), at(0), 1)
    snapshot = budget.handle(BudgetRequest("status"), at(1), 1)
    assert [x["holder"] for x in snapshot["leases"]] == ["a/0"]
    assert [w["holder"] for w in snapshot["waiters"]] == ["b/0"]
    assert (snapshot["capacity"], snapshot["granted"], snapshot["peak"]) == (1, 1, 1)


# --- wire -----------------------------------------------------------------------------------------------------
def test_entity_key_is_the_lower_cased_tenant_and_the_source() -> None:
    assert entity_key("Contoso.OnMicrosoft.com", "exchange") == "contoso.onmicrosoft.com:exchange"
    assert parse_entity_key("contoso.onmicrosoft.com:graph") == ("contoso.onmicrosoft.com", "graph")


@pytest.mark.parametrize(
    ("tenant", "source", "field"),
    [
        ("contoso.onmicrosoft.com", "mgmt", "source"),
        ("\u212aelvin.onmicrosoft.com", "graph", "tenantId"),  # KELVIN SIGN would lower to "k"
        (" contoso.com", "graph", "tenantId"),
        ("a/../b", "graph", "tenantId"),
    ],
)
def test_entity_key_refuses_what_is_not_a_tenant_and_a_source(tenant: str, source: str, field: str) -> None:
    with pytest.raises(RequestValidationError) as caught:
        entity_key(tenant, source)
    assert caught.value.field == field


@pytest.mark.parametrize("key", ["Contoso.com:graph", "contoso.com", "contoso.com:graph:x", ":graph", "contoso.com:"])
def test_a_key_not_made_by_entity_key_owns_no_budget(key: str) -> None:
    with pytest.raises(RequestValidationError):
        parse_entity_key(key)


def test_requests_are_validated_naming_the_field() -> None:
    good = {"holder": "case-1/3", "leaseSeconds": 60, "waitSeconds": 5}
    assert BudgetRequest.parse("acquire", good) == BudgetRequest("acquire", "case-1/3", "", 60.0, 5.0)
    assert BudgetRequest.parse("release", {"holder": "case-1/3"}).holder == "case-1/3"
    assert BudgetRequest.parse("status", None).op == "status"
    bad = [
        ("steal", good, "operation"),
        ("acquire", "case-1/3", "input"),
        ("acquire", {**good, "holder": "case-1"}, "holder"),
        ("acquire", {**good, "holder": "../x/1"}, "holder"),
        ("acquire", {**good, "leaseSeconds": 0}, "leaseSeconds"),
        ("acquire", {**good, "leaseSeconds": True}, "leaseSeconds"),
        ("acquire", {**good, "leaseSeconds": float("nan")}, "leaseSeconds"),
        ("renew", {**good, "waitSeconds": 61}, "waitSeconds"),
        ("release_collection", {"collection": "a/b"}, "collection"),
        ("renew_collection", {**good, "collection": "case-1", "holders": "case-1/3"}, "holders"),
        ("renew_collection", {**good, "collection": "case-1", "holders": ["case-2/3"]}, "holders"),
        ("renew_collection", {**good, "collection": "case-1", "holders": ["case-1/0"] * 1001}, "holders"),
        ("renew_collection", {**good, "holders": []}, "collection"),
        ("acquire", {**good, "token": "not hex"}, "token"),
        ("release", {"holder": "case-1/3", "token": 7}, "token"),
        ("acquire", {**good, "release": "case-2/0"}, "release"),  # only a lane of the same collection
        ("acquire", {**good, "release": "case-1"}, "release"),
    ]
    for op, data, field in bad:
        with pytest.raises(RequestValidationError) as caught:
            BudgetRequest.parse(op, data)
        assert caught.value.field == field, (op, data)


def test_requests_round_trip_through_their_wire_form() -> None:
    options = BudgetOptions(3, 90.0, 4.0)
    for request in (
        options.acquire("c/1"),
        options.acquire("c/2", token="ab" * 16, release="c/1"),
        options.renew("c/1"),
        options.renew_collection("c", ["c/1"], token="cd" * 16),
        BudgetRequest("release", "c/1", token="ef" * 16),
        BudgetRequest("release", "c/1"),
        BudgetRequest("release_collection", collection="c"),
        options.renew_collection("c", ["c/1", "c/4"]),
        BudgetRequest("status"),
    ):
        assert BudgetRequest.parse(request.op, request.to_json()) == request
    assert options.renew_seconds == 30.0 and options.enabled and not BudgetOptions().enabled
    assert BudgetOptions.from_json(options.to_json()) == options


def test_holder_ids_are_collection_and_lane() -> None:
    assert holder_id("incident-4711", 12) == "incident-4711/12"
    with pytest.raises(RequestValidationError):
        holder_id("bad/id", 1)
