"""Azure Storage Queue semantics, run against the memory and the SQLite store alike."""

from __future__ import annotations

from datetime import timedelta

import pytest

from durable_local.clock import ManualClock
from durable_local.ports import MessageGoneError
from durable_local.storage import MAX_ABANDON_DELAY, StoreBundle, abandon_delay, is_poison
from tests.engine.storage.conftest import T0, message

VT = timedelta(seconds=30)
QUEUE = "hub-control-00"


def ids(messages: list) -> list[int]:  # type: ignore[type-arg]
    return [m.body.event["TaskScheduledId"] for m in messages]


def test_messages_come_out_oldest_first_with_bookkeeping(store: StoreBundle, clock: ManualClock) -> None:
    queue = store.queues.get_queue(QUEUE)
    added = []
    for n in range(5):
        added.append(queue.add(message(n=n)))
        clock.advance(1)
    got = queue.get_messages(3, VT)
    assert ids(got) == [0, 1, 2]
    assert [m.message_id for m in got] == added[:3]
    first = got[0]
    assert first.dequeue_count == 1
    assert first.inserted_on == T0
    assert first.next_visible_on == clock.now() + VT
    assert first.body == message(n=0)
    assert ids(queue.get_messages(32, VT)) == [3, 4]
    assert queue.get_messages(32, VT) == []
    assert queue.approximate_count() == 5


def test_visibility_timeout_hides_then_reshows_with_higher_dequeue_count(
    store: StoreBundle, clock: ManualClock
) -> None:
    queue = store.queues.get_queue(QUEUE)
    queue.add(message(n=7))
    first = queue.get_messages(1, VT)[0]
    clock.advance(VT - timedelta(microseconds=1))
    assert queue.get_messages(1, VT) == []
    clock.advance(timedelta(microseconds=1))
    second = queue.get_messages(1, VT)[0]
    assert second.message_id == first.message_id
    assert second.dequeue_count == 2
    assert second.pop_receipt != first.pop_receipt


def test_stale_pop_receipt_cannot_delete_or_update(store: StoreBundle, clock: ManualClock) -> None:
    queue = store.queues.get_queue(QUEUE)
    queue.add(message())
    first = queue.get_messages(1, VT)[0]
    clock.advance(VT)
    second = queue.get_messages(1, VT)[0]
    with pytest.raises(MessageGoneError):
        queue.delete(first.message_id, first.pop_receipt)
    with pytest.raises(MessageGoneError):
        queue.update_visibility(first.message_id, first.pop_receipt, VT)
    queue.delete(second.message_id, second.pop_receipt)
    assert queue.approximate_count() == 0
    with pytest.raises(MessageGoneError):
        queue.delete(second.message_id, second.pop_receipt)


def test_update_visibility_issues_new_receipt_and_keeps_dequeue_count(store: StoreBundle, clock: ManualClock) -> None:
    queue = store.queues.get_queue(QUEUE)
    queue.add(message())
    got = queue.get_messages(1, VT)[0]
    renewed = queue.update_visibility(got.message_id, got.pop_receipt, timedelta(0))
    assert renewed.pop_receipt != got.pop_receipt
    assert renewed.dequeue_count == 1
    assert renewed.next_visible_on == clock.now()
    with pytest.raises(MessageGoneError):
        queue.delete(got.message_id, got.pop_receipt)
    again = queue.get_messages(1, VT)[0]  # visible at once after update to 0
    assert again.dequeue_count == 2
    queue.delete(again.message_id, again.pop_receipt)


def test_delayed_message_stays_hidden_until_due_and_keeps_queue_order(store: StoreBundle, clock: ManualClock) -> None:
    queue = store.queues.get_queue(QUEUE)
    queue.add(message(n=1), visibility_delay=timedelta(minutes=5))
    queue.add(message(n=2))
    assert ids(queue.get_messages(32, VT)) == [2]
    clock.advance(timedelta(minutes=5))
    got = queue.get_messages(32, VT)
    # Both visible now: the delayed one keeps its place as the older message.
    assert ids(got) == [1, 2]
    assert [m.dequeue_count for m in got] == [1, 2]
    assert got[0].inserted_on == T0


def test_queues_are_independent_and_deletable(store: StoreBundle) -> None:
    a = store.queues.get_queue("hub-control-00")
    b = store.queues.get_queue("hub-workitems")
    a.add(message(n=1))
    b.add(message(n=2))
    b.add(message(n=3))
    assert (a.approximate_count(), b.approximate_count()) == (1, 2)
    assert ids(store.queues.get_queue("hub-workitems").get_messages(32, VT)) == [2, 3]
    store.queues.delete_queue("hub-workitems")
    assert store.queues.get_queue("hub-workitems").approximate_count() == 0
    assert a.approximate_count() == 1


def test_returned_messages_are_private_copies(store: StoreBundle, clock: ManualClock) -> None:
    queue = store.queues.get_queue(QUEUE)
    queue.add(message(n=1))
    got = queue.get_messages(1, VT)[0]
    got.body.event["IsPlayed"] = True
    clock.advance(VT)
    assert queue.get_messages(1, VT)[0].body.event["IsPlayed"] is False


@pytest.mark.parametrize("name", ["ab", "Hub-control-00", "hub--x", "-hub", "hub-", "hub_x", "a" * 64])
def test_invalid_queue_names_are_rejected(store: StoreBundle, name: str) -> None:
    with pytest.raises(ValueError, match="queue name"):
        store.queues.get_queue(name)


def test_argument_limits(store: StoreBundle) -> None:
    queue = store.queues.get_queue(QUEUE)
    with pytest.raises(ValueError, match="1 to 32"):
        queue.get_messages(33, VT)
    with pytest.raises(ValueError, match="1 to 32"):
        queue.get_messages(0, VT)
    with pytest.raises(ValueError, match="negative"):
        queue.add(message(), visibility_delay=timedelta(seconds=-1))


def test_abandon_backoff_schedule_with_manual_clock(store: StoreBundle, clock: ManualClock) -> None:
    """Abandon the same message again and again: it reappears after 2, 4, ... 512, 600, 600 s."""
    queue = store.queues.get_queue(QUEUE)
    queue.add(message())
    observed: list[int] = []
    poison: list[bool] = []
    for _ in range(12):
        got = queue.get_messages(1, VT)
        assert len(got) == 1
        delay = abandon_delay(got[0].dequeue_count)
        queue.update_visibility(got[0].message_id, got[0].pop_receipt, delay)
        clock.advance(delay - timedelta(microseconds=1))
        assert queue.get_messages(1, VT) == []  # still hidden just before the delay ends
        clock.advance(timedelta(microseconds=1))
        observed.append(int(delay.total_seconds()))
        poison.append(is_poison(delay))
    assert observed == [2, 4, 8, 16, 32, 64, 128, 256, 512, 600, 600, 600]
    assert poison == [False] * 9 + [True] * 3


def test_abandon_delay_caps() -> None:
    assert abandon_delay(0) == timedelta(seconds=1)
    assert abandon_delay(30) == MAX_ABANDON_DELAY
    assert abandon_delay(31) == MAX_ABANDON_DELAY
    assert abandon_delay(10_000) == MAX_ABANDON_DELAY
    assert not is_poison(timedelta(seconds=599))
