"""MessageSorter: per-sender order and de-duplication of entity requests (the extension's MessageSorter.cs)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from durable_local.entities.dotnet import ticks_of, to_ticks
from durable_local.entities.messages import RequestMessage
from durable_local.entities.sorter import MessageSorter

NOW = to_ticks(datetime(2024, 1, 1, tzinfo=UTC))
WINDOW = ticks_of(timedelta(minutes=30))


def _sent(count: int, *, sender: str = "orch", execution: str = "e1", at: int = NOW) -> list[RequestMessage]:
    """``count`` requests one orchestration sends to one entity in one episode (same current time)."""
    outgoing = MessageSorter()
    messages = []
    for index in range(count):
        message = RequestMessage(
            id=f"{sender}-{execution}-{index}", operation="op", parent_instance_id=sender, parent_execution_id=execution
        )
        outgoing.label_outgoing(message, "@counter@k", at, WINDOW)
        messages.append(message)
    return messages


def _ids(messages: list[RequestMessage]) -> list[str]:
    return [m.id for m in messages]


def test_labels_are_strictly_increasing_and_chain_predecessors() -> None:
    messages = _sent(3)
    assert [m.timestamp for m in messages] == [NOW, NOW + 1, NOW + 2]  # same clock: +1 tick each
    assert [m.predecessor for m in messages] == [0, NOW, NOW + 1]


def test_out_of_order_arrivals_are_delivered_in_send_order() -> None:
    a, b, c = _sent(3)
    receiver = MessageSorter()
    assert receiver.receive_in_order(c, WINDOW) == []  # waits for b
    assert receiver.receive_in_order(b, WINDOW) == []  # waits for a
    assert receiver.buffered_count == 2
    assert _ids(receiver.receive_in_order(a, WINDOW)) == _ids([a, b, c])
    assert receiver.buffered_count == 0


def test_duplicates_of_delivered_requests_are_dropped() -> None:
    a, b = _sent(2)
    receiver = MessageSorter()
    assert _ids(receiver.receive_in_order(a, WINDOW)) == [a.id]
    assert _ids(receiver.receive_in_order(b, WINDOW)) == [b.id]
    resent = _sent(2)  # a replay after a crash re-sends identical labels
    assert receiver.receive_in_order(resent[0], WINDOW) == []
    assert receiver.receive_in_order(resent[1], WINDOW) == []


def test_senders_are_ordered_independently_and_a_new_execution_starts_over() -> None:
    receiver = MessageSorter()
    _, x2 = _sent(2, sender="x")
    (y1,) = _sent(1, sender="y")
    assert receiver.receive_in_order(x2, WINDOW) == []
    assert _ids(receiver.receive_in_order(y1, WINDOW)) == [y1.id]  # another sender is not held back
    (new_execution,) = _sent(1, sender="x", execution="e2")
    # The held request of the old execution is released, then the new execution's request is delivered.
    assert _ids(receiver.receive_in_order(new_execution, WINDOW)) == [x2.id, new_execution.id]


def test_client_signals_and_a_zero_window_pass_through() -> None:
    receiver = MessageSorter()
    client = RequestMessage(id="c", operation="add", is_signal=True)
    assert receiver.receive_in_order(client, WINDOW) == [client]
    assert receiver.receive_in_order(client, WINDOW) == [client]  # no de-duplication without a sender
    _, b = _sent(2)
    assert _ids(MessageSorter().receive_in_order(b, 0)) == [b.id]


def test_requests_older_than_the_window_are_not_held_back() -> None:
    receiver = MessageSorter()
    late = ticks_of(timedelta(hours=2))
    (current,) = _sent(1, sender="z", at=NOW + late)
    assert _ids(receiver.receive_in_order(current, WINDOW)) == [current.id]  # moves the horizon
    _, old_second = _sent(2)  # its predecessor is before the horizon: delivered at once
    assert _ids(receiver.receive_in_order(old_second, WINDOW)) == [old_second.id]


def test_sorter_state_survives_persistence_with_buffered_requests() -> None:
    a, b, c = _sent(3)
    receiver = MessageSorter()
    receiver.receive_in_order(c, WINDOW)
    restored = MessageSorter.from_json(receiver.to_json())
    assert restored.buffered_count == 1
    assert _ids(restored.receive_in_order(a, WINDOW)) == [a.id]
    assert _ids(restored.receive_in_order(b, WINDOW)) == [b.id, c.id]
