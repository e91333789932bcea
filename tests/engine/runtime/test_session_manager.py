"""One test per behaviour of the seed's OrchestrationSessionManager, over the real memory store (history
prefetch and MaxHistoryEvents: ``test_session_prefetch.py``)."""

from __future__ import annotations

import threading
from datetime import timedelta

from durable_local import history
from durable_local.faults import CrashPoint, FaultInjector
from durable_local.model import RuntimeStatus

from .conftest import T0, completed_message, fast_settings, raised_message, start_message, wait_until
from .session_support import instance_row, make_manager, no_session_until, visible_now

# -- ExecutionStarted de-duplication ----------------------------------------------------------------


def test_dedupe_keeps_matching_start(store, settings, queues) -> None:
    store.tracking.set_new_execution(instance_row("i1", "e1", RuntimeStatus.PENDING), overwrite=False)
    queues.put(start_message("i1", "e1"))
    manager = make_manager(store, settings, queues)
    kept = manager.dedupe_execution_started(queues.control, queues.read())
    assert [m.body.execution_id for m in kept] == ["e1"]
    assert queues.raw.approximate_count() == 1


def test_dedupe_discards_start_scheduled_after_instance_update(store, settings, queues, clock) -> None:
    # Row (Pending, e1) written at T0; a start for e2 (same generation) stamped after it is redundant.
    store.tracking.set_new_execution(instance_row("i1", "e1", RuntimeStatus.PENDING), overwrite=False)
    queues.put(start_message("i1", "e2", at=T0 + timedelta(seconds=1)))
    faults = FaultInjector()
    manager = make_manager(store, settings, queues, faults=faults)
    assert manager.dedupe_execution_started(queues.control, queues.read()) == []
    assert wait_until(lambda: queues.raw.approximate_count() == 0)
    assert faults.hits(CrashPoint.C11_DUPLICATE_START_DISCARDED) == 1


def test_dedupe_discards_by_reinsertion_time(store, settings, queues, clock) -> None:
    # Row is Running (not Pending), so only the re-insertion rule applies, and only after the first dequeue.
    store.tracking.set_new_execution(instance_row("i1", "e1", RuntimeStatus.RUNNING), overwrite=False)
    queues.put(start_message("i1", "e2", at=T0 - timedelta(seconds=1)))
    manager = make_manager(store, settings, queues)
    first = queues.read()
    assert manager.dedupe_verdict(first[0], store.tracking.get_instance("i1")) == "defer"
    clock.advance(settings.control_queue_visibility_timeout + timedelta(seconds=1))
    second = queues.read()
    assert second[0].dequeue_count == 2
    assert manager.dedupe_verdict(second[0], store.tracking.get_instance("i1")) == "discard"


def test_dedupe_discards_at_dequeue_count_10(store, settings, queues, clock) -> None:
    queues.put(start_message("i1", "e1"))
    manager = make_manager(store, settings, queues)
    verdicts = []
    for _ in range(10):
        clock.advance(settings.control_queue_visibility_timeout + timedelta(seconds=1))
        (message,) = queues.read()
        verdicts.append(manager.dedupe_verdict(message, None))
    assert verdicts == ["defer"] * 9 + ["discard"]
    assert manager.dedupe_execution_started(queues.control, [message]) == []
    assert wait_until(lambda: queues.raw.approximate_count() == 0)


def test_dedupe_defers_unknown_start(store, settings, queues, clock) -> None:
    queues.put(start_message("i1", "e1"))
    manager = make_manager(store, settings, queues)
    assert manager.dedupe_execution_started(queues.control, queues.read()) == []
    # Deferred = abandoned with the back-off for dequeue count 1 (2 s), never deleted.
    assert wait_until(lambda: queues.tracker.count() == 0)
    assert queues.raw.approximate_count() == 1
    assert visible_now(queues) == 0
    clock.advance(timedelta(seconds=2))
    assert visible_now(queues) == 1


def test_dedupe_skips_sub_orchestration_starts(store, settings, queues) -> None:
    parent = history.ParentInstance(name="p", instance_id="p1", execution_id="pe", task_scheduled_id=0)
    event = history.execution_started(
        timestamp=T0, name="child", instance_id="c1", execution_id="ce", input=None, parent=parent
    )
    from durable_local.model import TaskMessage

    queues.put(TaskMessage("c1", "ce", event))
    manager = make_manager(store, settings, queues)
    assert len(manager.dedupe_execution_started(queues.control, queues.read())) == 1


def test_dedupe_can_be_disabled(store, queues) -> None:
    settings = fast_settings(disable_execution_started_dedup=True)
    queues.put(start_message("i1", "e1"))
    manager = make_manager(store, settings, queues)
    assert len(manager.dedupe_execution_started(queues.control, queues.read())) == 1


