"""The follower orchestrator: one eternal orchestration per (tenant, source, filters) keeps its audit log flowing.

Each execution is one cycle (``shared.follow.plan``): it waits for its wake on a durable timer (or a ``stop`` event,
honoured whenever it comes: after the pass it interrupts), runs the passes that are due one after another, each a
collection (the collect orchestrator as a sub-orchestration, over the day's windows that are due, with the day's
collection id, so every read of a window lands on that window's one object), applies each pass's output and
continues as new with its state. History therefore holds one cycle whatever the follower's age, and a host that was
down for hours resumes the timer that came due and catches up from where coverage ends, at most ``MAX_NEW_WINDOWS``
per cycle, each pass K-bounded like any collection (and taking the tenant budget like any collection).

Deterministic: only ``current_utc_datetime``, the pure planning functions and the passes' outputs decide. Every
execution's input is admitted first and every input it hands on (a pass, its next cycle) is sealed
(``orchestrators.admission``): a follower started with an input the follows API did not seal runs no pass.
"""

from __future__ import annotations

from collections.abc import Generator
from datetime import datetime
from typing import Any

import azure.durable_functions as df

from orchestrators import admission
from shared import names
from shared.follow.plan import Pass, apply, next_wake, plan, rescoped, status
from shared.follow.state import FollowSpec, FollowState
from shared.models import JsonDict, iso
from shared.redact import redact
from shared.requests.admission import RUN
from shared.window.machine import CollectionSpec

bp = df.Blueprint()

STOP_EVENT = "stop"


def pass_input(spec: FollowSpec, due: Pass, now: datetime, run: str = "") -> JsonDict:
    """The collect orchestrator's input for one pass: the day's collection over the due windows, scoped to the day,
    its budget keyed by the tenant's GUID like a collection's; ``run``: the pass's run id (its budget token's)."""
    source = due.source or spec.source  # the feed, or the search source, by window (``shared.follow.plan``)
    collection = CollectionSpec(
        collection_id=due.collection_id,
        tenant_id=spec.tenant_id,
        source=source,
        filters=spec.filters,
        options=spec.options_of(source),
        explicit=due.windows,
        tenant_guid=spec.tenant_guid,
    )
    request = {
        "follow": spec.follow_id,
        "tenantId": spec.tenant_id,
        "source": source,
        "filters": spec.filters,
        "maxConcurrency": spec.options.max_concurrency,
        "pass": due.headline(),
    }
    payload = {
        "spec": collection.to_json(),
        "state": None,
        "request": request,
        "startedAt": iso(now),
        "scope": due.scope,
    }
    return {**payload, RUN: run} if run else payload


def follow(context: df.DurableOrchestrationContext) -> Generator[Any, Any, JsonDict | None]:
    """One cycle: wait for the wake (or ``stop``), run the due passes, continue as new.

    ``stop`` has one waiter per execution, created right after the input is admitted, so a stop is honoured whenever
    it is sent (docs/follow.md, "Stop"): while the follower waits, the waiter wins at once; while a pass runs (or an
    input is sealed), the waiter takes it (the extension and the SDK deliver an event to a waiter created before it
    arrived, even one whose ``task_any`` has completed; one that comes during admission is buffered until the waiter
    exists) and the follower ends when that pass has been applied; one processed after the execution reached
    ``continue_as_new`` is carried into the next execution by DTFx, where the new waiter takes it first. Without a
    waiter an execution's events are dropped at ``continue_as_new`` (the shim never preserves them)."""
    payload = context.get_input()
    if not isinstance(payload, dict):
        raise TypeError(f"follow_orchestrator expects an object input, got {type(payload).__name__}")
    admitted = yield from admission.admit(context, payload, "")
    if not admitted.ok:  # checked before anything of the input is read
        context.set_custom_status({"status": "failed", "followId": context.instance_id, "reason": admitted.reason})
        return admitted.refused_output(followId=context.instance_id)
    spec = FollowSpec.from_json(payload["spec"])
    state = FollowState.from_json(payload["state"])
    now = context.current_utc_datetime
    wake = state.next_wake if state.next_wake is not None and state.next_wake > now else now
    stop = context.wait_for_external_event(STOP_EVENT)
    timer = context.create_timer(wake)
    context.set_custom_status(status(spec, state, now))
    winner = yield context.task_any([timer, stop])
    if winner is stop:
        timer.cancel()
        return _stopped(context, spec, state)
    passes = plan(spec, state, context.current_utc_datetime)
    for planned in passes:
        due = rescoped(spec, state, planned)  # what the day's passes before it in this cycle read
        context.set_custom_status(status(spec, state, context.current_utc_datetime, running=due))
        work = pass_input(spec, due, context.current_utc_datetime, admission.new_run(context))
        work = yield from admission.sealed(context, due.instance_id, work)
        collection = context.call_sub_orchestrator(names.ORCHESTRATOR_COLLECT, work, due.instance_id)
        # ``stop`` is scheduled already: the SDK reports this WhenAny with the pass alone, so the shim waits for the
        # pass while the code wakes for a stop, says "stopping" and waits for the pass again (no new action).
        first = yield context.task_any([collection, stop])
        if first is stop:
            context.set_custom_status(status(spec, state, context.current_utc_datetime, running=due, stopping=True))
        failed: str | None = None
        try:
            output = yield collection
        except Exception as exc:  # the collection itself failed (a bug, not an audit API answer): try again later
            output, failed = None, redact(str(exc))[:300]
        going = apply(spec, state, due, output if isinstance(output, dict) else None, context.current_utc_datetime)
        if failed is not None and state.last_error is not None:
            state.last_error["message"] = failed
        if stop.is_completed:
            return _stopped(context, spec, state)  # after the pass it ran: its windows are applied
        if not going:
            break  # the service refuses: no other pass now, the next wake tries again
    state.cycles += 1
    now = context.current_utc_datetime
    state.next_wake = next_wake(spec, state, now)
    context.set_custom_status(status(spec, state, now))
    # The wait for the next wake happens in the next execution: its input then holds the state the passes left, which
    # is where a follower terminated while waiting resumes, and its history stays a few events long while it waits.
    following = yield from admission.sealed(
        context, context.instance_id, {**payload, "spec": spec.to_json(), "state": state.to_json()}
    )
    if stop.is_completed:  # it came while the next cycle's input was sealed
        return _stopped(context, spec, state)
    context.continue_as_new(following)
    return None


def _stopped(context: df.DurableOrchestrationContext, spec: FollowSpec, state: FollowState) -> JsonDict:
    """The follower's output once stopped: its status and its state (where a start of the same key resumes)."""
    state.stopped = True
    final = status(spec, state, context.current_utc_datetime)
    context.set_custom_status(final)
    return {**final, "spec": spec.to_json(), "state": state.to_json()}


@bp.orchestration_trigger(context_name="context", orchestration=names.ORCHESTRATOR_FOLLOW)  # type: ignore[untyped-decorator]
def follow_orchestrator(context: df.DurableOrchestrationContext) -> Generator[Any, Any, JsonDict | None]:
    result = yield from follow(context)
    return result
