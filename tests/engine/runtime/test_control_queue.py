"""ControlQueue semantics (DTFx Messaging/ControlQueue.cs), settings validation, partition routing."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from durable_local.dispatch.activity import failure_reason
from durable_local.engine import Engine
from durable_local.model import FunctionRegistry, SchedulingMode, TaskMessage
from durable_local.ports import MessageGoneError
from durable_local.sessions.control_queue import ControlQueue, PendingMessageTracker, PollingBackoff
from durable_local.settings import EngineSettings
from durable_local.storage import StoreBundle

from .conftest import Queues, completed_message, fast_settings, raised_message, wait_until


def test_messages_sorted_by_insertion_time_then_sequence_number(queues: Queues, clock) -> None:
    event = raised_message("i1", None).event
    queues.put(TaskMessage("i1", None, event, sequence_number=2))
    queues.put(TaskMessage("i1", None, event, sequence_number=1))  # same insertion time, lower sequence
    clock.advance(1)
    queues.put(TaskMessage("i1", None, event, sequence_number=0))  # later insertion wins over sequence
    batch = queues.control.get_messages()
    assert [m.body.sequence_number for m in batch] == [1, 2, 0]
    assert queues.tracker.count() == 3


def test_polling_backoff_doubles_to_the_maximum() -> None:
    backoff = PollingBackoff(timedelta(milliseconds=50), timedelta(milliseconds=300))
    assert [backoff.next_delay() for _ in range(5)] == [0.05, 0.1, 0.2, 0.3, 0.3]
    backoff.reset()
    assert backoff.next_delay() == 0.05


def test_empty_queue_polls_until_a_message_arrives(queues: Queues) -> None:
    result: list[object] = []
    reader = threading.Thread(target=lambda: result.extend(queues.control.get_messages()))
    reader.start()
    assert wait_until(lambda: queues.control.empty_polls >= 3)
    queues.put(raised_message("i1", None))
    reader.join(5)
    assert len(result) == 1


def test_release_stops_a_waiting_read(queues: Queues) -> None:
    result: list[object] = [None]
    reader = threading.Thread(target=lambda: result.__setitem__(0, queues.control.get_messages()))
    reader.start()
    queues.control.release("lease lost", "test")
    reader.join(5)
    assert result[0] == [] and queues.control.is_released


def test_buffer_back_pressure(store: StoreBundle, clock) -> None:
    settings = fast_settings(control_queue_buffer_threshold=2)
    queues = Queues(store, settings, clock)
    for index in range(3):
        queues.put(completed_message(f"i{index}", "e", 0))
    queues.tracker.try_add("buffered-1", "q")
    queues.tracker.try_add("buffered-2", "q")
    result: list[object] = []
    reader = threading.Thread(target=lambda: result.extend(queues.control.get_messages()))
    reader.start()
    assert wait_until(lambda: queues.control.buffer_full_waits >= 2)
    assert result == [] and queues.raw.get_messages(32, timedelta(0)) != []  # nothing was read meanwhile
    queues.tracker.remove("buffered-1")
    reader.join(5)
    assert len(result) == 3


def test_abandon_and_delete_untrack_and_abandon_backs_off(queues: Queues, clock) -> None:
    queues.put(raised_message("i1", None))
    (message,) = queues.control.get_messages()
    queues.control.abandon(message)
    assert queues.tracker.count() == 0
    assert queues.raw.get_messages(1, timedelta(minutes=5)) == []
    clock.advance(2)  # abandon_delay(1) = 2 s
    (again,) = queues.control.get_messages()
    assert again.dequeue_count == 2
    queues.control.delete(again)
    queues.control.delete(again)  # a second delete is tolerated (message gone)
    assert queues.raw.approximate_count() == 0 and queues.tracker.count() == 0


def test_stale_pop_receipt_cannot_delete(queues: Queues, clock) -> None:
    queues.put(raised_message("i1", None))
    (first,) = queues.control.get_messages()
    clock.advance(timedelta(minutes=6))
    (second,) = queues.control.get_messages()
    with pytest.raises(MessageGoneError):
        queues.raw.delete(first.message_id, first.pop_receipt)
    queues.control.delete(second)
    assert queues.raw.approximate_count() == 0


def test_partition_by_fnv1a(store: StoreBundle) -> None:
    engine = Engine(FunctionRegistry({"o": lambda s: s}, {}), store=store, settings=fast_settings())
    assert engine.control_queue_for("abc").name == "testhubname-control-03"  # 0x1a47e90b % 4
    assert engine.control_queue_for("inst1").name == "testhubname-control-00"  # 0xc82a2938 % 4
    engine.start_new("o", instance_id="abc")
    assert store.queues.get_queue("testhubname-control-03").approximate_count() == 1
    assert store.queues.get_queue("testhubname-control-00").approximate_count() == 0


def test_engine_mode_override(store: StoreBundle) -> None:
    engine = Engine(FunctionRegistry({}, {}), store=store, settings=fast_settings(), mode=SchedulingMode.IDEAL)
    assert engine.settings.scheduling_mode is SchedulingMode.IDEAL


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("partition_count", 0, "partition_count must be an integer from 1 to 16"),
        ("partition_count", 17, "partition_count must be an integer from 1 to 16"),
        ("control_queue_batch_size", 33, "control_queue_batch_size must be an integer from 1 to 32"),
        ("max_concurrent_activities", 0, "max_concurrent_activities"),
        ("control_queue_visibility_timeout", timedelta(0), "control_queue_visibility_timeout must be a positive"),
        ("max_history_events", 0, "max_history_events"),
        ("hub_name", "", "hub_name"),
        ("drain_timeout", timedelta(seconds=-1), "drain_timeout must be a non-negative"),
    ],
)
def test_settings_validation_names_field_and_rule(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EngineSettings(**{field: value})  # type: ignore[arg-type]


def test_settings_defaults_are_the_extensions() -> None:
    s = EngineSettings()
    assert (s.hub_name, s.partition_count, s.control_queue_batch_size, s.control_queue_buffer_threshold) == (
        "TestHubName",
        4,
        32,
        256,
    )
    assert s.control_queue_visibility_timeout == s.work_item_visibility_timeout == timedelta(minutes=5)
    assert (s.max_concurrent_activities, s.max_concurrent_orchestrations, s.max_history_events) == (10, 100, None)
    assert s.max_queue_polling_interval == timedelta(seconds=30)
    assert s.scheduling_mode is SchedulingMode.SHIM and s.disable_execution_started_dedup is False
    with pytest.raises(ValueError, match="min_queue_polling_interval must not exceed"):
        EngineSettings(min_queue_polling_interval=timedelta(seconds=31))


def test_task_failed_reason_is_the_extensions_text() -> None:
    assert failure_reason("fetch", ValueError("boom")) == "Activity function 'fetch' failed:  ValueError: boom"


def test_pending_tracker_detects_duplicates() -> None:
    tracker = PendingMessageTracker()
    assert tracker.try_add("m1", "q") is True
    assert tracker.try_add("m1", "q") is False
    assert "m1" in tracker and tracker.count() == 1


def test_control_queue_wrapper_exposes_name(queues: Queues) -> None:
    assert isinstance(queues.control, ControlQueue)
    assert queues.control.name == "testhubname-control-00"
