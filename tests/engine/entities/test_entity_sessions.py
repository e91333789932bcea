"""The seed's entity ready queue: with ``use_separate_queue_for_entity_work_items`` entity batches are handed out
only by ``get_next_session(entities_only=True)``; without it (the extension's choice for Python) one queue
serves both."""

from __future__ import annotations

from durable_local.sessions.manager import OrchestrationSessionManager
from durable_local.storage import StoreBundle
from tests.engine.runtime.conftest import Queues, fast_settings, raised_message, start_message


def _fill(store: StoreBundle, queues: Queues, *, separate: bool) -> OrchestrationSessionManager:
    settings = fast_settings(use_separate_queue_for_entity_work_items=separate)
    manager = OrchestrationSessionManager(settings, store.tracking, queues.clock, pending=queues.tracker)
    queues.put(start_message("orch-1", "e1"))
    queues.put(raised_message("@counter@k", None, name="op"))
    manager.add_messages_to_pending(queues.control, queues.read())
    return manager


def test_entity_batches_wait_in_their_own_ready_queue(store: StoreBundle, queues: Queues) -> None:
    manager = _fill(store, queues, separate=True)
    try:
        orchestration = manager.get_next_session(timeout=10)
        assert orchestration is not None and orchestration.instance_id == "orch-1"
        assert manager.get_next_session(timeout=0.2) is None  # the entity batch is not in this queue
        entity = manager.get_next_session(timeout=10, entities_only=True)
        assert entity is not None and entity.instance_id == "@counter@k"
        assert manager.get_next_session(timeout=0.2, entities_only=True) is None
    finally:
        manager.shutdown()


def test_without_the_setting_one_ready_queue_serves_both(store: StoreBundle, queues: Queues) -> None:
    manager = _fill(store, queues, separate=False)
    try:
        first = manager.get_next_session(timeout=10)
        second = manager.get_next_session(timeout=10)
        assert first is not None and second is not None
        assert {first.instance_id, second.instance_id} == {"orch-1", "@counter@k"}
        assert manager.get_next_session(timeout=0.2, entities_only=True) is None
    finally:
        manager.shutdown()
