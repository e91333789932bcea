"""The orchestration session manager: DTFx ``OrchestrationSessionManager`` (the seed), with threads.

"The seed" is DurableTask.AzureStorage's ``OrchestrationSessionManager.cs`` as proposed in Azure/durabletask#1119
(with ``MaxHistoryEvents``); ``docs/durable-protocol.md`` ("The session manager") describes what it does.

One dequeue loop thread per owned control queue reads batches, de-duplicates top-level ExecutionStarted
messages against the Instances table, and files each message either into the active session of its instance
or into a pending batch (per instance + execution). A new batch has its history prefetched on a background
pool; then it joins the ready queue. ``get_next_session`` turns ready batches into sessions, at most one per
instance id (case-insensitive). ``try_release_session`` puts a session's unprocessed messages back.

All shared state is guarded by ``_lock`` (the seed's ``messageAndSessionLock``); the ready queue is a deque
with a condition variable on that lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from durable_local.entities.ids import is_entity_instance
from durable_local.faults import CrashPoint, FaultInjector, WorkerKilled
from durable_local.history import event_type, execution_terminated
from durable_local.model import EventType, InstanceRecord
from durable_local.ports import Clock, QueueMessage, TrackingStore
from durable_local.sessions.control_queue import ControlQueue, PendingMessageTracker
from durable_local.sessions.dedupe import Verdict, dedupe_verdict
from durable_local.sessions.queue_ownership import QueueOwnership
from durable_local.sessions.state import OrchestrationSession, PendingMessageBatch, SessionStats
from durable_local.settings import EngineSettings

_log = logging.getLogger(__name__)

MAX_HISTORY_REASON = "Orchestrator exceeded maximum history size: {limit}"
"""The seed's reason text for the ExecutionTerminated appended when the history is too long."""


