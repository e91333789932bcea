"""How the extension's orchestration context turns ``CallEntity``/``SignalEntity`` actions into messages.

``ContextImplementations/DurableOrchestrationContext.cs`` (``CallDurableTaskFunctionAsync`` for entities,
``SendEntityMessage``, ``WaitForEntityResponse``, ``NewGuid``):

* the request id is ``NewGuid()``: deterministic from the instance id, the orchestration's current time and a
  per-execution counter, so every replay re-creates the same id;
* the request (``parent`` = this instance and execution) is labelled by the context's ``MessageSorter`` with
  the current time and sent with ``SendEvent(target, "op", request)``: an ``EventSent`` decision that takes a
  sequence number, and an ``EventRaised`` message for the entity;
* a call then waits for the external event named by the request id (the entity's response). It is not a DTFx
  "open task": like ``WaitForExternalEvent`` it does not hold back the orchestration's completion.

The action's ``input`` (the SDK's ``df_dumps`` text) is a JSON string for the extension, which serialises it
once more into the request (``RequestMessage.SetInput``); the Python entity decodes both levels in
``get_input()``.
"""

from __future__ import annotations

import json
from datetime import timedelta

from durable_local.entities.dotnet import deterministic_guid, ticks_of, to_ticks
from durable_local.entities.ids import EntityId
from durable_local.entities.messages import REQUEST_EVENT, RequestMessage
from durable_local.entities.sorter import MessageSorter
from durable_local.replay.dtfx import DtfxContext, SimTask, completed_task


class EntityCalls:
    """The entity side of one execution's extension context: request ids and send-side ordering labels."""

    def __init__(self, context: DtfxContext, instance_id: str, reorder_window: timedelta) -> None:
        self._context = context
        self._instance_id = instance_id
        self._reorder_window = ticks_of(reorder_window)
        self._guid_counter = 0
        self._sorter = MessageSorter()

    def send(self, target: EntityId, operation: str, input: str | None, *, signal: bool) -> SimTask:
        """Send one request; returns the task of the response (a completed task for a signal)."""
        ctx = self._context
        request_id = deterministic_guid(self._instance_id, ctx.now, self._guid_counter)
        self._guid_counter += 1
        request = RequestMessage(
            id=request_id,
            operation=operation,
            is_signal=signal,
            input=None if input is None else json.dumps(input),
            parent_instance_id=self._instance_id,
            parent_execution_id=ctx.execution_id,
        )
        self._sorter.label_outgoing(request, target.scheduler_id, to_ticks(ctx.now), self._reorder_window)
        ctx.send_event(target.scheduler_id, REQUEST_EVENT, request.to_text())
        if signal:
            return completed_task()
        return ctx.wait_for_external_event(request_id)
