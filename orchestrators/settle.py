"""Settling a collection: once the late-arrival band of its provisional windows has passed, read them again.

A collection asked to settle (``"settle": true``) ends its first pass as any collection does (its manifest written,
provisional windows flagged), then waits on a durable timer until the last provisional window ended
``AUDIT_LATENCY`` ago, and continues as new with a second pass over exactly those windows, as written (a split
window's halves, not the planned window). That pass is the same sliding window over explicit windows, with the same
id and output prefix: each window read again replaces its object only where the content changed and counts the
records that arrived late (``activities.reread``), and its manifest, scoped to the collection's whole range, keeps the
first pass's failures and turns final (``activities.manifest_scope``). Nothing polls: the client sees "settling until
<time>" in the summary and on the live page, and the collection ends by itself.

Deterministic like the collection orchestrator: the timer's time comes from the finalize activity's answer and
``current_utc_datetime``. The second pass is the first one's spec with other windows (``dataclasses.replace``: the
tenant's GUID, which keys its budget, and every option stay as the starter set them), a new run id (the first run's
token was closed when it finalized) and a seal made by the seal activity (``orchestrators.admission``).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace
from typing import Any

import azure.durable_functions as df

from orchestrators import admission
from shared.models import ActivityResult, Chunk, JsonDict, iso
from shared.requests.admission import RUN
from shared.timeline.latency import AUDIT_LATENCY, started_at_of
from shared.window.machine import CollectionSpec, CollectionWindow

SETTLING = "settling"


def asked(payload: JsonDict) -> bool:
    """The request asked to settle, and this is its first pass."""
    request = payload.get("request")
    return isinstance(request, dict) and request.get("settle") is True and not payload.get("scope")


def finish(
    context: df.DurableOrchestrationContext,
    payload: JsonDict,
    output: JsonDict,
    result: ActivityResult,
    window: CollectionWindow,
) -> Generator[Any, Any, JsonDict | None]:
    """The collection's output once its pass has finalized, or None when it continues as new into its settle pass.

    While it waits, its custom status is the finished pass's (with the bounded grid) plus ``settling``."""
    windows = result.data.get("provisionalWindows") if result.ok else None
    if payload.get("scope"):
        return _after_scoped_pass(payload, output, result, windows)
    if not asked(payload) or not windows or output.get("status") == "Failed":
        return output
    chunks = [Chunk.from_json(w) for w in windows]
    until = max(c.end for c in chunks) + AUDIT_LATENCY
    status = {**window.status(), "status": output.get("status"), "manifest": output.get("manifest")}
    context.set_custom_status({**status, SETTLING: {"until": iso(until), "windows": len(chunks)}})
    if until > context.current_utc_datetime:
        yield context.create_timer(until)
    second = settle_pass_input(payload, output, chunks, context)
    context.continue_as_new((yield from admission.sealed(context, context.instance_id, second)))
    return None


def settle_pass_input(
    payload: JsonDict, output: JsonDict, chunks: list[Chunk], context: df.DurableOrchestrationContext
) -> JsonDict:
    """The second pass: the same collection over its provisional windows, scoped to its whole range, as a new run."""
    spec = CollectionSpec.from_json(payload["spec"])
    again = replace(spec, plan=None, explicit=tuple(sorted(chunks, key=lambda c: c.start)))
    scope = {
        "ranges": [c.span_json() for c in spec.ranges],
        "failures": list(output.get("failures") or []),
        "provisional": [c.span_json() for c in chunks],
    }
    return {
        **payload,
        "spec": again.to_json(),
        "state": None,
        "startedAt": iso(context.current_utc_datetime),
        "scope": scope,
        "settle": {"firstStartedAt": payload.get("startedAt"), "first": _headline(output)},
        RUN: admission.new_run(context),
    }


def _after_scoped_pass(payload: JsonDict, output: JsonDict, result: ActivityResult, windows: Any) -> JsonDict:
    """A scoped pass's output: its windows still provisional, and (a settle pass) the collection's whole result."""
    output["provisionalWindows"] = windows
    settle = payload.get("settle")
    if not isinstance(settle, dict):
        return output  # a follower's pass: the follower keeps its own totals
    scope = payload.get("scope") or {}
    earlier = list(scope.get("failures") or [])
    output["failures"] = earlier + list(output.get("failures") or [])
    if earlier and output.get("status") == "Completed":
        output["status"] = "CompletedWithFailures"
    totals = result.data.get("totals") if result.ok else None
    if isinstance(totals, dict):
        output["records"] = totals.get("records", output.get("records"))
    started = started_at_of(payload)
    output["settled"] = {
        "firstStartedAt": settle.get("firstStartedAt"),
        "startedAt": iso(started) if started is not None else None,
        "windows": len(scope.get("provisional") or []),
        "late": totals.get("late") if isinstance(totals, dict) else None,
    }
    return output


def _headline(output: JsonDict) -> JsonDict:
    return {key: output.get(key) for key in ("status", "records", "completed", "failed", "splits", "manifest")}