class OrchestrationSessionManager(QueueOwnership):
    """Owns control queues (``QueueOwnership``), pending batches, the ready queue and the active sessions of one
    worker."""

    def __init__(
        self,
        settings: EngineSettings,
        tracking: TrackingStore,
        clock: Clock,
        *,
        pending: PendingMessageTracker | None = None,
        faults: FaultInjector | None = None,
        background_threads: int = 4,
    ) -> None:
        self._settings = settings
        self._tracking = tracking
        self._clock = clock
        self.pending_tracker = pending or PendingMessageTracker()
        self._faults = faults or FaultInjector()
        self._lock = threading.RLock()
        self._ready_changed = threading.Condition(self._lock)
        self._checkpoints_changed = threading.Condition(self._lock)
        self._checkpoints_in_progress = 0
        self._owned: dict[str, ControlQueue] = {}
        self._loops: dict[str, threading.Thread] = {}
        self._pending_batches: list[PendingMessageBatch] = []
        self._ready: deque[PendingMessageBatch] = deque()
        self._entity_ready: deque[PendingMessageBatch] = deque()
        """The seed's ``entitiesReadyForProcessingQueue`` (used with ``use_separate_queue_for_entity_work_items``)."""
        self._active: dict[str, OrchestrationSession] = {}  # keys: instance id, case-folded
        self._background = ThreadPoolExecutor(background_threads, thread_name_prefix="dl-prefetch")
        self._shutdown = threading.Event()
        self.prefetch_failures = 0
        self.requeued_other_generation = 0
        self.partial_checkpoints_seen = 0

    # ------------------------------------------------------------------------------------------------
    # ExecutionStarted de-duplication

    def dedupe_execution_started(self, control_queue: ControlQueue, messages: list[QueueMessage]) -> list[QueueMessage]:
        """Keep, discard (delete) or defer (abandon) top-level ExecutionStarted messages; returns the rest.

        Sub-orchestration starts (with a ParentInstance) are never de-duplicated, as in DTFx.
        """
        if self._settings.disable_execution_started_dedup:
            return messages
        starts = [
            m
            for m in messages
            if event_type(m.body.event) is EventType.EXECUTION_STARTED and not m.body.event.get("ParentInstance")
        ]
        if not starts:
            return messages
        ids = list({m.body.instance_id.lower(): m.body.instance_id for m in starts}.values())
        remote_by_id = {r.instance_id: r for r in self._tracking.get_instances(ids)}
        to_defer: list[QueueMessage] = []
        to_discard: list[QueueMessage] = []
        for message in starts:
            verdict = self.dedupe_verdict(message, remote_by_id.get(message.body.instance_id))
            if verdict == "discard":
                to_discard.append(message)
            elif verdict == "defer":
                to_defer.append(message)
        if to_defer:
            self._submit(lambda: _each(control_queue.abandon, to_defer))
        if to_discard:
            for message in to_discard:
                _log.warning(
                    "Duplicate ExecutionStarted %s for %s (execution %s, dequeue count %d): discarding",
                    message.message_id,
                    message.body.instance_id,
                    message.body.execution_id,
                    message.dequeue_count,
                )
                self._faults.hit(CrashPoint.C11_DUPLICATE_START_DISCARDED, message=message)
            self._submit(lambda: _each(control_queue.delete, to_discard))
        dropped = {id(m) for m in to_defer} | {id(m) for m in to_discard}
        return [m for m in messages if id(m) not in dropped]

    def dedupe_verdict(self, message: QueueMessage, remote: InstanceRecord | None) -> Verdict:
        """``"keep"``, ``"discard"`` or ``"defer"`` for one top-level ExecutionStarted (the seed's rules)."""
        return dedupe_verdict(message, remote, self._settings.control_queue_visibility_timeout)

    # ------------------------------------------------------------------------------------------------
    # Pending batches

    def add_messages_to_pending(self, control_queue: ControlQueue, messages: Iterable[QueueMessage]) -> None:
        """The seed's ``AddMessageToPendingOrchestration``."""
        with self._lock:
            for_sessions: dict[int, tuple[OrchestrationSession, list[QueueMessage]]] = {}
            for message in messages:
                instance_id = message.body.instance_id
                execution_id = message.body.execution_id
                is_start = event_type(message.body.event) is EventType.EXECUTION_STARTED
                session = self._active.get(instance_id.lower())
                # Null execution id = management message (raise event, terminate): for the current session.
                # Another generation falls through to the pending list (and is discarded later if it is old).
                if (
                    not is_start
                    and session is not None
                    and (execution_id is None or session.execution_id == execution_id)
                ):
                    for_sessions.setdefault(id(session), (session, []))[1].append(message)
                    continue
                target: PendingMessageBatch | None = None
                if not is_start:
                    for batch in reversed(self._pending_batches):
                        if batch.instance_id != instance_id:
                            continue
                        if execution_id is None or batch.execution_id == execution_id:
                            target = batch
                            break
                        if batch.execution_id is None:
                            batch.adopt_execution_id(execution_id)
                            target = batch
                            break
                if target is None:
                    target = PendingMessageBatch(control_queue, instance_id, execution_id)
                    self._pending_batches.append(target)
                    new_batch = target
                    self._submit(lambda b=new_batch: self._prefetch(b))  # type: ignore[misc]
                target.messages.add_or_replace(message)
            for session, new_messages in for_sessions.values():
                session.add_or_replace_messages(new_messages)

    def _prefetch(self, batch: PendingMessageBatch) -> None:
        """The seed's ``ScheduleOrchestrationStatePrefetch``: load history, then mark the batch ready.

        On failure the seed logs, pauses and re-enqueues the prefetch "instead of retrying in a loop" to avoid
        starvation: the pool thread is released during the pause (``prefetch_retry_delay``), so instances whose
        history cannot be read never hold every background thread and stall the healthy ones.
        """
        if self._shutdown.is_set():
            return
        try:
            if batch.history is None:
                self._load_history(batch)
        except WorkerKilled:
            raise
        except Exception:
            self.prefetch_failures += 1
            _log.error("history prefetch failed for %s; re-enqueued", batch.instance_id, exc_info=True)
            self._submit_later(self._settings.prefetch_retry_delay, lambda: self._prefetch(batch))
            return
        with self._lock:
            self._ready_queue_for(batch).append(batch)
            self._ready_changed.notify_all()

    def _load_history(self, batch: PendingMessageBatch) -> None:
        loaded = self._tracking.get_history(batch.instance_id, batch.execution_id)
        events = list(loaded.events)
        limit = self._settings.max_history_events
        if limit is not None and len(events) > limit:
            _log.error(
                "Orchestration %s has %d events, exceeding the limit of %d. Orchestrator will be terminated.",
                batch.instance_id,
                len(events),
                limit,
            )
            # The seed appends the ExecutionTerminated to the loaded events: a past event that the replay
            # processes (terminating the instance) and the checkpoint never writes.
            reason = MAX_HISTORY_REASON.format(limit=limit)
            events.append(execution_terminated(timestamp=self._clock.now(), reason=reason))
        if not loaded.checkpoint_complete:
            self.partial_checkpoints_seen += 1
            _log.warning("%s: history has a partial checkpoint (crash between batches)", batch.instance_id)
        batch.etag = loaded.etag
        batch.last_checkpoint_time = loaded.last_checkpoint_time
        batch.checkpoint_complete = loaded.checkpoint_complete
        batch.history_execution_id = loaded.execution_id
        batch.history = events

    # ------------------------------------------------------------------------------------------------
    # Sessions

    def _ready_queue_for(self, batch: PendingMessageBatch) -> deque[PendingMessageBatch]:
        """The seed: entity batches go to the entity ready queue when ``UseSeparateQueueForEntityWorkItems``."""
        if self._settings.use_separate_queue_for_entity_work_items and is_entity_instance(batch.instance_id):
            return self._entity_ready
        return self._ready

    def get_next_session(
        self, timeout: float | None = None, *, entities_only: bool = False
    ) -> OrchestrationSession | None:
        """Wait for a ready batch and open its session (None on time-out or shutdown).

        ``entities_only`` reads the entity ready queue (the seed's ``GetNextSessionAsync(entitiesOnly)``).
        """
        ready = self._entity_ready if entities_only else self._ready
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._shutdown.is_set():
            with self._lock:
                while not ready:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if self._shutdown.is_set() or (remaining is not None and remaining <= 0):
                        return None
                    self._ready_changed.wait(remaining if remaining is not None else 0.5)
                batch = ready.popleft()
                self._remove_pending(batch)
                key = batch.instance_id.lower()
                existing = self._active.get(key)
                if existing is None:
                    session = OrchestrationSession(batch)
                    self._active[key] = session
                    return session
                if batch.execution_id == existing.execution_id:
                    existing.add_or_replace_messages(batch.messages)
                    continue
                # Another generation of a running instance: retry once the current session is done.
                self.requeued_other_generation += 1
                if not ready:
                    delay = self._settings.requeue_delay.total_seconds()
                    timer = threading.Timer(delay, self._requeue, args=(batch,))
                    timer.daemon = True
                    timer.start()
                else:
                    self._pending_batches.append(batch)
                    ready.append(batch)
        return None

    def _requeue(self, batch: PendingMessageBatch) -> None:
        with self._lock:
            self._pending_batches.append(batch)
            self._ready_queue_for(batch).append(batch)
            self._ready_changed.notify_all()

    def try_get_existing_session(self, instance_id: str) -> OrchestrationSession | None:
        with self._lock:
            return self._active.get(instance_id.lower())

    def try_release_session(self, instance_id: str) -> OrchestrationSession | None:
        """Forget the session; its unprocessed (pending + deferred) messages go back to the pending buffer."""
        with self._lock:
            session = self._active.pop(instance_id.lower(), None)
            if session is None:
                _log.error("TryReleaseSession: Session for instance %s was not found!", instance_id)
                return None
            self.add_messages_to_pending(session.control_queue, session.pending_messages + session.deferred_messages)
            return session

    def abort_all_sessions(self, timeout: float) -> int:
        """The seed's ``AbortAllSessions`` (forced stop): forget every active session at once; returns how many.

        An episode still running for an aborted session checkpoints nothing (``begin_checkpoint`` refuses it),
        as DTFx's ``CompleteTaskOrchestrationWorkItemAsync`` writes nothing when the session is gone: its
        messages are neither deleted nor abandoned and reappear when their visibility timeout expires.
        Checkpoints already under way are storage writes, not user code: they finish first (up to ``timeout``).
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            aborted = len(self._active)
            self._active.clear()
            while self._checkpoints_in_progress:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    _log.error("%d checkpoint(s) still running after the sessions were aborted", aborted)
                    break
                self._checkpoints_changed.wait(remaining)
        if aborted:
            _log.warning("aborted %d active session(s); their messages reappear after the visibility timeout", aborted)
        return aborted

    def begin_checkpoint(self, session: OrchestrationSession) -> bool:
        """Start ``session``'s checkpoint; False if the session was aborted (write nothing). Pair with
        ``end_checkpoint``."""
        with self._lock:
            if self._active.get(session.instance_id.lower()) is not session:
                return False
            self._checkpoints_in_progress += 1
            return True

    def end_checkpoint(self) -> None:
        with self._lock:
            self._checkpoints_in_progress -= 1
            self._checkpoints_changed.notify_all()

    def is_active(self, session: OrchestrationSession) -> bool:
        """True while ``session`` is this worker's active session of its instance (not released or aborted)."""
        with self._lock:
            return self._active.get(session.instance_id.lower()) is session

    def get_stats(self) -> SessionStats:
        with self._lock:
            return SessionStats(
                pending_instances=len(self._pending_batches),
                pending_messages=self.pending_tracker.count(),
                active_sessions=len(self._active),
            )

    def shutdown(self, *, wait: bool = True) -> None:
        """Stop dequeue loops and background work (in-memory state is dropped; messages reappear later)."""
        self._shutdown.set()
        with self._lock:
            for control_queue in self._owned.values():
                control_queue.release("shutdown", "OrchestrationSessionManager.shutdown")
            self._ready_changed.notify_all()
            loops = list(self._loops.values())
        if wait:
            for loop in loops:
                loop.join(timeout=5)
        self._background.shutdown(wait=wait, cancel_futures=True)

    # ------------------------------------------------------------------------------------------------

    def _remove_pending(self, batch: PendingMessageBatch) -> None:
        for index, candidate in enumerate(self._pending_batches):
            if candidate is batch:
                del self._pending_batches[index]
                return

    def _submit(self, work: Callable[[], object]) -> None:
        def run() -> None:
            try:
                work()
            except WorkerKilled:
                return
            except Exception:
                _log.exception("background work failed")

        try:
            self._background.submit(run)
        except RuntimeError:
            _log.debug("background pool closed; work dropped")

    def _submit_later(self, delay: timedelta, work: Callable[[], object]) -> None:
        """Submit ``work`` to the background pool after ``delay``; no thread of the pool waits meanwhile."""
        if self._shutdown.is_set():
            return
        timer = threading.Timer(delay.total_seconds(), self._submit, args=(work,))
        timer.daemon = True
        timer.start()


def _each(action: Callable[[QueueMessage], None], messages: list[QueueMessage]) -> None:
    for message in messages:
        action(message)
