"""One test per crash point C1..C15 (the table in ``docs/durable-protocol.md``), asserting its consequence.

A crash kills worker A (``WorkerKilled``: its threads stop without releasing, abandoning or deleting
anything); worker B is a new ``Engine`` on the same store. Time is a ``ManualClock``: the test "pumps" it
forward so that hidden messages reappear after their visibility timeouts, without real waiting.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from durable_local.engine import Engine
from durable_local.faults import CrashPoint, FaultInjector, WorkerKilled
from durable_local.history import event_raised, task_completed
from durable_local.model import RuntimeStatus, TaskMessage
from durable_local.ports import HistoryBatch

from .conftest import client_input, fast_settings, wait_until
from .world import World


def _crash(
    world: World,
    point: CrashPoint,
    *,
    when: Callable[[dict[str, Any]], bool] | None = None,
    activities: bool = True,
) -> Engine:
    faults = FaultInjector()
    faults.arm(point, when=when)
    return world.engine(faults, activities=activities)


def _killed(engine: Engine) -> None:
    assert wait_until(lambda: engine.is_dead, timeout=20), "the armed crash point was never reached"
    engine.stop(drain_timeout=0)


def test_crash_c1_after_replay_before_send_replays_identically(world: World) -> None:
    a = _crash(world, CrashPoint.C1_AFTER_REPLAY, activities=False)
    instance_id = a.start_new("chain")
    _killed(a)
    assert world.store.queues.get_queue("testhubname-workitems").approximate_count() == 0  # nothing sent
    b = world.engine()
    assert world.finish(b, instance_id) == (RuntimeStatus.COMPLETED, "abc")
    assert world.calls("echo:a") == 1  # no duplicate activity


def test_crash_c2_after_outbound_before_history_runs_activity_twice(world: World) -> None:
    # Worker A runs no activities, so only the re-run episode and the first send can execute "echo a".
    a = _crash(world, CrashPoint.C2_AFTER_OUTBOUND_MESSAGE, when=lambda c: c["kind"] == "activity", activities=False)
    instance_id = a.start_new("chain")
    _killed(a)
    b = world.engine()
    assert world.finish(b, instance_id) == (RuntimeStatus.COMPLETED, "abc")
    assert world.calls("echo:a") == 2  # at-least-once: the re-run episode re-sent the activity
    assert b.stats()["out_of_order_abandoned"] >= 1  # the first response arrived before its TaskScheduled


def test_crash_c3_between_history_batches_partial_checkpoint_is_handled(world: World) -> None:
    a = _crash(world, CrashPoint.C3_BETWEEN_HISTORY_BATCHES, activities=False)
    instance_id = a.start_new("fan_out", input_json=client_input(150))  # 153 new events: two history batches
    _killed(a)
    partial = world.store.tracking.get_history(instance_id)
    assert partial.checkpoint_complete is False and len(partial.events) == 99
    b = world.engine()
    assert world.finish(b, instance_id) == (RuntimeStatus.COMPLETED, sum(i * i for i in range(150)))
    assert b.stats()["partial_checkpoints_seen"] >= 1
    assert all(world.calls(f"square:{i}") >= 1 for i in range(150))


def test_crash_c4_after_history_before_instance_row_is_repaired(world: World) -> None:
    a = _crash(world, CrashPoint.C4_AFTER_HISTORY, activities=False)
    instance_id = a.start_new("chain")
    _killed(a)
    stale = world.store.tracking.get_instance(instance_id)
    assert stale is not None and stale.status is RuntimeStatus.PENDING  # row stale, history committed
    assert world.store.tracking.get_history(instance_id).events
    b = world.engine()
    assert world.finish(b, instance_id) == (RuntimeStatus.COMPLETED, "abc")
    assert world.calls("echo:a") == 1


def test_crash_c4_on_the_final_episode_terminal_row_is_repaired(world: World) -> None:
    episodes = iter(range(1, 100))
    a = _crash(world, CrashPoint.C4_AFTER_HISTORY, when=lambda c: next(episodes) == 4)  # chain: 4 episodes
    instance_id = a.start_new("chain")
    _killed(a)
    stale = world.store.tracking.get_instance(instance_id)
    assert stale is not None and stale.status is RuntimeStatus.RUNNING  # history already says Completed
    b = world.engine()
    # The redelivered completion finds a terminal history: the row is repaired, the messages discarded.
    assert world.finish(b, instance_id) == (RuntimeStatus.COMPLETED, "abc")
    assert world.calls("echo:abc") == 1


def test_crash_c5_after_instance_row_before_delete_replays_without_side_effects(world: World) -> None:
    a = _crash(world, CrashPoint.C5_AFTER_INSTANCE_UPDATE, activities=False)
    instance_id = a.start_new("chain")
    _killed(a)
    b = world.engine()
    assert world.finish(b, instance_id) == (RuntimeStatus.COMPLETED, "abc")
    # The redelivered ExecutionStarted was a duplicate: dropped by reconciliation, no new actions.
    assert world.pump_until(lambda: b.stats()["discarded_messages"] >= 1)
    assert world.calls("echo:a") == 1


def test_crash_c6_split_brain_etag_conflict_abandons_the_work_item(world: World) -> None:
    faults = FaultInjector()

    def other_worker_writes(context: dict[str, Any]) -> None:
        session = context["session"]
        batch = HistoryBatch(session.instance_id, session.execution_id, 0, session.history[:1], True)
        world.store.tracking.write_history_batch(batch, context["etag"])  # moves the sentinel ETag

    faults.arm(CrashPoint.C6_BEFORE_HISTORY_COMMIT, when=lambda c: c["etag"] is not None, action=other_worker_writes)
    engine = world.engine(faults)
    instance_id = engine.start_new("chain")
    assert world.finish(engine, instance_id) == (RuntimeStatus.COMPLETED, "abc")
    assert engine.stats()["split_brain"] == 1
    assert world.calls("echo:ab") == 2  # the loser's outbound message was already sent: a duplicate


def test_crash_c7_out_of_order_response_abandoned_then_processed(world: World) -> None:
    # The lease moved (here: the worker died) after the activity was sent but before the history commit.
    a = _crash(world, CrashPoint.C2_AFTER_OUTBOUND_MESSAGE, when=lambda c: c["kind"] == "activity", activities=False)
    instance_id = a.start_new("chain")
    _killed(a)
    faults = FaultInjector()
    b = world.engine(faults)
    assert world.finish(b, instance_id) == (RuntimeStatus.COMPLETED, "abc")
    assert faults.hits(CrashPoint.C7_OUT_OF_ORDER_MESSAGE) >= 1


def test_crash_c8_activity_after_execute_before_response_reruns_it(world: World) -> None:
    a = _crash(world, CrashPoint.C8_ACTIVITY_AFTER_EXECUTE)
    instance_id = a.start_new("chain")
    _killed(a)
    assert world.calls("echo:a") == 1
    b = world.engine()
    assert world.finish(b, instance_id) == (RuntimeStatus.COMPLETED, "abc")
    assert world.calls("echo:a") == 2


def test_crash_c9_activity_after_response_before_delete_duplicates_completion(world: World) -> None:
    a = _crash(world, CrashPoint.C9_ACTIVITY_AFTER_RESPONSE)
    instance_id = a.start_new("chain")
    _killed(a)
    b = world.engine()
    assert world.finish(b, instance_id) == (RuntimeStatus.COMPLETED, "abc")
    assert world.pump_until(lambda: world.calls("echo:a") == 2)  # re-executed after the visibility timeout
    assert world.pump_until(lambda: b.stats()["pending_messages"] == 0 and b.stats()["active_sessions"] == 0)
    assert b.get_status(instance_id).runtime_status is RuntimeStatus.COMPLETED  # type: ignore[union-attr]


def test_crash_c10_client_between_enqueue_and_row_start_deferred_then_discarded(world: World) -> None:
    client_faults = FaultInjector()
    client_faults.arm(CrashPoint.C10_CLIENT_AFTER_START_ENQUEUE)
    client = world.engine(client_faults, start=False)
    with pytest.raises(WorkerKilled):
        client.start_new("chain", instance_id="orphan")
    assert world.store.tracking.get_instance("orphan") is None
    faults = FaultInjector()
    worker = world.engine(faults)
    queue = worker.control_queue_for("orphan")
    # Deferred with back-off 2, 4, ... 512 s, then discarded at dequeue count >= 10.
    assert world.pump_until(lambda: queue.approximate_count() == 0, step=60)
    assert faults.hits(CrashPoint.C11_DUPLICATE_START_DISCARDED) == 1
    assert world.store.tracking.get_instance("orphan") is None
    assert world.calls("echo:a") == 0


def test_crash_c11_client_retry_runs_exactly_one_execution(world: World) -> None:
    client_faults = FaultInjector()
    client_faults.arm(CrashPoint.C10_CLIENT_AFTER_START_ENQUEUE)
    client = world.engine(client_faults, start=False)
    with pytest.raises(WorkerKilled):
        client.start_new("chain", instance_id="retried")
    world.clock.advance(1)
    faults = FaultInjector()
    worker = world.engine(faults)
    worker.start_new("chain", instance_id="retried")  # the client's retry: a new execution id
    assert world.finish(worker, "retried") == (RuntimeStatus.COMPLETED, "abc")
    queue = worker.control_queue_for("retried")
    assert world.pump_until(lambda: queue.approximate_count() == 0, step=60)
    assert faults.hits(CrashPoint.C11_DUPLICATE_START_DISCARDED) == 1
    assert world.calls("echo:a") == 1


def test_crash_c12_same_message_dequeued_twice_is_processed_once(world: World) -> None:
    faults = FaultInjector()
    engine = world.engine(faults, start=False)
    instance_id = engine.start_new("wait_event")
    engine.start()
    assert world.pump_until(
        lambda: engine.get_status(instance_id).runtime_status is RuntimeStatus.RUNNING  # type: ignore[union-attr]
    )
    # Buffer a raised event, let its visibility expire while buffered, dequeue it again: one copy survives.
    control = engine.sessions.queues[0]
    for queue in engine.sessions.queues:
        if queue.queue.name == engine.control_queue_for(instance_id).name:
            control = queue
    engine.sessions.release_queue(control.queue.name)  # stop its loop; read by hand below
    # The loop must be gone before the event is sent, or it could still take the message (a flake under load).
    assert engine.sessions.wait_for_dequeue_loop_exit(control.queue.name, timeout=30)
    engine.raise_event(instance_id, "go", json.dumps(7))
    first = control.queue.get_messages(32, timedelta(minutes=5))
    for message in first:
        engine.sessions.pending_tracker.try_add(message.message_id, control.queue.name)
    world.clock.advance(timedelta(minutes=6))
    from durable_local.sessions.control_queue import ControlQueue

    reader = ControlQueue(
        control.queue,
        partition=control.partition,
        settings=engine.settings,
        pending=engine.sessions.pending_tracker,
        faults=faults,
    )
    stop_after_one = reader.get_messages()
    assert faults.hits(CrashPoint.C12_DUPLICATE_DEQUEUE) == 1
    engine.sessions.add_messages_to_pending(reader, first + stop_after_one)
    engine.sessions.resume_listening_if_own_queue(control.queue.name, reader)
    assert world.finish(engine, instance_id) == (RuntimeStatus.COMPLETED, {"got": 7})
    history = engine.get_status(instance_id, show_history=True).history  # type: ignore[union-attr]
    assert sum(1 for e in history or [] if e["EventType"] == 15) == 1


def test_crash_c13_old_generation_messages_discarded(world: World) -> None:
    faults = FaultInjector()
    engine = world.engine(faults)
    instance_id = engine.start_new("counter", input_json=client_input(0))
    first_execution = engine.get_status(instance_id).execution_id  # type: ignore[union-attr]
    assert world.finish(engine, instance_id) == (RuntimeStatus.COMPLETED, 3)
    stale = TaskMessage(instance_id, first_execution, event_raised(timestamp=world.clock.now(), name="x", input=None))
    queue = engine.control_queue_for(instance_id)
    queue.add(stale)
    assert world.pump_until(lambda: queue.approximate_count() == 0)
    assert faults.hits(CrashPoint.C13_STALE_GENERATION_DISCARDED) >= 1
    assert world.finish(engine, instance_id) == (RuntimeStatus.COMPLETED, 3)


def test_crash_c13_stale_message_never_overwrites_the_row_of_a_newer_execution(world: World) -> None:
    # A leftover message of a finished execution (e.g. a timer) arrives after the same instance id was started
    # again: the terminal-row repair must leave the new execution's row alone (DTFx compares execution ids).
    faults = FaultInjector()
    engine = world.engine(faults)
    instance_id = engine.start_new("chain")
    assert world.finish(engine, instance_id) == (RuntimeStatus.COMPLETED, "abc")
    newer = world.store.tracking.get_instance(instance_id)
    assert newer is not None
    finished_execution = newer.execution_id
    newer.execution_id, newer.status, newer.output = "newer-execution", RuntimeStatus.PENDING, None
    world.store.tracking.set_new_execution(newer, overwrite=True)  # the new start's row, its message not yet read
    stale = event_raised(timestamp=world.clock.now(), name="x", input=None)
    queue = engine.control_queue_for(instance_id)
    queue.add(TaskMessage(instance_id, finished_execution, stale))
    assert world.pump_until(lambda: queue.approximate_count() == 0)
    assert faults.hits(CrashPoint.C13_STALE_GENERATION_DISCARDED) >= 1
    row = world.store.tracking.get_instance(instance_id)
    assert row is not None
    assert (row.execution_id, row.status) == ("newer-execution", RuntimeStatus.PENDING)


def test_crash_c14_poison_message_backs_off_to_600s_and_is_never_deleted(world: World) -> None:
    faults = FaultInjector()
    seen: list[tuple[int, float]] = []
    faults.arm(
        CrashPoint.C7_OUT_OF_ORDER_MESSAGE,
        times=1000,
        action=lambda c: seen.append((c["message"].dequeue_count, world.clock.now().timestamp())),
    )
    engine = world.engine(faults)
    instance_id = engine.start_new("wait_event")
    assert world.pump_until(
        lambda: engine.get_status(instance_id).runtime_status is RuntimeStatus.RUNNING  # type: ignore[union-attr]
    )
    execution_id = engine.get_status(instance_id).execution_id  # type: ignore[union-attr]
    poison = task_completed(timestamp=world.clock.now(), task_scheduled_id=99, result=None)  # never scheduled
    queue = engine.control_queue_for(instance_id)
    queue.add(TaskMessage(instance_id, execution_id, poison))
    assert world.pump_until(lambda: faults.hits(CrashPoint.C14_POISON_MESSAGE) >= 2, step=30)
    counts = [count for count, _ in seen]
    assert counts == list(range(1, len(counts) + 1))  # retried forever, one dequeue at a time
    assert len(counts) >= 10  # 2^10 s > 600 s: the back-off reached its ceiling
    gaps = [later - earlier for (_, earlier), (_, later) in itertools.pairwise(seen)]
    expected = [min(2**n, 600) for n in range(1, len(gaps) + 1)]
    assert all(gap >= want for gap, want in zip(gaps, expected))  # visibility back-off 2, 4, ... 600 s
    assert queue.approximate_count() == 1  # no dead-letter: the message is still there
    assert engine.get_status(instance_id).runtime_status is RuntimeStatus.RUNNING  # type: ignore[union-attr]


def test_crash_c15_drain_timeout_aborts_the_session_and_its_messages_are_redelivered(world: World) -> None:
    # DTFx on a forced stop (the extension's default, useGracefulShutdown=false): AbortAllSessions forgets the
    # active sessions; an episode still running then finds no session at CompleteTaskOrchestrationWorkItemAsync
    # and writes nothing. Its messages were neither deleted nor abandoned: they reappear when their visibility
    # timeout expires, and another worker runs the episode again.
    faults = FaultInjector()
    seen: list[str] = []
    world.activities.orchestrator_gate.clear()
    a = Engine(
        world.activities.registry(),
        store=world.store,
        settings=fast_settings(),
        clock=world.clock,
        faults=faults,
        on_event=lambda kind, data: seen.append(kind),
    )
    world.engines.append(a)
    a.start()
    instance_id = a.start_new("gated")
    assert world.activities.orchestrator_entered.wait(10)
    a.stop(drain_timeout=0.05)  # the episode is stuck in the SDK call: the drain times out
    assert faults.hits(CrashPoint.C15_DRAIN_TIMEOUT) >= 1
    world.activities.orchestrator_gate.set()  # the stuck episode now finishes its replay ...
    assert wait_until(lambda: "episode_completed" in seen or "episode_aborted" in seen, timeout=20)
    assert "episode_completed" not in seen  # ... but the stopped worker checkpoints nothing
    assert world.store.tracking.get_history(instance_id).events == []
    assert world.store.tracking.get_instance(instance_id).status is RuntimeStatus.PENDING  # type: ignore[union-attr]
    queue = world.store.queues.get_queue(a.control_queue_for(instance_id).name)
    assert queue.approximate_count() == 1  # the start message is still there ...
    assert queue.get_messages(32, timedelta(minutes=5)) == []  # ... hidden until its visibility timeout
    world.clock.advance(fast_settings().control_queue_visibility_timeout)
    b = world.engine()
    assert world.finish(b, instance_id) == (RuntimeStatus.COMPLETED, "g")
    assert world.calls("echo:g") == 1  # scheduled once, by the worker that got the redelivered message


def test_worker_killed_is_not_swallowed_and_stops_io(world: World) -> None:
    faults = FaultInjector()
    engine = world.engine(faults, start=False)
    with pytest.raises(WorkerKilled):
        faults.kill()
    with pytest.raises(WorkerKilled):
        engine.start_new("chain")
    assert world.store.tracking.get_instance("x") is None


def test_message_for_unknown_instance_is_discarded(world: World) -> None:
    engine = world.engine()
    queue = engine.control_queue_for("ghost")
    queue.add(TaskMessage("ghost", None, event_raised(timestamp=world.clock.now(), name="x", input=None)))
    assert world.pump_until(lambda: queue.approximate_count() == 0)
    assert engine.stats()["discarded_messages"] == 1  # "No such instance": deleted, nothing created
    assert world.store.tracking.get_instance("ghost") is None


def test_zombie_response_discarded_after_five_out_of_order_dequeues(world: World) -> None:
    faults = FaultInjector()
    engine = world.engine(faults)
    queue = engine.control_queue_for("zombie")
    response = task_completed(timestamp=world.clock.now(), task_scheduled_id=0, result=None)
    queue.add(TaskMessage("zombie", "gone-execution", response))
    assert world.pump_until(lambda: queue.approximate_count() == 0, step=10)
    # Dequeues 1..5 get the benefit of the doubt (abandoned as out-of-order); the 6th is a zombie: deleted.
    assert faults.hits(CrashPoint.C7_OUT_OF_ORDER_MESSAGE) == 5
    assert engine.stats()["discarded_messages"] == 1


def test_stop_drains_the_running_episode_before_returning(world: World) -> None:
    faults = FaultInjector()
    world.activities.orchestrator_gate.clear()
    engine = world.engine(faults)
    instance_id = engine.start_new("gated")
    assert world.activities.orchestrator_entered.wait(10)
    opener = threading.Timer(0.1, world.activities.orchestrator_gate.set)
    opener.start()
    engine.stop(drain_timeout=10)
    assert faults.hits(CrashPoint.C15_DRAIN_TIMEOUT) == 0
    # The episode finished its checkpoint during the drain: the activity is in history, the row is not Pending.
    history = world.store.tracking.get_history(instance_id).events
    assert [e["Name"] for e in history if e["EventType"] == 4] == ["echo"]
    assert world.store.tracking.get_instance(instance_id).status is not RuntimeStatus.PENDING  # type: ignore[union-attr]
