"""The collection orchestrator: a deterministic generator over ``shared.window.machine.CollectionWindow``.

It only translates the window's decisions into SDK calls and feeds completions back; all bookkeeping lives in the
pure state machine, rebuilt on every replay from the input and the completions recorded in history. Every execution
first has its input admitted (``orchestrators.admission``: the input's seal checked, the run's budget token derived);
a refused input ends ``Failed`` with the reason and runs no chunk. The next execution's input is sealed before
``continue_as_new``.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from datetime import timedelta
from typing import Any

import azure.durable_functions as df

from orchestrators import admission, settle
from orchestrators.budget_entity import entity_id
from shared import names
from shared.budget.wire import MAX_CREDITS, BudgetRequest
from shared.log_fields import log_event
from shared.models import ActivityError, ActivityResult, JsonDict, iso
from shared.redact import redact
from shared.sources.registry import status_sections, window_for
from shared.window.machine import CollectionSpec, CollectionWindow
from shared.window.state import RENEW, CallActivity, CallEntity, Cancel, Carried, Failure, SignalEntity, Step

logger = logging.getLogger(__name__)

bp = df.Blueprint()


def _ranges(spec: CollectionSpec) -> list[JsonDict]:
    return [c.span_json() for c in spec.ranges]


ACTIVITY, TIMER, ENTITY = "activity", "timer", "entity"
"""What a waiting task is: a lane's activity, a lane's (or the renewal's) timer, an entity call."""

NUDGE_HORIZON = timedelta(hours=1)
"""How far ahead the nudge timer is set. It is cancelled before it is reported, but DTFx still queues its
``TimerFired`` message, hidden until then: a queued message keeps the task hub from looking idle to the scale
controller and is counted in its scale-out decisions, so a short horizon lets the hub go idle an hour after the
last collection rather than two days. An execution that outlives the horizon sees its nudges fire: each is a
no-op winner costing one episode (``tests/collector/test_orchestrator_replay.py``), a few per hour beside
queries that take that long."""


def collect(context: df.DurableOrchestrationContext) -> Generator[Any, Any, JsonDict | None]:
    """Keep at most K chunk lanes busy; switch executions without draining; finalize the manifest at the end."""
    payload = _input_of(context)
    admitted = yield from admission.admit(context, payload, admission.collection_of(payload))
    if not admitted.ok:  # checked before anything of the input is read
        context.set_custom_status({"status": "Failed", "reason": admitted.reason})
        if not context.is_replaying:
            logger.warning("collection %s: input refused: %s", context.instance_id, admitted.reason.get("message"))
        return admitted.refused_output(collectionId=context.instance_id)
    spec = CollectionSpec.from_json(payload["spec"])
    window = window_for(
        spec,
        Carried.from_json(payload.get("state")),
        now=context.current_utc_datetime,
        budget_token=admitted.budget_token,
    )
    budget = entity_id(spec.budget_tenant, spec.source) if spec.options.budget.enabled else None
    # task -> (lane id, kind); rebuilt identically on every replay because the steps are deterministic.
    waiting: list[tuple[Any, int, str]] = []
    steps: list[Step] = window.resume() + window.fill()

    while True:
        added = False
        for step in steps:
            if isinstance(step, CallActivity):
                waiting.append((context.call_activity(step.name, step.input), step.lane, ACTIVITY))
                added = True
            elif isinstance(step, CallEntity):
                waiting.append((context.call_entity(budget, step.operation, step.input), step.lane, ENTITY))
                added = True
            elif isinstance(step, SignalEntity):
                context.signal_entity(budget, step.operation, step.input)  # one-way: no open task
            elif isinstance(step, Cancel):
                waiting = _cancel_timer(waiting, step.lane)
            elif window.switching and step.lane != RENEW:
                window.park(step.lane)  # a timer for the next execution: never created in this one
            else:
                waiting.append((context.create_timer(step.until), step.lane, TIMER))
                added = True
        if window.switching:
            # Park every lane that is only waiting: cancel its timer (a cancelled timer is no longer an open task, so
            # it does not hold the execution open: DTFx TaskOrchestrationContext.CreateTimer) and carry its due time.
            # The budget's renewal timer runs on until the execution ends: a switch may wait for a long export.
            for task, lane_id, kind in waiting:
                if kind == TIMER and lane_id != RENEW:
                    if not task.is_completed:
                        task.cancel()
                    window.park(lane_id, fired=task.is_completed)
            waiting = [entry for entry in waiting if entry[2] != TIMER or entry[1] == RENEW]
        if window.should_continue_as_new or not window.busy:
            for task, _, kind in waiting:  # only the renewal timer can be left: its due time is carried
                if kind == TIMER and not task.is_completed:
                    task.cancel()
            break
        tasks = [task for task, _, _ in waiting]
        if not tasks:  # every lane has its step in flight or is parked for a switch: this cannot be empty
            raise RuntimeError(f"collection {spec.collection_id}: lanes {sorted(window.lanes)} wait for nothing")
        nudge = None
        if added:
            # Why the nudge: Python 1.x reports a task_any with only its *new* children, and the extension's shim
            # awaits each top-level action in order (docs/durable-protocol.md, "The sliding window and the nudge";
            # OutOfProcOrchestrationShim.cs upstream). Without it the shim blocks on the newest WhenAny and never
            # schedules later lanes, collapsing K to 1 on Azure. The nudge is a timer cancelled before it is
            # reported: the shim creates it already cancelled, so its WhenAny completes at once, in the same
            # episode, and the shim moves on; it is no open task and never fires, so it costs one history event
            # and no episode.
            nudge = context.create_timer(context.current_utc_datetime + NUDGE_HORIZON)
            nudge.cancel()
            tasks.append(nudge)
        context.set_custom_status(window.status())
        winner = yield context.task_any(tasks)
        window.now = context.current_utc_datetime
        if winner is nudge:
            steps = []  # only if an execution outlived the horizon: nothing finished, wait again
            continue
        index = next(i for i, (task, _, _) in enumerate(waiting) if task is winner)
        _, lane_id, kind = waiting.pop(index)
        if kind == TIMER:
            steps = window.on_timer(lane_id)
        elif kind == ENTITY:
            steps = window.on_budget(lane_id, _answer_of(winner))
        else:
            steps = window.on_result(lane_id, _result_of(winner))
        if not context.is_replaying and lane_id != RENEW and window.lanes.get(lane_id) is None:
            logger.info("collection %s: lane %d done, %s", spec.collection_id, lane_id, window.status()["percent"])
        _log_ended(window, spec, replaying=context.is_replaying)
        steps += window.fill()

    if window.should_continue_as_new:
        carried = window.carry()
        if not context.is_replaying:
            logger.info(
                "collection %s: execution %d continues as new with %d lane(s) carried",
                spec.collection_id,
                carried.execution - 1,
                len(carried.lanes),
            )
        context.set_custom_status({**window.status(), "execution": carried.execution})
        following = yield from admission.sealed(context, context.instance_id, {**payload, "state": carried.to_json()})
        if budget is not None:
            # The entity's answers are EventRaised messages. The shim runs ahead of history through every WhenAny a
            # cancelled nudge completes, so it can reach ContinueAsNew before DTFx has processed answers this code
            # already used, and DTFx carries EventRaised events processed after ContinueAsNew into the next
            # execution (BehaviorOnContinueAsNew.Carryover, TaskOrchestrationExecutor.cs): stale answers would pile
            # up from one execution to the next. A timer due now is awaited by the shim in order, and fires after
            # every event already in history, so none is left to carry (docs/durable-protocol.md).
            yield context.create_timer(context.current_utc_datetime)
        context.continue_as_new(following)
        return None

    provisional = window.output(None)
    context.set_custom_status({**window.status(), "finalizing": True})
    if budget is not None:  # a safety net: every lane released its slot as it ended
        # The run has ended: its token acquires nothing any more (a token read from its history holds no slot).
        # Credits taken a few at once and not spent go back to the tenant's daily quota (once: the run closes).
        release = BudgetRequest(
            "release_collection",
            collection=spec.collection_id,
            token=window.budget_token,
            close=True,
            refund=min(MAX_CREDITS, window.state.credits),
        )
        context.signal_entity(budget, "release_collection", release.to_json())
    finalize = context.call_activity(
        names.ACTIVITY_FINALIZE,
        {
            "collectionId": spec.collection_id,
            "tenantId": spec.tenant_id,
            "parentCollectionId": spec.parent_collection_id,
            "source": spec.source,
            "filters": spec.filters,
            "ranges": _ranges(spec),
            "status": provisional["status"],
            "reason": provisional["reason"],
            "failures": provisional["failures"],
            **status_sections(provisional),  # each source's section: what its queries or calls did
            "deleteQueries": spec.options.delete_queries,
            "highCompleteness": spec.options.high_completeness,
            "retentionDays": spec.options.retention_days,
            "startedAt": payload.get("startedAt"),
            "finishedAt": iso(context.current_utc_datetime),
            # A retry link's request carries its chain (root, generation, the root's ranges, expired windows):
            # finalize reads every link's summaries from storage to prove the root's whole range.
            "request": payload.get("request"),
            "scope": payload.get("scope"),  # a settle or follower pass proves a larger range (orchestrators/settle)
        },
    )
    try:
        final = yield finalize
    except Exception as exc:
        result = ActivityResult(False, error=ActivityError("activity_crashed", redact(str(exc))[:500]))
    else:
        result = ActivityResult.from_json(final)
    output = window.output(str(result.data.get("location")) if result.ok else None)
    if result.ok and result.data.get("chain") is not None:
        output["chain"] = result.data["chain"]  # the chain's headline (totals, counts); the manifest has the rest
    if not result.ok and result.error is not None:
        output["manifestError"] = result.error.to_json()
        if output["status"] == "Completed":
            output["status"] = "CompletedWithFailures"
    output["request"] = payload.get("request")
    return (yield from settle.finish(context, payload, output, result, window))  # a settle pass may follow


def _log_ended(window: CollectionWindow, spec: CollectionSpec, *, replaying: bool) -> None:
    """One ``chunk.ended`` event per chunk that ended in this transition; none while replaying (logged before)."""
    ended, window.ended = window.ended, []
    if replaying:
        return
    for lane in ended:
        assert lane.ending is not None
        kind, value = lane.ending
        if kind == "unstarted":  # it gave its budget turn back: requeued, not ended
            continue
        fields: dict[str, Any] = {"outcome": kind, "attempts": lane.attempts}
        if lane.started_at is not None:
            fields["seconds"] = round((window.now - lane.started_at).total_seconds(), 3)
        if kind == "done" and isinstance(value, dict):
            fields.update(records=int(value["records"]), incomplete=bool(value.get("incomplete", False)))
        elif kind == "failed" and isinstance(value, Failure):
            fields.update(errorKind=value.kind, error=value.message[:300])
        chunk = lane.chunk_json()
        log_event(
            logger,
            logging.WARNING if kind == "failed" else logging.INFO,
            "chunk.ended",
            f"collection {spec.collection_id}: chunk {lane.label()} {kind}",
            collectionId=spec.collection_id,
            tenantId=spec.tenant_id,
            source=spec.source,
            chunkStart=chunk["start"],
            chunkEnd=chunk["end"],
            **fields,
        )


def _input_of(context: df.DurableOrchestrationContext) -> JsonDict:
    """The orchestration input as a dict (the HTTP starter and continue-as-new always pass one)."""
    value = context.get_input()
    if not isinstance(value, dict):
        raise TypeError(f"collect_orchestrator expects an object input, got {type(value).__name__}")
    return value


def _cancel_timer(waiting: list[tuple[Any, int, str]], lane_id: int) -> list[tuple[Any, int, str]]:
    """Cancel the lane's timer (if it fired meanwhile, its firing is simply not looked at) and stop waiting for it."""
    for task, lane, kind in waiting:
        if kind == TIMER and lane == lane_id and not task.is_completed:
            task.cancel()
    return [entry for entry in waiting if entry[2] != TIMER or entry[1] != lane_id]


def _answer_of(task: Any) -> JsonDict | None:
    """The budget entity's answer, or ``None`` when its operation failed (the lane retries, as after a crash)."""
    result = task.result
    return result if isinstance(result, dict) else None


def _result_of(task: Any) -> ActivityResult:
    """An activity that raised (a bug or a lost worker, not an expected error) is an ``activity_crashed`` failure."""
    if isinstance(task.result, Exception):
        # A library's message may quote a request URL with its SAS query: scrub it before it reaches the output.
        return ActivityResult(False, error=ActivityError("activity_crashed", redact(str(task.result))[:500]))
    return ActivityResult.from_json(task.result)


@bp.orchestration_trigger(context_name="context", orchestration=names.ORCHESTRATOR_COLLECT)  # type: ignore[untyped-decorator]
def collect_orchestrator(context: df.DurableOrchestrationContext) -> Generator[Any, Any, JsonDict | None]:
    result = yield from collect(context)
    return result
