"""The collection orchestrator: a deterministic generator over ``shared.window.CollectionWindow``.

It only translates the window's decisions into SDK calls and feeds completions back; all bookkeeping lives in the
pure state machine, rebuilt on every replay from the input and the completions recorded in history.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from datetime import timedelta
from typing import Any

import azure.durable_functions as df

from shared import names
from shared.models import ActivityError, ActivityResult, JsonDict, iso
from shared.redact import redact
from shared.window import CollectionSpec, CollectionWindow
from shared.window_state import CallActivity, Carried, Step

logger = logging.getLogger(__name__)

bp = df.Blueprint()


def _ranges(spec: CollectionSpec) -> list[JsonDict]:
    if spec.plan is not None:
        return [{"start": iso(spec.plan.start), "end": iso(spec.plan.end)}]
    return [{"start": iso(c.start), "end": iso(c.end)} for c in spec.explicit]


def collect(context: df.DurableOrchestrationContext) -> Generator[Any, Any, JsonDict | None]:
    """Keep at most K chunk lanes busy; continue-as-new at drained points; finalize the manifest at the end."""
    payload = _input_of(context)
    spec = CollectionSpec.from_json(payload["spec"])
    window = CollectionWindow(spec, Carried.from_json(payload.get("state")))
    # task -> (lane id, is_timer); rebuilt identically on every replay because the steps are deterministic.
    waiting: list[tuple[Any, int, bool]] = []
    steps: list[Step] = window.fill()

    while True:
        for step in steps:
            if isinstance(step, CallActivity):
                waiting.append((context.call_activity(step.name, step.input), step.lane, False))
            else:
                fire_at = context.current_utc_datetime + timedelta(seconds=step.seconds)
                waiting.append((context.create_timer(fire_at), step.lane, True))
        if not window.lanes:
            break
        tasks = [task for task, _, _ in waiting]
        nudge = None
        if steps:
            # Why the already-due timer: Python 1.x reports a task_any with only its *new* children, and the
            # extension's shim awaits each top-level action in order (docs/durable-protocol.md, "The sliding
            # window and the already-due timer"; OutOfProcOrchestrationShim.cs upstream). Without it, the
            # shim blocks on the newest WhenAny and never schedules later lanes, collapsing K to 1 on Azure.
            # This timer is due now, so every WhenAny that adds tasks completes promptly and the shim moves on.
            nudge = context.create_timer(context.current_utc_datetime)
            tasks.append(nudge)
        context.set_custom_status(window.status())
        winner = yield context.task_any(tasks)
        if winner is nudge:
            steps = []  # the nudge winning means nothing finished: a no-op, just wait again
            continue
        index = next(i for i, (task, _, _) in enumerate(waiting) if task is winner)
        _, lane_id, is_timer = waiting.pop(index)
        if is_timer:
            steps = window.on_timer(lane_id)
        else:
            steps = window.on_result(lane_id, _result_of(winner))
        if not context.is_replaying and window.lanes.get(lane_id) is None:
            logger.info("collection %s: lane %d done, %s", spec.collection_id, lane_id, window.status()["percent"])
        steps += window.fill()

    if window.should_continue_as_new:
        carried = window.carry()
        context.set_custom_status({**window.status(), "execution": carried.execution})
        context.continue_as_new({**payload, "state": carried.to_json()})
        return None

    provisional = window.output(None)
    context.set_custom_status({**window.status(), "finalizing": True})
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
            "queries": provisional["queries"],
            "deleteQueries": spec.options.delete_queries,
            "highCompleteness": spec.options.high_completeness,
            "startedAt": payload.get("startedAt"),
            "finishedAt": iso(context.current_utc_datetime),
        },
    )
    try:
        final = yield finalize
    except Exception as exc:
        result = ActivityResult(False, error=ActivityError("activity_crashed", redact(str(exc))[:500]))
    else:
        result = ActivityResult.from_json(final)
    output = window.output(str(result.data.get("location")) if result.ok else None)
    if not result.ok and result.error is not None:
        output["manifestError"] = result.error.to_json()
        if output["status"] == "Completed":
            output["status"] = "CompletedWithFailures"
    output["request"] = payload.get("request")
    return output


def _input_of(context: df.DurableOrchestrationContext) -> JsonDict:
    """The orchestration input as a dict (the HTTP starter and continue-as-new always pass one)."""
    value = context.get_input()
    if not isinstance(value, dict):
        raise TypeError(f"collect_orchestrator expects an object input, got {type(value).__name__}")
    return value


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
