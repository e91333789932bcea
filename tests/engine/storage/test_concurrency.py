"""Many threads on one store: every message delivered once, ETag compare-and-swap never loses a write."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

from durable_local.ports import EtagConflictError, HistoryBatch
from durable_local.storage import StoreBundle
from tests.engine.storage.conftest import event, message

THREADS = 6
PER_THREAD = 60


def _run(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive()


def test_concurrent_producers_and_consumers_deliver_each_message_once(store: StoreBundle) -> None:
    queue = store.queues.get_queue("hub-workitems")
    delivered: Counter[tuple[str, int]] = Counter()
    lock = threading.Lock()
    producers_done = threading.Event()
    errors: list[BaseException] = []

    def produce(k: int) -> None:
        for n in range(PER_THREAD):
            queue.add(message(f"p{k}", n))

    def consume() -> None:
        try:
            # The manual clock never moves here, so a taken message can only be seen again if the
            # store failed to hide it.
            while True:
                got = queue.get_messages(4, timedelta(minutes=5))
                if not got:
                    if producers_done.is_set() and queue.get_messages(32, timedelta(minutes=5)) == []:
                        return
                    continue
                for m in got:
                    with lock:
                        delivered[(m.body.instance_id, m.body.sequence_number)] += 1
                    queue.delete(m.message_id, m.pop_receipt)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    producers = [threading.Thread(target=produce, args=(k,)) for k in range(THREADS)]
    consumers = [threading.Thread(target=consume) for _ in range(THREADS)]
    for thread in consumers:
        thread.start()
    _run(producers)
    producers_done.set()
    for thread in consumers:
        thread.join(timeout=60)
    assert errors == []
    assert len(delivered) == THREADS * PER_THREAD
    assert set(delivered.values()) == {1}
    assert queue.approximate_count() == 0


def test_racing_history_writers_never_lose_a_committed_batch(store: StoreBundle) -> None:
    tracking = store.tracking
    tracking.write_history_batch(HistoryBatch("race", "e", 0, [event(0)], True), None)
    wins: Counter[int] = Counter()
    conflicts: Counter[int] = Counter()

    def writer(k: int) -> None:
        for _ in range(30):
            history = tracking.get_history("race")
            mark = event(1000 * k + len(history.events))
            try:
                tracking.write_history_batch(HistoryBatch("race", "e", len(history.events), [mark], True), history.etag)
                wins[k] += 1
            except EtagConflictError:
                conflicts[k] += 1

    _run([threading.Thread(target=writer, args=(k,)) for k in range(THREADS)])
    events = tracking.get_history("race").events
    # Each successful compare-and-swap appended exactly one row; no row was overwritten by a loser.
    assert len(events) == 1 + sum(wins.values())
    assert sum(wins.values()) + sum(conflicts.values()) == THREADS * 30
    assert [e["EventId"] % 1000 for e in events] == list(range(len(events)))
