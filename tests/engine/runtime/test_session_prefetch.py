"""The session manager's history prefetch: ready only after history is loaded, retried without starving healthy
instances, and MaxHistoryEvents."""

from __future__ import annotations

import threading
from datetime import timedelta

from durable_local import history
from durable_local.model import EventType
from durable_local.ports import HistoryBatch, OrchestrationHistory
from durable_local.sessions.manager import OrchestrationSessionManager
from durable_local.storage import StoreBundle

from .conftest import T0, completed_message, fast_settings, raised_message, wait_until
from .session_support import make_manager

# -- Prefetch ------------------------------------------------------------------------------------------


class _GatedTracking:
    """The real tracking store, with get_history held until a test opens the gate (or failing N times)."""

    def __init__(self, inner, *, failures: int = 0) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.gate = threading.Event()
        self.failures = failures
        self.calls = 0

    def get_history(self, instance_id: str, expected_execution_id: str | None = None) -> OrchestrationHistory:
        self.calls += 1
        if self.failures > 0:
            self.failures -= 1
            raise OSError("table unavailable")
        self.gate.wait(10)
        return self.inner.get_history(instance_id, expected_execution_id)

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)


def _write_history(store: StoreBundle, instance_id: str, execution_id: str, count: int) -> None:
    events = [history.orchestrator_started(timestamp=T0)]
    events.append(
        history.execution_started(
            timestamp=T0, name="orch", instance_id=instance_id, execution_id=execution_id, input=None
        )
    )
    while len(events) < count:
        events.append(history.event_raised(timestamp=T0, name="e", input=None))
    store.tracking.write_history_batch(HistoryBatch(instance_id, execution_id, 0, events, True), None)


def test_prefetch_before_ready(store, settings, queues) -> None:
    _write_history(store, "i1", "e1", 3)
    gated = _GatedTracking(store.tracking)
    queues.put(completed_message("i1", "e1", 0))
    manager = OrchestrationSessionManager(settings, gated, queues.clock, pending=queues.tracker)  # type: ignore[arg-type]
    try:
        manager.add_messages_to_pending(queues.control, queues.read())
        assert manager.get_next_session(timeout=0.05) is None  # history not loaded yet: not ready
        gated.gate.set()
        session = manager.get_next_session(timeout=5)
        assert session is not None
        assert len(session.history) == 3
        assert session.etag is not None
    finally:
        gated.gate.set()
        manager.shutdown()


def test_prefetch_failure_is_retried(store, settings, queues) -> None:
    _write_history(store, "i1", "e1", 2)
    gated = _GatedTracking(store.tracking, failures=2)
    gated.gate.set()
    queues.put(completed_message("i1", "e1", 0))
    manager = OrchestrationSessionManager(settings, gated, queues.clock, pending=queues.tracker)  # type: ignore[arg-type]
    try:
        manager.add_messages_to_pending(queues.control, queues.read())
        session = manager.get_next_session(timeout=5)
        assert session is not None
        assert manager.prefetch_failures == 2
        assert gated.calls == 3
    finally:
        manager.shutdown()


class _SickTracking:
    """The real tracking store, except that loading the history of a "sick-*" instance always fails."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.sick_calls = 0

    def get_history(self, instance_id: str, expected_execution_id: str | None = None) -> OrchestrationHistory:
        if instance_id.startswith("sick-"):
            self.sick_calls += 1
            raise OSError(f"history of {instance_id} is unreadable")
        return self.inner.get_history(instance_id, expected_execution_id)

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)


def test_permanently_failing_prefetches_do_not_starve_healthy_instances(store, queues) -> None:
    # The seed re-enqueues a failed prefetch (after a pause) instead of retrying it in a loop, so that failing
    # instances cannot hold every background thread. Six sick batches are queued before three healthy ones,
    # with a pool of four threads.
    settings = fast_settings(prefetch_retry_delay=timedelta(milliseconds=50))
    sick = [f"sick-{i}" for i in range(6)]
    healthy = [f"well-{i}" for i in range(3)]
    for instance_id in healthy:
        _write_history(store, instance_id, "e1", 2)
    for instance_id in sick + healthy:
        queues.put(completed_message(instance_id, "e1", 0))
    tracking = _SickTracking(store.tracking)
    manager = OrchestrationSessionManager(settings, tracking, queues.clock, pending=queues.tracker)  # type: ignore[arg-type]
    opened: list[str] = []
    try:
        manager.add_messages_to_pending(queues.control, queues.read())

        def all_healthy_opened() -> bool:
            session = manager.get_next_session(timeout=0.01)
            if session is not None:
                opened.append(session.instance_id)
            return sorted(opened) == healthy

        assert wait_until(all_healthy_opened, timeout=30), f"healthy sessions opened: {opened}"
        assert wait_until(lambda: tracking.sick_calls > 2 * len(sick))  # the sick ones keep being retried
        assert manager.get_stats().pending_instances == len(sick)
    finally:
        manager.shutdown()


def test_max_history_events_terminates(store, queues) -> None:
    settings = fast_settings(max_history_events=3)
    _write_history(store, "i1", "e1", 5)
    queues.put(raised_message("i1", None))
    manager = make_manager(store, settings, queues)
    try:
        manager.add_messages_to_pending(queues.control, queues.read())
        session = manager.get_next_session(timeout=5)
        assert session is not None
        last = session.history[-1]
        assert history.event_type(last) is EventType.EXECUTION_TERMINATED
        assert last["Input"] == "Orchestrator exceeded maximum history size: 3"
        assert len(session.history) == 6
    finally:
        manager.shutdown()


# -- Sessions ------------------------------------------------------------------------------------------
