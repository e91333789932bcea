"""Client operations of the engine (DTFx ``TaskHubClient`` over the Azure Storage backend).

Every operation is a message on the target instance's control queue plus, for starts, the Instances row:
``start_new`` enqueues ExecutionStarted FIRST and writes the Pending row second (crash point C10 between
them), which is why the session manager de-duplicates starts against that row. Management messages
(raise event, terminate, suspend, resume) carry no execution id, so they reach whatever execution is
current.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime

from durable_local import history
from durable_local.engine_api import InstanceStatus
from durable_local.errors import (
    FunctionNotFoundError,
    InstanceExistsError,
    InstanceNotFoundError,
    InvalidInstanceStateError,
)
from durable_local.faults import CrashPoint, FaultInjector
from durable_local.instance_ids import start_id_error
from durable_local.model import FunctionRegistry, HistoryEvent, InstanceRecord, RuntimeStatus, TaskMessage
from durable_local.ports import Clock, InstanceQuery, Queue, TrackingStore

_NOT_REPLACEABLE = (
    RuntimeStatus.PENDING,
    RuntimeStatus.RUNNING,
    RuntimeStatus.SUSPENDED,
    RuntimeStatus.CONTINUED_AS_NEW,
)
_TERMINAL = (RuntimeStatus.COMPLETED, RuntimeStatus.FAILED, RuntimeStatus.TERMINATED, RuntimeStatus.CANCELED)


class ClientOperations:
    """Thread-safe client API over a tracking store and the control queues."""

    def __init__(
        self,
        *,
        registry: FunctionRegistry,
        tracking: TrackingStore,
        control_queue_for: Callable[[str], Queue],
        clock: Clock,
        faults: FaultInjector,
        override_running: bool = False,
    ) -> None:
        """``override_running``: ``overridableExistingInstanceStates: AnyState`` (no dedupe statuses: a start
        replaces a Pending, Running, Suspended or ContinuedAsNew instance too)."""
        self._registry = registry
        self._dedupe_statuses: tuple[RuntimeStatus, ...] = () if override_running else _NOT_REPLACEABLE
        self._tracking = tracking
        self._control_queue_for = control_queue_for
        self._clock = clock
        self._faults = faults
        self._sequence = itertools.count(1)
        self._changed = threading.Condition()

    def notify_changed(self, instance_id: str) -> None:
        """Called after a checkpoint updated an instance row: wakes ``wait_for_completion``."""
        with self._changed:
            self._changed.notify_all()

    # ------------------------------------------------------------------------------------------------

    def start_new(self, name: str, *, instance_id: str | None = None, input_json: str | None = None) -> str:
        if self._registry.orchestrator(name) is None:
            raise FunctionNotFoundError("orchestrator", name)
        instance_id = instance_id or uuid.uuid4().hex
        if not instance_id.strip():
            raise ValueError("instance_id must not be blank")
        refused = start_id_error(instance_id)
        if refused is not None:
            raise ValueError(refused)  # the extension's ArgumentException: 400 over HTTP, nothing started
        existing = self._tracking.get_instance(instance_id)
        if existing is not None and existing.status in self._dedupe_statuses:
            raise InstanceExistsError(instance_id, existing.status.display)
        now = self._clock.now()
        execution_id = uuid.uuid4().hex
        generation = existing.generation + 1 if existing is not None else 0
        started = history.execution_started(
            timestamp=now,
            name=name,
            instance_id=instance_id,
            execution_id=execution_id,
            input=input_json,
            generation=generation,
        )
        self._send(TaskMessage(instance_id, execution_id, started, next(self._sequence)))
        self._faults.hit(CrashPoint.C10_CLIENT_AFTER_START_ENQUEUE, instance_id=instance_id)
        record = InstanceRecord(
            instance_id=instance_id,
            name=name,
            execution_id=execution_id,
            status=RuntimeStatus.PENDING,
            created_time=history.parse_timestamp(str(started["Timestamp"])),
            last_updated_time=now,
            input=input_json,
            generation=generation,
        )
        # Azure returns 409/412 when the row changed meanwhile; DTFx ignores it, and so do we.
        self._tracking.set_new_execution(record, overwrite=existing is not None)
        return instance_id

    def raise_event(self, instance_id: str, event_name: str, data_json: str | None) -> None:
        self._require_live(instance_id, "raise event for")
        event = history.event_raised(timestamp=self._clock.now(), name=event_name, input=data_json)
        self._send(TaskMessage(instance_id, None, event, next(self._sequence)))

    def terminate(self, instance_id: str, reason: str | None) -> None:
        self._require_live(instance_id, "terminate")
        event = history.execution_terminated(timestamp=self._clock.now(), reason=reason)
        self._send(TaskMessage(instance_id, None, event, next(self._sequence)))

    def suspend(self, instance_id: str, reason: str | None) -> None:
        record = self._require_live(instance_id, "suspend")
        if record.status is RuntimeStatus.SUSPENDED:
            # The extension's SuspendAsync only suspends Running/Pending/ContinuedAsNew instances and throws
            # otherwise; a silent no-op here would hide the error a deployed app gets.
            raise InvalidInstanceStateError(instance_id, record.status.display, "suspend")
        event = history.execution_suspended(timestamp=self._clock.now(), reason=reason)
        self._send(TaskMessage(instance_id, None, event, next(self._sequence)))

    def resume(self, instance_id: str, reason: str | None) -> None:
        record = self._require_live(instance_id, "resume")
        if record.status is not RuntimeStatus.SUSPENDED:
            raise InvalidInstanceStateError(instance_id, record.status.display, "resume")
        event = history.execution_resumed(timestamp=self._clock.now(), reason=reason)
        self._send(TaskMessage(instance_id, None, event, next(self._sequence)))

    def restart(self, instance_id: str, *, restart_with_new_instance_id: bool = True) -> str:
        record = self._tracking.get_instance(instance_id)
        if record is None:
            raise InstanceNotFoundError(instance_id)
        target = uuid.uuid4().hex if restart_with_new_instance_id else instance_id
        return self.start_new(record.name, instance_id=target, input_json=record.input)

    # ------------------------------------------------------------------------------------------------

    def get_status(
        self, instance_id: str, *, show_history: bool = False, show_input: bool = True
    ) -> InstanceStatus | None:
        record = self._tracking.get_instance(instance_id)
        if record is None:
            return None
        events: list[HistoryEvent] | None = None
        if show_history:
            loaded = self._tracking.get_history(instance_id, record.execution_id)
            events = loaded.events
        return _status(record, show_input=show_input, history_events=events)

    def query(self, query: InstanceQuery) -> tuple[list[InstanceStatus], str | None]:
        page = self._tracking.query_instances(query)
        return [_status(r, show_input=True, history_events=None) for r in page.instances], page.continuation_token

    def purge(self, instance_id: str) -> bool:
        """DTFx ``AzureTableTrackingStore.PurgeInstanceHistoryAsync(instanceId)``: delete the row and the history
        of the instance whatever its status (a running one too: its later messages find no instance)."""
        if self._tracking.get_instance(instance_id) is None:
            return False
        return self._tracking.purge_instance(instance_id)

    def purge_many(
        self,
        *,
        created_from: datetime | None = None,
        created_to: datetime | None = None,
        statuses: tuple[RuntimeStatus, ...] = (),
    ) -> int:
        # DTFx PurgeInstanceHistoryAsync(createdTimeFrom, createdTimeTo, runtimeStatus) keeps only the terminal
        # statuses of the filter; an empty filter (none given, or none terminal) matches every status.
        wanted = tuple(s for s in statuses if s in _TERMINAL)
        query = InstanceQuery(runtime_status=wanted, created_from=created_from, created_to=created_to, page_size=100)
        purged = 0
        victims: list[str] = []
        while True:
            page = self._tracking.query_instances(query)
            victims.extend(r.instance_id for r in page.instances)
            if not page.continuation_token:
                break
            query.continuation_token = page.continuation_token
        for instance_id in victims:
            if self.purge(instance_id):
                purged += 1
        return purged

    def wait_for_completion(self, instance_id: str, timeout: float) -> InstanceStatus | None:
        deadline = time.monotonic() + timeout
        while True:
            status = self.get_status(instance_id, show_input=False)
            if status is None:
                return None
            if status.runtime_status in _TERMINAL:
                return status
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return status
            with self._changed:
                # Checkpoints notify; the short cap also covers another process writing the store.
                self._changed.wait(min(remaining, 0.05))

    # ------------------------------------------------------------------------------------------------

    def _send(self, message: TaskMessage) -> None:
        self._control_queue_for(message.instance_id).add(message)

    def _require_live(self, instance_id: str, operation: str) -> InstanceRecord:
        record = self._tracking.get_instance(instance_id)
        if record is None:
            raise InstanceNotFoundError(instance_id)
        if record.status in _TERMINAL:
            raise InvalidInstanceStateError(instance_id, record.status.display, operation)
        return record


def _status(record: InstanceRecord, *, show_input: bool, history_events: list[HistoryEvent] | None) -> InstanceStatus:
    return InstanceStatus(
        instance_id=record.instance_id,
        name=record.name,
        runtime_status=record.status,
        created_time=record.created_time,
        last_updated_time=record.last_updated_time,
        input=record.input if show_input else None,
        output=record.output,
        custom_status=record.custom_status,
        history=history_events,
        execution_id=record.execution_id,
        parent_instance_id=record.parent_instance_id,
    )
