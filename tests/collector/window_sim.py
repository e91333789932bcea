"""A tiny simulator for the sliding-window state machine: it answers the window's steps as the orchestrator and
the activities would (shared by the window tests)."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from shared import names
from shared.models import ActivityResult, Chunk, ChunkSummary
from shared.timeline.planning import ChunkPlan
from shared.window.machine import CollectionSpec, CollectionWindow
from shared.window.state import CallActivity, RunOptions, Step, Wait

T0 = datetime(2024, 11, 17, tzinfo=UTC)
Responder = Callable[[CallActivity, CollectionWindow], ActivityResult]


def spec(n: int = 12, k: int = 3, source: str = "graph", m: int = 1000, **options: object) -> CollectionSpec:
    return CollectionSpec(
        collection_id="c1",
        tenant_id="contoso.onmicrosoft.com",
        source=source,
        filters={},
        options=RunOptions(max_concurrency=k, chunks_per_execution=m, **options),  # type: ignore[arg-type]
        plan=ChunkPlan(T0, T0 + timedelta(hours=n), timedelta(hours=1)),
    )


def summary_for(step: CallActivity, records: int = 5, *, incomplete: bool = False) -> ActivityResult:
    """The chunk's last activity committed its object (an Exchange lane's last call)."""
    chunk = Chunk.from_json(step.input["chunk"])
    summary = ChunkSummary(chunk, records, 0, 0, 0, "b", "h", 1, incomplete).to_json()
    return ActivityResult.success({"summary": summary})


def collected(step: CallActivity, records: int = 5, **checked: object) -> ActivityResult:
    """The Graph collect activity found the query finished and exported it."""
    return ActivityResult.success({"outcome": "export", **summary_for(step, records).data, **checked})


PENDING = ActivityResult.success({"outcome": "pending", "rawStatus": "running"})


def happy(step: CallActivity, _: CollectionWindow) -> ActivityResult:
    if step.name == names.ACTIVITY_GRAPH_SUBMIT:
        return ActivityResult.success({"queryId": f"q-{step.lane}"})
    if step.name == names.ACTIVITY_GRAPH_COLLECT:
        return collected(step)
    if step.name == names.ACTIVITY_GRAPH_DELETE:
        return ActivityResult.success({"deleted": True, "disposition": "deleted"})
    return summary_for(step)


def run(window: CollectionWindow, respond: Responder, rng: random.Random, log: list[int] | None = None) -> list[Step]:
    """Play the orchestrator: answer steps in random order until the window finishes or is ready to switch.

    Timers fire at their due time (the clock moves on); while the window switches executions, outstanding timers are
    cancelled and their lanes parked, as the orchestrator does. Returns every step issued.
    """
    pending: list[Step] = window.resume() + window.fill()
    issued = list(pending)
    while True:
        if window.switching:
            for timer in [s for s in pending if isinstance(s, Wait)]:
                pending.remove(timer)
                window.park(timer.lane)
        if not pending:
            break
        assert len(window.lanes) <= window.options.max_concurrency
        step = pending.pop(rng.randrange(len(pending)))
        if log is not None:
            log.append(len(window.lanes))
        window.now += timedelta(seconds=1)
        if isinstance(step, Wait):
            window.now = max(window.now, step.until)
            new = window.on_timer(step.lane)
        else:
            new = window.on_result(step.lane, respond(step, window))
        new += window.fill()
        if window.may_start() and window.source.may_start(
            window.lanes
        ):  # work left and budget left: the window must be full
            assert len(window.lanes) == window.options.max_concurrency  # (unless its first Exchange lane probes)
        issued += new
        pending += new
        # one outstanding step per lane that is not parked, always
        assert sorted(s.lane for s in pending) == sorted(lane.id for lane in window.lanes.values() if not lane.parked)
    return issued
