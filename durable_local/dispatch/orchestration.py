"""The orchestration dispatcher: lock a session, run one episode, checkpoint in Azure Storage order.

Per work item (DTFx ``LockNextTaskOrchestrationWorkItemAsync`` + ``CompleteTaskOrchestrationWorkItemAsync``):

1. released queue (lease lost) → abandon the batch and release the session;
2. out-of-order responses (``OrchestrationSession.is_out_of_order``: newer than the last checkpoint and their
   TaskScheduled/TimerCreated/EventSent is not in the loaded history) → abandon them (debug log + counter);
3. non-executable instance (no ExecutionStarted anywhere, or already terminal) → delete this execution's
   messages, defer the others;
4. ``run_episode`` (the replay layer), then checkpoint:
   (1) outbound messages — activities to the work-item queue, timers to the own control queue hidden until
   FireAt, orchestrator messages to the target instance's control queue; (2) history in batches of ≤ 99
   events under the sentinel ETag (conflict = split brain → abandon); (3) the Instances row; (4) delete the
   work item's messages; then release the session.

Entity instances (``@name@key``) take the same path with ``run_entity_episode`` (``durable_local.entities``):
they start themselves on their first message, and an aborted entity batch abandons its messages.

Crash points C1-C7 and C13 are hit at the matching places (``durable_local.faults``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from durable_local.dispatch.counters import EngineCounters
from durable_local.dispatch.episode_caches import EpisodeCaches
from durable_local.entities.batch import EntityBatchError
from durable_local.entities.episode import auto_start_applies, run_entity_episode
from durable_local.entities.ids import is_entity_instance
from durable_local.faults import CrashPoint, FaultInjector, WorkerKilled
from durable_local.history import event_type, parse_timestamp
from durable_local.model import EventType, FunctionRegistry, HistoryEvent, InstanceRecord, RuntimeStatus, TaskMessage
from durable_local.ports import Clock, EtagConflictError, HistoryBatch, Queue, QueueMessage, TrackingStore
from durable_local.replay.api import EpisodeInput, EpisodeResult, ReplaySettings
from durable_local.replay.episode import run_episode
from durable_local.sessions.manager import OrchestrationSessionManager
from durable_local.sessions.state import OrchestrationSession, started_event, task_event_id
from durable_local.settings import EngineSettings

_log = logging.getLogger(__name__)

_LIVE = (RuntimeStatus.RUNNING, RuntimeStatus.PENDING, RuntimeStatus.SUSPENDED)


def replay_settings(settings: EngineSettings) -> ReplaySettings:
    """The episode knobs that come from the engine settings (the rest keep the extension's defaults)."""
    return ReplaySettings(
        include_parameters=settings.store_inputs_in_orchestration_history,
        max_entity_operation_batch_size=settings.max_entity_operation_batch_size,
        entity_message_reorder_window=settings.entity_message_reorder_window,
    )


def history_status(history: list[HistoryEvent]) -> RuntimeStatus:
    """DTFx ``OrchestrationRuntimeState.OrchestrationStatus``: from the ExecutionCompleted event, else Running."""
    for event in reversed(history):
        if event_type(event) in (EventType.EXECUTION_COMPLETED, EventType.CONTINUE_AS_NEW):
            return RuntimeStatus(int(event.get("OrchestrationStatus", 0)))
    return RuntimeStatus.RUNNING


def _left_by_an_older_execution(session: OrchestrationSession, messages: list[QueueMessage]) -> bool:
    """Timers of an execution that no longer exists (the instance has history, of a newer execution): the normal end
    of a timer outlived by continue-as-new (the seed: "most common in scenarios involving durable timers and
    ContinueAsNew"), logged at info level where other discards warn."""
    return (
        not session.history
        and session.last_checkpoint_time is not None
        and all(event_type(m.body.event) is EventType.TIMER_FIRED for m in messages)
    )


class OrchestrationDispatcher:
    def __init__(
        self,
        sessions: OrchestrationSessionManager,
        *,
        tracking: TrackingStore,
        work_items: Queue,
        control_queue_for: Callable[[str], Queue],
        registry: FunctionRegistry,
        settings: EngineSettings,
        clock: Clock,
        faults: FaultInjector,
        counters: EngineCounters,
        on_checkpoint: Callable[[str], None] | None = None,
        entities_only: bool = False,
        threads: int | None = None,
    ) -> None:
        self._entities_only = entities_only
        """True for the entity dispatcher of ``use_separate_queue_for_entity_work_items`` (the seed's entity ready
        queue, ``GetNextSessionAsync(entitiesOnly: true)``); False takes every other ready batch."""
        self._thread_count = threads or settings.orchestration_threads
        self._sessions = sessions
        self._tracking = tracking
        self._work_items = work_items
        self._control_queue_for = control_queue_for
        self._registry = registry
        self._settings = settings
        self._clock = clock
        self._faults = faults
        self._counters = counters
        self._on_checkpoint = on_checkpoint
        self._caches = EpisodeCaches()
        """What each instance's last episode here left for its next one (never for entities: no worker call)."""
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.busy = 0
        self._busy_lock = threading.Lock()

    def start(self) -> None:
        prefix = "dl-entity" if self._entities_only else "dl-orchestrator"
        for index in range(self._thread_count):
            thread = threading.Thread(target=self._run, name=f"{prefix}-{index}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _run(self) -> None:
        try:
            while not self._stop.is_set() and not self._faults.dead:
                session = self._sessions.get_next_session(timeout=0.1, entities_only=self._entities_only)
                if session is None:
                    continue
                with self._busy_lock:
                    self.busy += 1
                try:
                    self.process(session)
                finally:
                    with self._busy_lock:
                        self.busy -= 1
        except WorkerKilled:
            return

    # ------------------------------------------------------------------------------------------------

    def process(self, session: OrchestrationSession) -> None:
        """Handle one locked session end to end; always releases it unless the worker dies."""
        try:
            if self._prepare(session):
                self._execute(session)
        except WorkerKilled:
            raise
        except EntityBatchError as exc:
            # The extension aborts the batch (SessionAbortedException): the messages come back with back-off.
            self._counters.add("entity_batches_aborted")
            _log.warning("entity batch of %s aborted, will be retried: %s", session.instance_id, exc)
            if self._sessions.is_active(session):
                self._abandon_all(session)
        except Exception:
            # A bug or a storage failure: give the messages back (abandon) so that they are retried later.
            self._counters.add("episode_errors")
            _log.exception("orchestration work item for %s failed; abandoning it", session.instance_id)
            if self._sessions.is_active(session):
                self._abandon_all(session)
        # An aborted session (forced stop) is already forgotten: nothing to release, its messages stay hidden.
        if self._sessions.is_active(session):
            self._sessions.try_release_session(session.instance_id)

    def _prepare(self, session: OrchestrationSession) -> bool:
        """Steps 1-3; True if an episode should run."""
        queue = session.control_queue
        if queue.is_released:
            self._abandon_all(session)
            return False
        out_of_order = [m for m in session.current_batch if session.is_out_of_order(m)]
        for message in out_of_order:
            # DTFx logs ReceivedOutOfOrderMessage and abandons (LockNextTaskOrchestrationWorkItemAsync): a response
            # that overtook its own checkpoint. Routine (it comes back after the abandon back-off and is then in
            # order), so debug level and the out_of_order_abandoned counter; one stuck for good ends in the poison
            # back-off, which is logged as a warning (control_queue).
            _log.debug(
                "%s: out-of-order %s for task %s (not in history yet, execution %s, dequeue count %d, last checkpoint"
                " %s): abandoning",
                session.instance_id,
                event_type(message.body.event).name,
                task_event_id(message.body.event),
                session.execution_id,
                message.dequeue_count,
                session.last_checkpoint_time,
            )
            self._faults.hit(CrashPoint.C7_OUT_OF_ORDER_MESSAGE, instance_id=session.instance_id, message=message)
            self._counters.add("out_of_order_abandoned")
            queue.abandon(message)
        session.remove_from_batch(out_of_order)
        if not session.current_batch:
            return False
        warning = self._not_executable_reason(session)
        if warning is None:
            return True
        self._repair_instance_row(session)
        discard = [m for m in session.current_batch if m.body.execution_id == session.execution_id]
        keep = [m for m in session.current_batch if m.body.execution_id != session.execution_id]
        if not discard:
            discard, keep = keep, []
        for message in keep:
            session.defer(message)
        _log.log(
            logging.INFO if _left_by_an_older_execution(session, discard) else logging.WARNING,
            "%s: discarding %d message(s) (%s): %s",
            session.instance_id,
            len(discard),
            ",".join(event_type(m.body.event).name for m in discard),
            warning,
        )
        self._discard(session, discard, warning)
        return False

    def _not_executable_reason(self, session: OrchestrationSession) -> str | None:
        has_start = started_event(session.history) is not None
        if (
            not has_start
            and is_entity_instance(session.instance_id)
            and auto_start_applies(False, [m.body for m in session.current_batch])
        ):
            return None  # DTFx Entities.AutoStart: the entity episode creates the ExecutionStarted
        if not has_start and not any(
            event_type(m.body.event) is EventType.EXECUTION_STARTED for m in session.current_batch
        ):
            terminations = [
                m.body.event
                for m in session.current_batch
                if event_type(m.body.event) is EventType.EXECUTION_TERMINATED
            ]
            if terminations:
                # DTFx IsExecutableInstanceAsync: a terminate for an instance that never started (its start
                # message is deferred, hidden or lost) still marks the Instances row Terminated.
                self._mark_terminated(session.instance_id, terminations[-1])
                return f"Instance is {RuntimeStatus.TERMINATED.display}"
            if not session.history:
                return "No such instance"
            return "Invalid history (may have been overwritten by a newer instance)"
        status = history_status(session.history)
        if has_start and status not in _LIVE:
            return f"Instance is {status.display}"
        return None

    def _mark_terminated(self, instance_id: str, terminated: HistoryEvent) -> None:
        """DTFx ``UpdateStatusForTerminationAsync``: merge status, times and the reason (as output) into the row."""
        row = self._tracking.get_instance(instance_id)
        if row is None:
            return
        reason = terminated.get("Input")
        row.status = RuntimeStatus.TERMINATED
        row.output = None if reason is None else json.dumps(reason)
        now = self._clock.now()
        row.last_updated_time = parse_timestamp(str(terminated["Timestamp"])) if terminated.get("Timestamp") else now
        row.completed_time = now
        self._tracking.update_instance(row)
        if self._on_checkpoint is not None:
            self._on_checkpoint(instance_id)

    def _repair_instance_row(self, session: OrchestrationSession) -> None:
        """DTFx repairs a stale Instances row of a terminal instance (crash C4 on the final episode)."""
        completed = next((e for e in reversed(session.history) if event_type(e) is EventType.EXECUTION_COMPLETED), None)
        if completed is None:
            return
        status = RuntimeStatus(int(completed.get("OrchestrationStatus", 0)))
        row = self._tracking.get_instance(session.instance_id)
        # Only a row of this very execution is repaired (DTFx compares execution ids): a row with another
        # execution id belongs to a newer start of the same instance id (a restart, a singleton re-start) that a
        # stale message of the old execution (e.g. a leftover timer) must not overwrite.
        if row is None or row.execution_id != session.execution_id or row.status is status:
            return
        _log.warning("%s: Instances row says %s, history says %s: repairing", session.instance_id, row.status, status)
        row.status = status
        result = completed.get("Result")
        # The checkpoint's encoding (replay.episode): a failure or termination reason is stored as a JSON string.
        row.output = result if status is RuntimeStatus.COMPLETED or result is None else json.dumps(result)
        row.last_updated_time = self._clock.now()
        row.completed_time = parse_timestamp(str(completed["Timestamp"])) if completed.get("Timestamp") else None
        self._tracking.update_instance(row)
        if self._on_checkpoint is not None:
            self._on_checkpoint(session.instance_id)

    def _execute(self, session: OrchestrationSession) -> None:
        started = time.perf_counter()
        now = self._clock.now()
        past = list(session.history)
        messages = [m.body for m in session.current_batch]
        # DTFx EnsureExecutionStartedIsFirst: a start message leads the new events.
        messages.sort(key=lambda m: event_type(m.event) is not EventType.EXECUTION_STARTED)
        # When the history exceeded max_history_events, its last past event is the seed's ExecutionTerminated:
        # replaying it terminates the instance, and as a past event it is never written (like DTFx, which
        # checkpoints only the runtime state's new events; its row number stays unused).
        replay_started = time.perf_counter()
        entity = is_entity_instance(session.instance_id)
        cache = None
        if not entity:
            cache = self._caches.take(
                session.instance_id, etag=session.etag, execution_id=session.execution_id, history_length=len(past)
            )
        result = (run_entity_episode if entity else run_episode)(
            EpisodeInput(
                instance_id=session.instance_id,
                past_events=past,
                new_messages=messages,
                now=now,
                registry=self._registry,
                mode=self._settings.scheduling_mode,
                settings=replay_settings(self._settings),
                cache=cache,
            )
        )
        replay_seconds = time.perf_counter() - replay_started
        self._faults.hit(CrashPoint.C1_AFTER_REPLAY, instance_id=session.instance_id)
        checkpoint_started = time.perf_counter()
        if not self._sessions.begin_checkpoint(session):
            # DTFx CompleteTaskOrchestrationWorkItemAsync: "Session for instance ... was not found" (aborted by a
            # forced stop): nothing is written and the messages are redelivered after their visibility timeout.
            _log.warning("%s: session aborted while its episode ran; results discarded", session.instance_id)
            self._counters.emit("episode_aborted", instance_id=session.instance_id)
            return
        try:
            checkpointed = self._checkpoint(session, result, now)
        finally:
            self._sessions.end_checkpoint()
        if not checkpointed:
            return
        if result.cache is not None:
            self._caches.keep(
                session.instance_id, etag=session.etag, history_length=len(result.history), cache=result.cache
            )
        for message, reason in result.discarded:
            self._counters.add("discarded_messages")
            self._faults.hit(CrashPoint.C13_STALE_GENERATION_DISCARDED, message=message, reason=reason)
        self._counters.episode(
            total=time.perf_counter() - started,
            replay=replay_seconds,
            checkpoint=time.perf_counter() - checkpoint_started,
            entity=entity,
            replayed_events=0 if entity else len(past),
            entity_operations=result.entity_operations,
            reused_events=result.reused_events,
            reused_actions=result.reused_actions,
        )
        self._counters.emit(
            "episode_completed", instance_id=session.instance_id, status=result.status, execution_id=result.execution_id
        )

    def _checkpoint(self, session: OrchestrationSession, result: EpisodeResult, now: datetime) -> bool:
        # (1) Outbound messages first: a crash after this re-sends them on retry (at-least-once).
        outbound: list[tuple[str, Queue, TaskMessage, datetime | None]] = []  # (kind, queue, message, visible at)
        for message in result.orchestrator_messages:
            outbound.append(("orchestrator", self._control_queue_for(message.instance_id), message, None))
        for timer in result.timer_messages:
            outbound.append(("timer", session.control_queue.queue, timer.message, timer.visible_at))
        for message in result.activity_messages:
            outbound.append(("activity", self._work_items, message, None))
        for index, (kind, queue, message, visible_at) in enumerate(outbound):
            # A timer's delay is FireAt less the clock *as the message is sent* (DTFx TaskHubQueue.GetVisibilityDelay),
            # not as the episode began: a clock that moved meanwhile must not push a due timer out by the jump.
            delay = timedelta(0) if visible_at is None else max(visible_at - self._clock.now(), timedelta(0))
            queue.add(message, visibility_delay=delay)
            self._faults.hit(
                CrashPoint.C2_AFTER_OUTBOUND_MESSAGE, index=index, total=len(outbound), kind=kind, message=message
            )
        # (2) History: the actual checkpoint, guarded by the sentinel ETag.
        new_events = result.history[result.committed_count :]
        self._faults.hit(
            CrashPoint.C6_BEFORE_HISTORY_COMMIT, instance_id=session.instance_id, etag=session.etag, session=session
        )
        try:
            self._write_history(session, result, new_events)
        except EtagConflictError:
            self._counters.add("split_brain")
            _log.warning("SplitBrainDetected: history of %s changed under this worker; abandoning", session.instance_id)
            self._counters.emit("session_abandoned", instance_id=session.instance_id, reason="split brain")
            self._abandon_all(session)
            return False
        self._faults.hit(CrashPoint.C4_AFTER_HISTORY, instance_id=session.instance_id)
        # (3) Instances row (insert-or-merge, no ETag).
        self._tracking.update_instance(self._instance_record(session, result, now))
        if self._on_checkpoint is not None:
            self._on_checkpoint(session.instance_id)
        self._faults.hit(CrashPoint.C5_AFTER_INSTANCE_UPDATE, instance_id=session.instance_id)
        # (4) The final commit: delete the messages this episode consumed.
        for consumed in session.current_batch:
            session.control_queue.delete(consumed)
        return True

    def _write_history(
        self, session: OrchestrationSession, result: EpisodeResult, new_events: list[HistoryEvent]
    ) -> None:
        size = self._settings.history_batch_size
        chunks = [new_events[i : i + size] for i in range(0, len(new_events), size)]
        etag = session.etag
        for index, chunk in enumerate(chunks):
            final = index == len(chunks) - 1
            batch = HistoryBatch(
                instance_id=session.instance_id,
                execution_id=result.execution_id,
                first_sequence_number=result.committed_count + index * size,
                events=chunk,
                is_final_batch=final,
            )
            etag = self._tracking.write_history_batch(batch, etag)
            session.etag = etag
            if not final:
                self._faults.hit(
                    CrashPoint.C3_BETWEEN_HISTORY_BATCHES, instance_id=session.instance_id, batch_index=index
                )
        session.history = list(result.history)
        session.execution_id = result.execution_id

    def _instance_record(self, session: OrchestrationSession, result: EpisodeResult, now: datetime) -> InstanceRecord:
        start = started_event(result.history)
        created = parse_timestamp(str(start["Timestamp"])) if start and start.get("Timestamp") else now
        output = result.output
        if output is None and result.failure is not None and result.status is RuntimeStatus.FAILED:
            output = json.dumps(result.failure.message)
        return InstanceRecord(
            instance_id=session.instance_id,
            name=result.name or (str(start.get("Name")) if start else ""),
            execution_id=result.execution_id,
            status=result.status,
            created_time=created,
            last_updated_time=now,
            version=str(start.get("Version") or "") if start else "",
            input=result.input,
            output=output,
            custom_status=result.custom_status,
            completed_time=now if result.status.is_terminal else None,
            generation=result.generation,
            parent_instance_id=result.parent_instance_id,
        )

    def _discard(self, session: OrchestrationSession, messages: list[QueueMessage], reason: str) -> None:
        for message in messages:
            self._counters.add("discarded_messages")
            self._faults.hit(CrashPoint.C13_STALE_GENERATION_DISCARDED, message=message.body, reason=reason)
            session.control_queue.delete(message)
        session.remove_from_batch(messages)
        self._counters.emit("messages_discarded", instance_id=session.instance_id, count=len(messages), reason=reason)

    def _abandon_all(self, session: OrchestrationSession) -> None:
        for message in session.current_batch:
            session.control_queue.abandon(message)
        session.current_batch = []
