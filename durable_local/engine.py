"""``Engine``: the local durable engine facade (implements ``durable_local.engine_api.DurableEngine``).

A single worker that owns every partition (its "leases" are control queues 0..N-1), wiring together the
session manager, the orchestration and activity dispatchers (and an entity dispatcher when entity work items
have their own ready queue) and the client operations over one store.

Typical use::

    store = open_memory_store(clock)
    engine = Engine(registry, store=store, settings=EngineSettings(), clock=clock)
    engine.start()
    instance_id = engine.start_new("my_orchestrator", input_json='"x"')
    status = engine.wait_for_completion(instance_id, timeout=30)
    engine.stop()
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from durable_local.client_ops import ClientOperations
from durable_local.dispatch import ActivityDispatcher, EngineCounters, EventHook, OrchestrationDispatcher
from durable_local.engine_api import InstanceStatus
from durable_local.entities.client import EntityClient, EntityMetadata, EntityQuery
from durable_local.entities.ids import EntityId
from durable_local.faults import FaultInjector, GuardedQueueService, GuardedTrackingStore
from durable_local.model import FunctionRegistry, RuntimeStatus, SchedulingMode, TaskMessage
from durable_local.ports import Clock, InstanceQuery, Queue, QueueMessage
from durable_local.sessions.control_queue import ControlQueue, PendingMessageTracker
from durable_local.sessions.manager import OrchestrationSessionManager
from durable_local.sessions.partitioning import control_queue_name, partition_index, work_item_queue_name
from durable_local.settings import EngineSettings
from durable_local.storage import StoreBundle

_log = logging.getLogger(__name__)


class Engine:
    """One worker over one store. Thread-safe; all methods are synchronous.

    Args:
        registry: orchestrators and activities by name.
        store: queues + tracking tables (memory or SQLite); the engine does not close it.
        settings: runtime settings (defaults are the Durable extension's).
        clock: time source for messages, visibility and timestamps (``SystemClock`` by default).
        faults: crash-point injector for tests (a fresh, unarmed one by default).
        mode: scheduling mode; overrides ``settings.scheduling_mode`` when given.
        on_event: optional observer ``(kind, data)`` called from engine threads (tests).
    """

    def __init__(
        self,
        registry: FunctionRegistry,
        *,
        store: StoreBundle,
        settings: EngineSettings | None = None,
        clock: Clock | None = None,
        faults: FaultInjector | None = None,
        mode: SchedulingMode | None = None,
        on_event: EventHook | None = None,
    ) -> None:
        from durable_local.clock import SystemClock

        base = settings or EngineSettings()
        if mode is not None and mode is not base.scheduling_mode:
            base = _with_mode(base, mode)
        self.settings = base
        self.registry = registry
        self.clock: Clock = clock or SystemClock()
        self.faults = faults or FaultInjector()
        self.counters = EngineCounters(on_event)
        self._queues = GuardedQueueService(store.queues, self.faults)
        self._tracking = GuardedTrackingStore(store.tracking, self.faults)
        self._lock = threading.Lock()
        self._started = False
        self._stopped = False
        self._pending = PendingMessageTracker()
        self._wakers: dict[str, Callable[[], None]] = {}
        self._control_queues: list[Queue] = [
            _WakingQueue(self._queues.get_queue(control_queue_name(base.hub_name, i)), self._wakers)
            for i in range(base.partition_count)
        ]
        self._work_items: Queue = _WakingQueue(
            self._queues.get_queue(work_item_queue_name(base.hub_name)), self._wakers
        )
        self.sessions = OrchestrationSessionManager(
            base, self._tracking, self.clock, pending=self._pending, faults=self.faults
        )
        self.client = ClientOperations(
            registry=registry,
            tracking=self._tracking,
            control_queue_for=self.control_queue_for,
            clock=self.clock,
            faults=self.faults,
            override_running=self.settings.overridable_existing_instance_states == "AnyState",
        )
        self._orchestrations = OrchestrationDispatcher(
            self.sessions,
            tracking=self._tracking,
            work_items=self._work_items,
            control_queue_for=self.control_queue_for,
            registry=registry,
            settings=base,
            clock=self.clock,
            faults=self.faults,
            counters=self.counters,
            on_checkpoint=self.client.notify_changed,
        )
        self._entities: OrchestrationDispatcher | None = None
        if base.use_separate_queue_for_entity_work_items:
            # The seed's entity ready queue: entity batches get their own dispatcher (DTFx TaskEntityDispatcher).
            self._entities = OrchestrationDispatcher(
                self.sessions,
                tracking=self._tracking,
                work_items=self._work_items,
                control_queue_for=self.control_queue_for,
                registry=registry,
                settings=base,
                clock=self.clock,
                faults=self.faults,
                counters=self.counters,
                on_checkpoint=self.client.notify_changed,
                entities_only=True,
                threads=base.entity_worker_threads,
            )
        self.entity_client = EntityClient(
            registry=registry, tracking=self._tracking, control_queue_for=self.control_queue_for, clock=self.clock
        )
        self._activities = ActivityDispatcher(
            work_items=self._work_items,
            control_queue_for=self.control_queue_for,
            registry=registry,
            settings=base,
            clock=self.clock,
            faults=self.faults,
            counters=self.counters,
        )

    # ------------------------------------------------------------------------------------------------
    # Lifecycle

    @property
    def hub_name(self) -> str:
        return self.settings.hub_name

    def control_queue_for(self, instance_id: str) -> Queue:
        """The control queue of the partition that owns ``instance_id`` (FNV-1a of the id)."""
        return self._control_queues[partition_index(instance_id, self.settings.partition_count)]

    def start(self, *, run_activities: bool = True) -> None:
        """Start the dequeue loops and dispatchers (idempotent).

        ``run_activities=False`` starts a worker that only processes orchestrations (crash-point tests use it
        to keep a dying worker from racing for activity messages).
        """
        with self._lock:
            if self._started:
                return
            if self._stopped:
                raise RuntimeError("an Engine cannot be restarted after stop(); create a new one on the same store")
            self._started = True
        for index, queue in enumerate(self._control_queues):
            control = ControlQueue(
                queue, partition=index, settings=self.settings, pending=self._pending, faults=self.faults
            )
            self._wakers[queue.name] = control.wake
            self.sessions.add_queue(queue.name, control)
        self._wakers[self._work_items.name] = self._activities.wake
        self._orchestrations.start()
        if self._entities is not None:
            self._entities.start()
        if run_activities:
            self._activities.start()
        _log.info("engine started: hub %s, %d partitions", self.hub_name, self.settings.partition_count)

    def stop(self, *, drain_timeout: float = 30.0) -> None:
        """Drain every partition (up to ``drain_timeout`` in total), then stop all threads.

        Sessions still running at the deadline are aborted (DTFx ``AbortAllSessions``, crash point C15): their
        episodes write nothing once they return, and their messages reappear after the visibility timeout.
        Once ``stop`` returns, this worker writes no orchestration state.
        """
        with self._lock:
            if self._stopped or not self._started:
                self._stopped = True
                return
            self._stopped = True
        deadline = time.monotonic() + max(drain_timeout, 0.0)
        if not self.faults.dead:
            for queue in self.sessions.queues:
                self.sessions.release_queue(queue.name, "shutdown", "Engine.stop")
            for queue in list(self.sessions.queues):
                remaining = timedelta(seconds=max(0.0, deadline - time.monotonic()))
                self.sessions.drain(queue.name, remaining, "shutdown", "Engine.stop")
        self.sessions.abort_all_sessions(timeout=max(1.0, deadline - time.monotonic()))
        remaining_s = max(0.1, deadline - time.monotonic())
        self._activities.stop(timeout=remaining_s)
        self._orchestrations.stop(timeout=max(0.1, deadline - time.monotonic()))
        if self._entities is not None:
            self._entities.stop(timeout=max(0.1, deadline - time.monotonic()))
        self.sessions.shutdown(wait=True)
        _log.info("engine stopped: hub %s", self.hub_name)

    @property
    def is_running(self) -> bool:
        """Started, not stopped, not killed by a fault injection."""
        with self._lock:
            return self._started and not self._stopped and not self.faults.dead

    def is_quiet(self) -> bool:
        """No dequeued orchestration message buffered and no activity work item handed out.

        Tests that drive a ``ManualClock`` advance it only when the engine is quiet, so that virtual time
        never overtakes the visibility timeout of work that is merely slow on a loaded machine.
        """
        return self._pending.count() == 0 and self._activities.running == 0

    @property
    def is_dead(self) -> bool:
        """True once a fault injection killed this worker."""
        return self.faults.dead

    def stats(self) -> dict[str, Any]:
        """Session-manager stats (``GetStats``) plus dispatcher counters."""
        session_stats = self.sessions.get_stats()
        data = self.counters.snapshot()
        data.update(
            {
                "pending_instances": session_stats.pending_instances,
                "pending_messages": session_stats.pending_messages,
                "active_sessions": session_stats.active_sessions,
                "prefetch_failures": self.sessions.prefetch_failures,
                "requeued_other_generation": self.sessions.requeued_other_generation,
                "partial_checkpoints_seen": self.sessions.partial_checkpoints_seen,
            }
        )
        return data

    # ------------------------------------------------------------------------------------------------
    # Client operations (DurableEngine)

    def start_new(self, name: str, *, instance_id: str | None = None, input_json: str | None = None) -> str:
        return self.client.start_new(name, instance_id=instance_id, input_json=input_json)

    def raise_event(self, instance_id: str, event_name: str, data_json: str | None) -> None:
        self.client.raise_event(instance_id, event_name, data_json)

    def terminate(self, instance_id: str, reason: str | None) -> None:
        self.client.terminate(instance_id, reason)

    def suspend(self, instance_id: str, reason: str | None) -> None:
        self.client.suspend(instance_id, reason)

    def resume(self, instance_id: str, reason: str | None) -> None:
        self.client.resume(instance_id, reason)

    def restart(self, instance_id: str, *, restart_with_new_instance_id: bool = True) -> str:
        return self.client.restart(instance_id, restart_with_new_instance_id=restart_with_new_instance_id)

    def get_status(
        self, instance_id: str, *, show_history: bool = False, show_input: bool = True
    ) -> InstanceStatus | None:
        return self.client.get_status(instance_id, show_history=show_history, show_input=show_input)

    def query(self, query: InstanceQuery) -> tuple[list[InstanceStatus], str | None]:
        return self.client.query(query)

    def purge(self, instance_id: str) -> bool:
        return self.client.purge(instance_id)

    def purge_many(
        self,
        *,
        created_from: datetime | None = None,
        created_to: datetime | None = None,
        statuses: tuple[RuntimeStatus, ...] = (),
    ) -> int:
        return self.client.purge_many(created_from=created_from, created_to=created_to, statuses=statuses)

    def wait_for_completion(self, instance_id: str, timeout: float) -> InstanceStatus | None:
        return self.client.wait_for_completion(instance_id, timeout)

    # Entities (DurableEngine) ------------------------------------------------------------------------

    def signal_entity(self, entity: EntityId, operation: str, input_json: str | None = None) -> str:
        return self.entity_client.signal_entity(entity, operation, input_json)

    def read_entity_state(self, entity: EntityId) -> EntityMetadata | None:
        return self.entity_client.read_entity_state(entity)

    def list_entities(self, query: EntityQuery) -> tuple[list[EntityMetadata], str | None]:
        return self.entity_client.list_entities(query)

    def __enter__(self) -> Engine:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop(drain_timeout=self.settings.drain_timeout.total_seconds())


class _WakingQueue:
    """A queue that, after an immediately visible ``add``, wakes this worker's reader of that queue.

    Polling stays the delivery mechanism (as in Azure Storage); the wake-up only cuts the back-off short.
    """

    def __init__(self, inner: Queue, wakers: dict[str, Callable[[], None]]) -> None:
        self._inner = inner
        self._wakers = wakers

    @property
    def name(self) -> str:
        return self._inner.name

    def add(self, message: TaskMessage, *, visibility_delay: timedelta = timedelta(0)) -> str:
        message_id = self._inner.add(message, visibility_delay=visibility_delay)
        if visibility_delay <= timedelta(0):
            waker = self._wakers.get(self._inner.name)
            if waker is not None:
                waker()
        return message_id

    def get_messages(self, max_count: int, visibility_timeout: timedelta) -> list[QueueMessage]:
        return self._inner.get_messages(max_count, visibility_timeout)

    def delete(self, message_id: str, pop_receipt: str) -> None:
        self._inner.delete(message_id, pop_receipt)

    def update_visibility(self, message_id: str, pop_receipt: str, visibility_timeout: timedelta) -> QueueMessage:
        return self._inner.update_visibility(message_id, pop_receipt, visibility_timeout)

    def approximate_count(self) -> int:
        return self._inner.approximate_count()


def _with_mode(settings: EngineSettings, mode: SchedulingMode) -> EngineSettings:
    from dataclasses import replace

    return replace(settings, scheduling_mode=mode)
