"""One entity batch: read the delivered messages, pick the operations, run them, collect what to send.

Re-implements the facts of the extension's ``DurableTaskExtension.EntityMiddleware`` and
``Listener/TaskEntityShim.cs`` (the out-of-proc path) on the Azure Storage backend:

1. The scheduler state is rehydrated from the execution's input. Each ``EventRaised`` of the work item is
   handled in order: a request (``op``) goes through the ``MessageSorter`` (a scheduled one that is not due yet
   is re-sent to itself instead) and joins the queue, or the front of it when it comes from the lock holder; a
   ``release`` from the lock holder unlocks; anything else (``continue``) resumes a suspended entity.
2. A suspended entity whose execution started more than 10 s ago resumes anyway (the extension's mitigation).
3. Unless suspended, requests are taken from the queue while the lock allows: operations up to
   ``MaxEntityOperationBatchSize`` (reaching it suspends the entity and sends it a ``continue``), stopping at a
   lock request, which ends the batch.
4. The operations run in ONE call of the entity function; one response per call (not per signal) goes back to
   the calling orchestration execution, signals the entity sent are labelled and sent, then the lock request is
   granted (forwarded to the next entity of its lock set, or answered).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from durable_local.entities.batch import BatchResult, EntityBatchError, batch_request, parse_batch_result
from durable_local.entities.dotnet import TICKS_PER_SECOND, ticks_of, to_ticks
from durable_local.entities.ids import EntityId
from durable_local.entities.messages import (
    CONTINUE_EVENT,
    LOCK_ACQUIRED,
    RELEASE_EVENT,
    REQUEST_EVENT,
    OutgoingMessage,
    ReleaseMessage,
    RequestMessage,
    ResponseMessage,
    is_request_event,
    scheduled_request_event,
)
from durable_local.entities.state import SchedulerState
from durable_local.history import event_type, parse_timestamp
from durable_local.model import EntityFn, EventType, HistoryEvent

_log = logging.getLogger(__name__)

SUSPENSION_MITIGATION = timedelta(seconds=10)
"""A suspended entity whose execution is older than this resumes without its ``continue`` (ICM358210295)."""
EARLY_DELIVERY_TOLERANCE = 100 * TICKS_PER_SECOND // 1000
MAXIMUM_DELAY = timedelta(days=6)
"""``MaximumDelayTime`` of the Azure Storage provider (queue visibility is capped at 7 days)."""
LONG_RUNNING_TIMER_INTERVAL = timedelta(days=3)
ERROR_EXCEPTION_TYPE = "Error"
"""The ``exceptionType`` of an out-of-proc operation failure."""


@dataclass(slots=True)
class BatchOutcome:
    """What one batch did to the entity: its new scheduler state and the messages to send."""

    state: SchedulerState
    outbox: list[OutgoingMessage] = field(default_factory=list)
    operations: list[RequestMessage] = field(default_factory=list)
    result: BatchResult | None = None


class EntityScheduler:
    def __init__(
        self,
        entity: EntityId,
        *,
        now: datetime,
        max_batch_size: int,
        reorder_window: timedelta,
    ) -> None:
        self.entity = entity
        self.now = now
        self.max_batch_size = max_batch_size
        self.reorder_window = ticks_of(reorder_window)
        self.state = SchedulerState()
        self._started_at: datetime | None = None
        self._lock_holder_messages: list[RequestMessage] = []
        self._to_reschedule: list[RequestMessage] = []
        self._lock_request: RequestMessage | None = None
        self._continue_with_delay = False

    # -- step 1: the work item's events ----------------------------------------------------------------

    def receive(self, events: list[HistoryEvent]) -> None:
        for event in events:
            kind = event_type(event)
            if kind is EventType.EXECUTION_STARTED:
                self.state = SchedulerState.from_text(event.get("Input"))
                self._started_at = parse_timestamp(str(event["Timestamp"])) if event.get("Timestamp") else None
            elif kind is EventType.EVENT_RAISED:
                self._receive_event(str(event.get("Name") or ""), event.get("Input"))
        if self._lock_holder_messages:
            self.state.put_back(self._lock_holder_messages)  # lock holder messages go to the front
            self._lock_holder_messages = []

    def _receive_event(self, name: str, payload: str | None) -> None:
        if is_request_event(name):
            request = RequestMessage.from_text(payload)
            if request.scheduled_time is not None:
                if request.scheduled_time - to_ticks(self.now) > EARLY_DELIVERY_TOLERANCE:
                    self._to_reschedule.append(request)  # delivered too early: send it to ourselves again
                    return
                delivered = [request]  # no ordering guarantee for scheduled requests
            else:
                delivered = self.state.sorter.receive_in_order(request, self.reorder_window)
            for message in delivered:
                if self.state.locked_by is not None and self.state.locked_by == message.parent_instance_id:
                    self._lock_holder_messages.append(message)
                else:
                    self.state.enqueue(message)
        elif name == RELEASE_EVENT:
            release = ReleaseMessage.from_text(payload)
            if self.state.locked_by == release.parent_instance_id:
                self.state.locked_by = None
        else:  # "continue": resume processing of queued operations
            self.state.suspended = False

    # -- steps 2-3: pick the batch ---------------------------------------------------------------------

    def take_batch(self) -> list[RequestMessage]:
        if (
            self.state.suspended
            and self._started_at is not None
            and self._started_at < self.now - SUSPENSION_MITIGATION
        ):
            self.state.suspended = False
        batch: list[RequestMessage] = []
        if self.state.suspended:
            return batch
        while self.state.may_dequeue():
            if len(batch) == self.max_batch_size:
                self._continue_later()  # cut the batch here; write back, then continue
                break
            request = self.state.dequeue()
            if request.is_lock_request:
                self._lock_request = request
                break
            batch.append(request)
        return batch

    def _continue_later(self) -> None:
        if not self.state.suspended:
            self._continue_with_delay = True

    # -- step 4: run it and collect the messages -------------------------------------------------------

    def run(self, function: EntityFn | None, function_name: str) -> BatchOutcome:
        operations = self.take_batch()
        outcome = BatchOutcome(self.state, operations=operations)
        for request in self._to_reschedule:
            outcome.outbox.append(self._rescheduled(request))
        if operations:
            if function is None:
                raise EntityBatchError(
                    f"The function '{function_name}' doesn't exist, is disabled, or is not an entity function."
                )
            outcome.result = self._execute(function, operations)
            self._apply(outcome)
        if self._lock_request is not None:
            outcome.outbox.append(self._grant_lock(self._lock_request))
        if self._continue_with_delay:
            outcome.outbox.append(OutgoingMessage(self.entity.scheduler_id, None, CONTINUE_EVENT, None))
            self.state.suspended = True
        return outcome

    def _execute(self, function: EntityFn, operations: list[RequestMessage]) -> BatchResult:
        request = batch_request(self.entity, exists=self.state.exists, state=self.state.state, operations=operations)
        try:
            answer = function(request)
        except Exception as exc:
            # The function failed as a whole (the SDK catches per-operation errors itself): abort, retry later.
            raise EntityBatchError(f"entity function for {self.entity} failed: {type(exc).__name__}: {exc}") from exc
        return parse_batch_result(answer, len(operations))

    def _apply(self, outcome: BatchOutcome) -> None:
        result = outcome.result
        assert result is not None
        self.state.exists = result.entity_exists
        self.state.state = result.entity_state
        for request, op_result in zip(outcome.operations, result.results):
            if op_result.is_error:
                _log.info("entity %s: operation '%s' failed: %s", self.entity, request.operation, op_result.result)
            if request.is_signal:
                continue
            response = ResponseMessage(op_result.result, ERROR_EXCEPTION_TYPE if op_result.is_error else None)
            target = request.parent_instance_id or ""
            outcome.outbox.append(OutgoingMessage(target, request.parent_execution_id, request.id, response.to_text()))
        for signal in result.signals:
            message = RequestMessage(
                id=str(uuid.uuid4()),
                operation=signal.operation,
                is_signal=True,
                input=signal.input,
                parent_instance_id=self.entity.scheduler_id,
                parent_execution_id=None,  # for entities, the sorter persists across executions
            )
            target = signal.target.scheduler_id
            self.state.sorter.label_outgoing(message, target, to_ticks(self.now), self.reorder_window)
            outcome.outbox.append(OutgoingMessage(target, None, REQUEST_EVENT, message.to_text()))

    def _grant_lock(self, request: RequestMessage) -> OutgoingMessage:
        """``ProcessLockRequest``: lock, then pass the request on to the next entity or answer the orchestration."""
        assert request.lockset is not None
        self.state.locked_by = request.parent_instance_id
        request.position += 1
        if request.position < len(request.lockset):
            target = request.lockset[request.position].scheduler_id
            return OutgoingMessage(target, None, REQUEST_EVENT, request.to_text())
        response = ResponseMessage(LOCK_ACQUIRED)
        return OutgoingMessage(
            request.parent_instance_id or "", request.parent_execution_id, request.id, response.to_text()
        )

    def _rescheduled(self, request: RequestMessage) -> OutgoingMessage:
        """``RescheduleMessages``: back to ourselves as ``op@<time>``, visible no earlier than that time."""
        assert request.scheduled_time is not None
        now = to_ticks(self.now)
        if request.scheduled_time - now <= ticks_of(MAXIMUM_DELAY):
            due = request.scheduled_time
        else:
            due = now + ticks_of(LONG_RUNNING_TIMER_INTERVAL)
        return OutgoingMessage(self.entity.scheduler_id, None, scheduled_request_event(due), request.to_text(), due=due)
