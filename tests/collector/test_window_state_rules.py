"""What continue-as-new carries, held field by field: the window's state (``Carried``), each lane (``Lane``) and each
call's input (``ChunkCall``) read back as they were written, and a collection whose windows end in different
executions reports every one of them at its end. Written for survivors of ``scripts/mutations/window.toml``
(docs/testing.md, "Mutation").
"""

from __future__ import annotations

import dataclasses
import random
from datetime import timedelta

import pytest

from shared.budget.slot import Slot
from shared.models import ActivityError, ActivityResult, Chunk, ChunkSummary
from shared.sources.registry import window_for
from shared.window.calls import ChunkCall
from shared.window.machine import CollectionWindow
from shared.window.state import Carried, Failure, Lane
from tests.collector.window_sim import T0, run, spec, summary_for

HOUR = timedelta(hours=1)


def chunk(i: int) -> Chunk:
    return Chunk(T0 + i * HOUR, T0 + (i + 1) * HOUR)


def _every_field_set(value: object) -> list[str]:
    """The dataclass fields of ``value`` still at their default (a sample must set each one to tell a lost one)."""
    unset = []
    for f in dataclasses.fields(value):  # type: ignore[arg-type]
        if f.name.startswith("_") or f.name == "issued_at":  # not carried: no activity is in flight across executions
            continue
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if getattr(value, f.name) == default:
            unset.append(f.name)
    return unset


def sample_lane() -> Lane:
    failure = Failure(chunk(3), "bad_request", "refused", 2)
    return Lane(
        7,
        chunk(3),
        "poll",
        step_failures=1,
        attempts=2,
        query_id="q-7",
        polls=4,
        allow_incomplete=True,
        submitted_at=T0 + timedelta(seconds=5),
        due=T0 + timedelta(seconds=65),
        parked="timer",
        cursor={"typeIndex": 1, "sessionId": "s"},
        calls=6,
        call_seconds=12.5,
        ending=("failed", failure),
        holds_slot=True,
        budget_waits=2,
        slot=Slot(7, T0 + timedelta(seconds=90), 11, True, T0),
        started_at=T0,
        resubmits=1,
        throttled=3,
        submission=5,
        credited=True,
        quota_until=T0 + timedelta(hours=20),
        extra={"newerField": {"kept": True}},
    )


def test_a_lane_reads_back_every_field_it_wrote() -> None:
    lane = sample_lane()
    assert _every_field_set(lane) == [], (
        "set every carried lane field in sample_lane() to a value that is not its default"
    )
    again = Lane.from_json(lane.to_json())
    assert again == lane
    assert isinstance(again.ending, tuple) and isinstance(again.ending[1], Failure)  # a failed ending stays a Failure
    assert again.step_failures == 1 and again.throttled == 3 and again.credited is True


def test_the_window_state_reads_back_every_field_it_wrote() -> None:
    carried = Carried(
        cursor=9,
        requeued=[chunk(1), chunk(2)],
        completed=5,
        failed=1,
        records=321,
        splits=2,
        incomplete=1,
        failures=[Failure(chunk(4), "bad_request", "refused", 3)],
        incomplete_windows=[chunk(5)],
        doomed=ActivityError("auth_failed", "no", dooms_collection=True),
        execution=3,
        next_lane=12,
        lanes=[sample_lane()],
        renew_due=T0 + timedelta(seconds=10),
        budget_waits=4,
        budget_lost=2,
        incomplete_notes=[{"window": chunk(5).span_json(), "reasons": ["session cap reached"]}],
        budget_seen_at=T0 + timedelta(seconds=3),
        budget_waiting=1,
        spares=[Slot(3, T0 + timedelta(seconds=30), 9, False, T0)],
        submissions=6,
        quota_waits=2,
        credits=3,
        budget_quota={"allowed": 100, "used": 6, "left": 94},
        sections={**Carried().sections, "newerSection": {"kept": 1}},
    )
    assert _every_field_set(carried) == [], "set every Carried field in this sample to a value that is not its default"
    again = Carried.from_json(carried.to_json())
    assert again == carried
    # the counters a status and an output are built from, named: a lost one shows as a wrong report
    assert (again.incomplete, again.budget_lost, again.submissions, again.credits) == (1, 2, 6, 3)
    assert again.incomplete_notes == carried.incomplete_notes


def test_a_chunk_call_reads_back_every_field_it_wrote() -> None:
    call = ChunkCall(
        collection_id="c1",
        tenant_id="t",
        chunk_json=chunk(0).to_json(),
        filters_json={"operations": ["FileAccessed"]},
        query_id="q-1",
        allow_incomplete=True,
        max_records=5000,
        attempt=3,
        high_completeness=True,
        slot_deadline="2024-11-17T00:01:00Z",
        slot_pages=False,
    )
    assert _every_field_set(call) == []
    assert ChunkCall.from_json(call.to_json()) == call


@pytest.mark.parametrize("version", [0, 1])
def test_windows_decided_in_different_executions_are_all_reported_at_the_end(version: int) -> None:
    """One chunk per execution: an incomplete window, a failed one and complete ones end in different executions;
    the last execution's output still counts and explains each."""

    def respond(step, _: CollectionWindow) -> ActivityResult:  # type: ignore[no-untyped-def]
        start = Chunk.from_json(step.input["chunk"]).start
        if start == chunk(1).start:
            return ActivityResult(False, error=ActivityError("bad_request", "refused"))
        if start == chunk(2).start:
            evidence = ({"recordType": "B", "complete": False, "detail": "session cap reached"},)
            summary = ChunkSummary(chunk(2), 4, 0, 0, 0, "b", "h", 1, True, evidence=evidence)
            return ActivityResult.success({"summary": summary.to_json()})
        return summary_for(step)

    spec_ = spec(4, 1, "exchange", m=1, max_attempts=1, window_version=version)
    carried: Carried | None = None
    for execution in range(1, 20):
        window = window_for(spec_, carried, now=T0 + execution * HOUR)
        run(window, respond, random.Random(execution))
        if not window.should_continue_as_new:
            break
        carried = Carried.from_json(window.carry().to_json())  # through JSON, as continue_as_new does
    assert window.finished and window.state.execution >= 4
    output = window.output(None)
    assert output["status"] == "CompletedWithFailures"
    assert (output["completed"], output["failed"], output["incomplete"], output["records"]) == (3, 1, 1, 5 + 4 + 5)
    assert [f["chunk"] for f in output["failures"]] == [chunk(1).to_json()]
    assert output["incompleteWindows"] == [{"window": chunk(2).span_json(), "reasons": ["session cap reached"]}]
    assert output["percent"] == 100.0