# -- Pending batches ----------------------------------------------------------------------------------


def test_pending_batch_add_or_replace_by_message_id(store, settings, queues, clock) -> None:
    queues.put(raised_message("i1", None))
    manager = make_manager(store, settings, queues)
    manager.add_messages_to_pending(queues.control, queues.read())
    clock.advance(settings.control_queue_visibility_timeout + timedelta(seconds=1))
    again = queues.read()  # the same physical message, dequeued a second time
    manager.add_messages_to_pending(queues.control, again)
    batch = manager._pending_batches[0]
    assert len(manager._pending_batches) == 1
    assert len(batch.messages) == 1
    assert batch.messages.to_list()[0].pop_receipt == again[0].pop_receipt


def test_execution_started_opens_new_batch(store, settings, queues) -> None:
    queues.put(start_message("i1", "e1"))
    queues.put(start_message("i1", "e1"))
    queues.put(completed_message("i1", "e1", 0))
    manager = make_manager(store, settings, queues)
    manager.add_messages_to_pending(queues.control, queues.read())
    sizes = [len(b.messages) for b in manager._pending_batches]
    assert sizes == [1, 2]  # each start opens a batch; the completion joins the newest matching one


def test_null_execution_batch_adopts_execution_id(store, settings, queues) -> None:
    queues.put(raised_message("i1", None))
    queues.put(completed_message("i1", "e7", 3))
    manager = make_manager(store, settings, queues)
    manager.add_messages_to_pending(queues.control, queues.read())
    assert len(manager._pending_batches) == 1
    assert manager._pending_batches[0].execution_id == "e7"


def test_other_execution_opens_its_own_batch(store, settings, queues) -> None:
    queues.put(completed_message("i1", "e1", 0))
    queues.put(completed_message("i1", "e2", 0))
    manager = make_manager(store, settings, queues)
    manager.add_messages_to_pending(queues.control, queues.read())
    assert [b.execution_id for b in manager._pending_batches] == ["e1", "e2"]


def test_one_active_session_per_instance_case_insensitive(store, settings, queues) -> None:
    queues.put(completed_message("ABC", "e1", 0))
    queues.put(completed_message("abc", "e2", 0))
    manager = make_manager(store, settings, queues)
    try:
        manager.add_messages_to_pending(queues.control, queues.read())
        first = manager.get_next_session(timeout=5)
        assert first is not None
        # Either batch may be prefetched first; the other must wait: same instance once case-folded.
        assert manager.get_next_session(timeout=0.2) is None
        assert manager.try_release_session(first.instance_id) is first
        second = manager.get_next_session(timeout=5)
        assert second is not None
        assert {first.instance_id, second.instance_id} == {"ABC", "abc"}
    finally:
        manager.shutdown()


def test_messages_merged_into_active_session(store, settings, queues) -> None:
    queues.put(completed_message("i1", "e1", 0))
    manager = make_manager(store, settings, queues)
    try:
        manager.add_messages_to_pending(queues.control, queues.read())
        session = manager.get_next_session(timeout=5)
        assert session is not None
        queues.put(raised_message("I1", None))  # null execution id: management message for the session
        queues.put(completed_message("i1", "e1", 1))
        manager.add_messages_to_pending(queues.control, queues.read())
        assert len(session.pending_messages) == 2
        assert manager.get_stats().pending_instances == 0
    finally:
        manager.shutdown()


def test_ready_batch_of_the_active_execution_is_merged_into_the_session(store, settings, queues) -> None:
    queues.put(start_message("i1", "e1"))
    queues.put(start_message("i1", "e1"))  # a duplicate start opens a second batch for the same execution
    manager = make_manager(store, settings, queues)
    try:
        manager.add_messages_to_pending(queues.control, queues.read())
        session = manager.get_next_session(timeout=5)
        assert session is not None
        # The duplicate's batch is merged once its prefetch ends (however slow the machine), never a 2nd session.
        assert no_session_until(manager, lambda: len(session.pending_messages) == 1)
        assert manager.get_stats().pending_instances == 0
    finally:
        manager.shutdown()


def test_other_generation_requeued_with_delay(store, queues) -> None:
    settings = fast_settings(requeue_delay=timedelta(seconds=1))
    queues.put(completed_message("i1", "e1", 0))
    manager = make_manager(store, settings, queues)
    try:
        manager.add_messages_to_pending(queues.control, queues.read())
        session = manager.get_next_session(timeout=5)
        assert session is not None
        queues.put(start_message("i1", "e2"))  # a start always opens a batch, even with a session active
        manager.add_messages_to_pending(queues.control, queues.read())
        assert no_session_until(manager, lambda: manager.requeued_other_generation >= 1)
        # While the 200 ms-style delay runs, the batch is out of the pending list; it comes back after it.
        assert manager.get_stats().pending_instances == 0
        assert wait_until(lambda: manager.get_stats().pending_instances == 1)
        manager.try_release_session("i1")
        nxt = manager.get_next_session(timeout=5)
        assert nxt is not None and nxt.execution_id == "e2"
    finally:
        manager.shutdown()


