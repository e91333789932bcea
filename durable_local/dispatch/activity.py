"""The activity dispatcher: one fetch loop and a pool of ``max_concurrent_activities`` worker threads.

The fetch loop dequeues one message at a time, only when a worker slot is free (hidden for
``work_item_visibility_timeout``, renewed while the activity runs); a worker calls
``registry.activity(name)(input_json)`` and answers the orchestration with ``TaskCompleted`` or
``TaskFailed`` on its control queue FIRST, then deletes the work item (DTFx
``CompleteTaskActivityWorkItemAsync``). A crash between the two (C9) re-runs the activity and duplicates
the completion; a crash before the response (C8) re-runs it after the visibility timeout: at-least-once.

TaskFailed carries what the Durable extension's ``TaskActivityShim`` writes for an out-of-proc failure:
``Reason = "Activity function '<name>' failed: <friendly message>"`` where the friendly message is the
worker's ``"\\nException:"`` text (`` <Type>: <message>``), and ``Details`` = the serialised exception
(here: JSON with the Python type, message and traceback). The Python SDK raises ``f"{Reason} \\n {Details}"``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from durable_local.dispatch.counters import EngineCounters
from durable_local.faults import CrashPoint, FaultInjector, WorkerKilled
from durable_local.history import task_completed, task_failed
from durable_local.model import FunctionRegistry, HistoryEvent, TaskMessage
from durable_local.ports import Clock, MessageGoneError, Queue, QueueMessage
from durable_local.sessions.control_queue import PollingBackoff
from durable_local.settings import EngineSettings

_log = logging.getLogger(__name__)


def failure_reason(activity_name: str, exc: BaseException) -> str:
    """The extension's TaskFailed Reason for an out-of-proc activity exception."""
    return f"Activity function '{activity_name}' failed:  {type(exc).__name__}: {exc}"


def failure_details(exc: BaseException) -> str:
    """A stand-in for the extension's serialised exception (``Utils.SerializeCause``)."""
    return json.dumps(
        {
            "ClassName": type(exc).__name__,
            "Message": str(exc),
            "StackTraceString": "".join(traceback.format_exception(exc)),
        }
    )


@dataclass(slots=True)
class _InFlight:
    message: QueueMessage
    lock: threading.Lock
    renewed_at: datetime


