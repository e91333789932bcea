"""The session manager's control queues: owning them (the seed's leases), one dequeue loop thread each, draining.

A mixin of ``durable_local.sessions.manager.OrchestrationSessionManager`` (kept apart so both stay small): the manager
provides the shared state, guarded by its ``_lock``, and what a dequeue loop does with the messages it reads
(de-duplicate starts, file the rest into pending batches).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

from durable_local.faults import CrashPoint, FaultInjector, WorkerKilled
from durable_local.ports import QueueMessage
from durable_local.sessions.control_queue import ControlQueue
from durable_local.sessions.state import OrchestrationSession
from durable_local.settings import EngineSettings

_log = logging.getLogger("durable_local.sessions.manager")


class QueueOwnership:
    """Queue leases and dequeue loops of the session manager."""

    _settings: EngineSettings
    _faults: FaultInjector
    _lock: threading.RLock
    _shutdown: threading.Event
    _owned: dict[str, ControlQueue]
    _loops: dict[str, threading.Thread]
    _active: dict[str, OrchestrationSession]

    def dedupe_execution_started(self, control_queue: ControlQueue, messages: list[QueueMessage]) -> list[QueueMessage]:
        raise NotImplementedError

    def add_messages_to_pending(self, control_queue: ControlQueue, messages: list[QueueMessage]) -> None:
        raise NotImplementedError

    @property
    def queues(self) -> list[ControlQueue]:
        with self._lock:
            return list(self._owned.values())

    def add_queue(self, partition_id: str, control_queue: ControlQueue) -> None:
        """Own ``control_queue`` and start its dequeue loop; a second add of the same partition is ignored."""
        with self._lock:
            if partition_id in self._owned:
                _log.warning("Attempted to add a control queue %s multiple times!", control_queue.name)
                return
            self._owned[partition_id] = control_queue
            thread = threading.Thread(
                target=self._dequeue_loop, args=(partition_id, control_queue), name=f"dl-dequeue-{partition_id}"
            )
            self._loops[partition_id] = thread
        thread.daemon = True
        thread.start()

    def remove_queue(self, partition_id: str, reason: str | None = None, caller: str = "") -> None:
        with self._lock:
            control_queue = self._owned.pop(partition_id, None)
        if control_queue is not None:
            control_queue.release(reason, caller)

    def release_queue(self, partition_id: str, reason: str | None = None, caller: str = "") -> None:
        with self._lock:
            control_queue = self._owned.get(partition_id)
        if control_queue is not None:
            control_queue.release(reason, caller)

    def wait_for_dequeue_loop_exit(self, partition_id: str, timeout: float) -> bool:
        """Wait until the dequeue loop of ``partition_id`` has ended (after a release); True if it has."""
        with self._lock:
            thread = self._loops.get(partition_id)
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def resume_listening_if_own_queue(self, partition_id: str, control_queue: ControlQueue) -> bool:
        """Re-add a released queue we still own (the seed's way to resume); returns False like the seed."""
        with self._lock:
            owned = self._owned.get(partition_id)
        if owned is not None and owned.is_released:
            self.remove_queue(partition_id, None, "OrchestrationSessionManager ResumeListeningIfOwnQueue")
            self.add_queue(partition_id, control_queue)
        return False

    def is_control_queue_receiving_messages(self, partition_id: str) -> bool:
        with self._lock:
            owned = self._owned.get(partition_id)
        return owned is not None and not owned.is_released

    def is_control_queue_processing_messages(self, partition_id: str) -> bool:
        with self._lock:
            return any(s.control_queue.name == partition_id for s in self._active.values())

    def drain(self, partition_id: str, timeout: timedelta, reason: str = "shutdown", caller: str = "") -> bool:
        """Stop listening, wait until the partition has no active session (or ``timeout``), then remove it.

        Returns True if the partition drained, False on time-out (logged; messages reappear later).
        """
        self.release_queue(partition_id, reason, caller)
        deadline = time.monotonic() + timeout.total_seconds()
        poll = max(self._settings.drain_poll_interval.total_seconds(), 0.001)
        drained = True
        try:
            while self.is_control_queue_processing_messages(partition_id):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    drained = False
                    _log.error("%s: timed-out waiting for the partition to finish draining.", partition_id)
                    self._faults.hit(CrashPoint.C15_DRAIN_TIMEOUT, partition_id=partition_id)
                    break
                self._shutdown.wait(min(poll, remaining))
        finally:
            self.remove_queue(partition_id, reason, caller)
        return drained

    def _dequeue_loop(self, partition_id: str, control_queue: ControlQueue) -> None:
        _log.info("Started listening for messages on queue %s.", control_queue.name)
        try:
            while not control_queue.is_released and not self._shutdown.is_set():
                try:
                    messages = control_queue.get_messages(self._shutdown)
                    if messages:
                        kept = self.dedupe_execution_started(control_queue, messages)
                        self.add_messages_to_pending(control_queue, kept)
                except WorkerKilled:
                    raise
                except Exception:
                    _log.warning(
                        "Exception in the dequeue loop for control queue %s", control_queue.name, exc_info=True
                    )
                    self._shutdown.wait(self._settings.dequeue_error_delay.total_seconds())
        except WorkerKilled:
            return
        _log.info("Stopped listening for messages on queue %s.", control_queue.name)