def test_release_puts_unprocessed_messages_back(store, settings, queues) -> None:
    queues.put(completed_message("i1", "e1", 0))
    queues.put(completed_message("i1", "e1", 5))
    manager = make_manager(store, settings, queues)
    try:
        manager.add_messages_to_pending(queues.control, queues.read()[:1])
        session = manager.get_next_session(timeout=5)
        assert session is not None
        rest = queues.read()
        manager.add_messages_to_pending(queues.control, rest)  # goes to the session's next batch
        deferred = session.current_batch[0]
        session.defer(deferred)
        manager.try_release_session("i1")
        assert manager.get_stats().pending_instances == 1
        again = manager.get_next_session(timeout=5)
        assert again is not None
        ids = {m.message_id for m in again.current_batch}
        assert ids == {deferred.message_id} | {m.message_id for m in rest}
    finally:
        manager.shutdown()


def test_drain_waits_then_times_out(store, settings, queues) -> None:
    faults = FaultInjector()
    manager = make_manager(store, settings, queues, faults=faults)
    try:
        manager.add_queue(queues.raw.name, queues.control)
        queues.put(completed_message("i1", "e1", 0))
        session = manager.get_next_session(timeout=5)
        assert session is not None
        assert manager.drain(queues.raw.name, timedelta(milliseconds=100)) is False
        assert faults.hits(CrashPoint.C15_DRAIN_TIMEOUT) == 1
        assert not manager.is_control_queue_receiving_messages(queues.raw.name)
    finally:
        manager.shutdown()


def test_drain_completes_when_sessions_finish(store, settings, queues) -> None:
    manager = make_manager(store, settings, queues)
    try:
        manager.add_queue(queues.raw.name, queues.control)
        queues.put(completed_message("i1", "e1", 0))
        session = manager.get_next_session(timeout=5)
        assert session is not None
        timer = threading.Timer(0.05, manager.try_release_session, args=("i1",))
        timer.start()
        assert manager.drain(queues.raw.name, timedelta(seconds=5)) is True
        assert queues.control.is_released
    finally:
        manager.shutdown()


def test_wait_for_dequeue_loop_exit_only_after_release(store, settings, queues) -> None:
    manager = make_manager(store, settings, queues)
    try:
        manager.add_queue(queues.raw.name, queues.control)
        assert manager.wait_for_dequeue_loop_exit(queues.raw.name, timeout=0.05) is False  # still listening
        manager.release_queue(queues.raw.name)
        assert manager.wait_for_dequeue_loop_exit(queues.raw.name, timeout=30) is True
        queues.put(completed_message("i1", "e1", 0))
        assert visible_now(queues) == 1  # nobody reads the queue any more
    finally:
        manager.shutdown()


def test_stats(store, settings, queues) -> None:
    queues.put(completed_message("i1", "e1", 0))
    queues.put(completed_message("i2", "e1", 0))
    queues.put(completed_message("i2", "e1", 1))
    manager = make_manager(store, settings, queues)
    try:
        manager.add_messages_to_pending(queues.control, queues.read())
        stats = manager.get_stats()
        assert (stats.pending_instances, stats.pending_messages, stats.active_sessions) == (2, 3, 0)
        assert manager.get_next_session(timeout=5) is not None
        stats = manager.get_stats()
        assert (stats.pending_instances, stats.active_sessions) == (1, 1)
    finally:
        manager.shutdown()


def test_dequeue_loop_feeds_sessions_and_resume_listening(store, settings, queues) -> None:
    manager = make_manager(store, settings, queues)
    try:
        manager.add_queue(queues.raw.name, queues.control)
        manager.add_queue(queues.raw.name, queues.control)  # second add is ignored (logged)
        queues.put(completed_message("i1", "e1", 0))
        session = manager.get_next_session(timeout=5)
        assert session is not None and session.instance_id == "i1"
        manager.release_queue(queues.raw.name)
        assert not manager.is_control_queue_receiving_messages(queues.raw.name)
        from durable_local.sessions.control_queue import ControlQueue

        fresh = ControlQueue(queues.raw, partition=0, settings=settings, pending=queues.tracker)
        assert manager.resume_listening_if_own_queue(queues.raw.name, fresh) is False
        assert manager.is_control_queue_receiving_messages(queues.raw.name)
        queues.put(completed_message("i2", "e1", 0))
        nxt = manager.get_next_session(timeout=5)
        assert nxt is not None and nxt.instance_id == "i2"
    finally:
        manager.shutdown()