class ActivityDispatcher:
    def __init__(
        self,
        *,
        work_items: Queue,
        control_queue_for: Callable[[str], Queue],
        registry: FunctionRegistry,
        settings: EngineSettings,
        clock: Clock,
        faults: FaultInjector,
        counters: EngineCounters,
    ) -> None:
        self._work_items = work_items
        self._control_queue_for = control_queue_for
        self._registry = registry
        self._settings = settings
        self._clock = clock
        self._faults = faults
        self._counters = counters
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._in_flight: dict[str, _InFlight] = {}
        self._in_flight_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(settings.max_concurrent_activities)
        self._pool = ThreadPoolExecutor(settings.max_concurrent_activities, thread_name_prefix="dl-activity")
        self._idle = threading.Condition()
        self._wakeup = threading.Event()
        self._running = 0

    def start(self) -> None:
        # As DTFx's WorkItemDispatcher: one fetch loop takes a message only when a slot is free, and hands it
        # to a worker thread; polling from every worker thread would just contend for the queue.
        fetcher = threading.Thread(target=self._fetch_loop, name="dl-activity-fetch", daemon=True)
        renewer = threading.Thread(target=self._renew_loop, name="dl-activity-renewer", daemon=True)
        self._threads.extend([fetcher, renewer])
        fetcher.start()
        renewer.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop taking work; wait up to ``timeout`` for running activities to finish."""
        self._stop.set()
        self._wakeup.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._idle:
            while self._running and time.monotonic() < deadline:
                self._idle.wait(max(0.0, min(0.05, deadline - time.monotonic())))

    def wake(self) -> None:
        """A work item was just added by this process: end the polling back-off now (see ControlQueue.wake)."""
        self._wakeup.set()

    def _fetch_loop(self) -> None:
        backoff = PollingBackoff(self._settings.min_queue_polling_interval, self._settings.max_queue_polling_interval)
        try:
            while not self._stop.is_set() and not self._faults.dead:
                if not self._slots.acquire(timeout=0.05):
                    continue
                try:
                    messages = self._work_items.get_messages(1, self._settings.work_item_visibility_timeout)
                except BaseException:
                    self._slots.release()
                    raise
                if not messages:
                    self._slots.release()
                    if self._wakeup.wait(backoff.next_delay()):
                        self._wakeup.clear()
                        backoff.reset()
                    continue
                backoff.reset()
                with self._idle:
                    self._running += 1
                try:
                    future = self._pool.submit(self._run_one, messages[0])
                except RuntimeError:
                    self._never_ran()  # the pool closed under us: the message reappears after its visibility
                    raise
                future.add_done_callback(self._release_if_cancelled)
        except WorkerKilled:
            return
        except RuntimeError:
            _log.debug("activity pool closed; fetch loop ends")

    def _release_if_cancelled(self, future: Future[None]) -> None:
        # stop() cancels work items still queued in the pool: give back their slot and running count, or
        # stop() would wait its whole timeout for activities that will never run.
        if future.cancelled():
            self._never_ran()

    def _never_ran(self) -> None:
        self._slots.release()
        with self._idle:
            self._running -= 1
            self._idle.notify_all()

    @property
    def running(self) -> int:
        """Work items handed to the pool and not finished (or given back) yet."""
        with self._idle:
            return self._running

    def _run_one(self, message: QueueMessage) -> None:
        try:
            self.process(message)
        except WorkerKilled:
            return
        except Exception:
            # Storage trouble after the run: the message reappears after its visibility timeout.
            _log.exception("activity work item %s failed", message.message_id)
        finally:
            self._slots.release()
            with self._idle:
                self._running -= 1
                self._idle.notify_all()

    def process(self, message: QueueMessage) -> None:
        scheduled = message.body.event
        name = str(scheduled.get("Name") or "")
        entry = _InFlight(message, threading.Lock(), self._clock.now())
        with self._in_flight_lock:
            self._in_flight[message.message_id] = entry
        self._counters.activity_started(name)
        failed = False
        try:
            response = self._execute(name, scheduled)
            failed = "Reason" in response
        finally:
            self._counters.activity_finished(name, failed=failed)
        self._faults.hit(CrashPoint.C8_ACTIVITY_AFTER_EXECUTE, name=name, message=message)
        reply = TaskMessage(message.body.instance_id, message.body.execution_id, response)
        self._control_queue_for(message.body.instance_id).add(reply)
        self._faults.hit(CrashPoint.C9_ACTIVITY_AFTER_RESPONSE, name=name, message=message)
        with entry.lock:
            with self._in_flight_lock:
                self._in_flight.pop(message.message_id, None)
            try:
                self._work_items.delete(message.message_id, entry.message.pop_receipt)
            except MessageGoneError:
                _log.warning("work item %s was gone at delete (visibility expired?)", message.message_id)

    def _execute(self, name: str, scheduled: HistoryEvent) -> HistoryEvent:
        now = self._clock.now
        task_id = int(scheduled.get("EventId", -1))
        function = self._registry.activity(name)
        if function is None:
            reason = f"The activity function '{name}' doesn't exist, is disabled, or is not an activity function."
            return task_failed(timestamp=now(), task_scheduled_id=task_id, reason=reason, details=None)
        try:
            result = function(scheduled.get("Input"))
        except Exception as exc:
            _log.info("activity %s failed: %s", name, exc)
            return task_failed(
                timestamp=now(),
                task_scheduled_id=task_id,
                reason=failure_reason(name, exc),
                details=failure_details(exc),
            )
        return task_completed(timestamp=now(), task_scheduled_id=task_id, result=result)

    def _renew_loop(self) -> None:
        """Keep running activities hidden: renew each message's visibility every half timeout."""
        timeout = self._settings.work_item_visibility_timeout
        try:
            while not self._stop.wait(0.05) and not self._faults.dead:
                now = self._clock.now()
                with self._in_flight_lock:
                    entries = list(self._in_flight.values())
                for entry in entries:
                    if now - entry.renewed_at < timeout / 2:
                        continue
                    with entry.lock:
                        with self._in_flight_lock:
                            if entry.message.message_id not in self._in_flight:
                                continue
                        try:
                            updated = self._work_items.update_visibility(
                                entry.message.message_id, entry.message.pop_receipt, timeout
                            )
                        except MessageGoneError:
                            continue
                        entry.message.pop_receipt = updated.pop_receipt
                        entry.renewed_at = now
                        self._counters.add("activity_renewals")
        except WorkerKilled:
            return
