"""The window's rules that hand mutations of ``shared.window`` showed no test held (``scripts/mutations/window.toml``;
docs/testing.md, "Mutation"): a window over its cap that cannot be split, throttling and attempts, what a success
clears, why a window is incomplete, the status percent, a chunk given back unstarted, a lane with a query that is
queued again, a slot granted back under another grant.

Each test drives the window as the orchestrator would (steps in, results and entity answers out) and asserts outcomes:
what ends how, what is counted, what the next call carries; not the exact sequence of steps.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared import names
from shared.audit.error_body import THROTTLED
from shared.models import ActivityError, ActivityResult, Chunk, ChunkSummary
from shared.sources.registry import window_for
from shared.window.machine import THROTTLED_RETRIES
from shared.window.state import CallActivity, CallEntity, Carried, Wait
from tests.collector import test_window_budget as budget_sim
from tests.collector.test_window_slots import MARGIN, at, granted, queued
from tests.collector.window_sim import T0, spec, summary_for

LEASE = budget_sim.LEASE
VERSIONS = pytest.mark.parametrize("version", [0, 1, 2])
"""Window version 0 (collections started before issue 28), 1 (slots kept across chunks, credits a few at once,
executions bounded by completions too) and 2 (renewals ride on the lanes' episodes): each rule holds in all."""


def failed(kind: str, message: str = "boom") -> ActivityResult:
    return ActivityResult(False, error=ActivityError(kind, message))


def calls(steps: list[object]) -> list[CallActivity]:
    return [s for s in steps if isinstance(s, CallActivity)]


@VERSIONS
def test_a_window_that_cannot_be_split_and_still_reports_over_its_cap_fails_instead_of_splitting_again(
    version: int,
) -> None:
    # 60 min -> 30 min, no further
    window = window_for(spec(1, 1, "exchange", min_split_seconds=1200, window_version=version), now=T0)
    (first,) = calls(window.fill())
    assert first.input["allowIncomplete"] is False
    assert window.on_result(0, ActivityResult.split({"limit": 50})) == []
    (half,) = calls(window.fill())
    assert half.input["allowIncomplete"] is True  # 30 min cannot be halved again: told so
    window.on_result(half.lane, ActivityResult.split({"limit": 50}))  # the source still says over its cap
    assert window.state.splits == 1 and window.total == 2
    assert window.state.failed == 1 and window.state.failures[0].kind == "needs_split"
    assert [c.label() for c in window.state.requeued] == ["2024-11-17T00:30:00Z/2024-11-17T01:00:00Z"]


@VERSIONS
def test_a_throttled_step_waits_without_spending_an_attempt_up_to_the_limit_then_counts(version: int) -> None:
    window = window_for(spec(1, 1, "exchange", max_attempts=1, window_version=version), now=T0)
    (call,) = calls(window.fill())
    throttled = ActivityResult(False, error=ActivityError("transient", f"{THROTTLED}: busy"))
    for _ in range(THROTTLED_RETRIES):
        (wait,) = window.on_result(0, throttled)
        assert isinstance(wait, Wait)
        window.now = wait.until
        (call,) = calls(window.on_timer(0))
        assert call.input["attempt"] == 1  # waiting for a busy service is not another try at the chunk
    assert window.on_result(0, throttled) == []  # past the limit it is a failed step: with one attempt, the chunk fails
    assert window.state.failed == 1 and window.state.failures[0].attempts == 1


@VERSIONS
def test_a_success_clears_the_failed_steps_before_it_and_a_failure_reports_the_chunk_s_tries(version: int) -> None:
    window = window_for(spec(1, 1, "exchange", max_attempts=2, window_version=version), now=T0)
    (call,) = calls(window.fill())
    assert call.input["attempt"] == 1
    (wait,) = window.on_result(0, failed("transient", "503"))
    window.now = wait.until
    (call,) = calls(window.on_timer(0))
    assert call.input["attempt"] == 2
    (call,) = calls(window.on_result(0, ActivityResult.success({"cursor": {"typeIndex": 0, "sessionId": "s"}})))
    assert call.input["attempt"] == 2  # the session goes on: the same try
    # one failed step after a success is the first of its own, not the second of the chunk's: retried, not failed
    (wait,) = window.on_result(0, failed("transient", "503"))
    assert isinstance(wait, Wait) and window.state.failed == 0
    window.now = wait.until
    (call,) = calls(window.on_timer(0))
    assert call.input["attempt"] == 3
    window.on_result(0, failed("bad_request", "refused"))  # not retryable: the chunk fails after its third try
    assert window.state.failed == 1
    assert window.state.failures[0].attempts == 3 and window.output(None)["failures"][0]["attempts"] == 3


@VERSIONS
def test_an_incomplete_window_says_why_with_the_evidence_that_is_not_complete_only(version: int) -> None:
    window = window_for(spec(1, 1, "exchange", window_version=version), now=T0)
    (call,) = calls(window.fill())
    evidence = (
        {"recordType": "A", "complete": True, "detail": "closed short"},
        {"recordType": "B", "complete": False, "detail": "session cap reached"},
        {"recordType": "C", "detail": "no verdict given"},
    )
    summary = ChunkSummary(Chunk.from_json(call.input["chunk"]), 3, 0, 0, 0, "b", "h", 1, True, evidence=evidence)
    window.on_result(0, ActivityResult.success({"summary": summary.to_json()}))
    output = window.output(None)
    assert output["status"] == "CompletedWithFailures" and output["incomplete"] == 1
    assert [n["reasons"] for n in output["incompleteWindows"]] == [["session cap reached"]]


@VERSIONS
def test_the_percent_counts_failed_chunks_as_decided(version: int) -> None:
    window = window_for(spec(2, 1, "exchange", max_attempts=1, window_version=version), now=T0)
    window.fill()
    window.on_result(0, failed("bad_request"))
    assert window.status()["percent"] == 50.0
    (call,) = calls(window.fill())
    window.on_result(call.lane, summary_for(call))
    assert window.finished and window.status()["percent"] == 100.0
    assert window.output(None)["percent"] == 100.0


def _requeued(n: int) -> list[Chunk]:
    return [Chunk(T0 + timedelta(hours=i), T0 + timedelta(hours=i + 1)) for i in range(n)]


@VERSIONS
def test_a_chunk_given_back_unstarted_waits_first_in_line(version: int) -> None:
    # Three lanes ask at once; the entity queues the first two: one lane per collection waits, the other gives its
    # turn and its chunk back, which goes before every chunk that was waiting already.
    chunks = _requeued(4)
    carried = Carried(cursor=4, requeued=list(chunks))
    window = window_for(budget_sim.spec(n=4, k=3, b=4, source="graph", window_version=version), carried, now=at(0))
    window.fill()
    window.on_budget(0, granted(1, LEASE, held=1, waiting=0, capacity=4))  # three free: two more lanes ask
    asks = [s for s in window.fill() if isinstance(s, CallEntity) and s.operation == "acquire"]
    assert [a.lane for a in asks] == [1, 2]
    window.now = at(1)
    assert isinstance(window.on_budget(1, queued(held=4, waiting=1, capacity=4))[0], Wait)
    window.on_budget(2, queued(held=4, waiting=2, capacity=4))
    assert 2 not in window.lanes
    assert window.state.requeued == [chunks[2], chunks[3]]
    assert window.output(None)["remaining"]["requeued"][0] == chunks[2].to_json()


@VERSIONS
def test_a_lane_with_a_query_answered_queued_again_keeps_its_chunk_and_waits(version: int) -> None:
    window = window_for(budget_sim.spec(n=2, k=2, b=2, source="graph", window_version=version), now=at(0))
    window.fill()
    window.on_budget(0, granted(1, LEASE, held=1, waiting=0, capacity=2))
    window.fill()
    window.on_budget(1, granted(2, LEASE, held=2, waiting=0, capacity=2))
    for lane in (0, 1):  # both submit their query; each then waits for its first status check
        (wait,) = [
            s for s in window.on_result(lane, ActivityResult.success({"queryId": f"q-{lane}"})) if s.lane == lane
        ]
        assert isinstance(wait, Wait)
    window.now = at(LEASE)  # both deadlines passed (the host was paused): each asks again before checking
    for lane in (0, 1):
        (ask,) = [s for s in window.on_timer(lane) if isinstance(s, CallEntity)]
        assert ask.operation == "acquire"
    assert isinstance(window.on_budget(0, queued(held=2, waiting=1, capacity=2))[0], Wait)
    # lane 1 is queued too while lane 0 waits: it has a query on the service, so it keeps its chunk and waits
    steps = window.on_budget(1, queued(held=2, waiting=2, capacity=2))
    assert [type(s) for s in steps] == [Wait] and 1 in window.lanes
    assert window.lanes[1].query_id == "q-1" and window.state.requeued == []
    window.now = at(LEASE + 2 * budget_sim.POLL)
    window.on_timer(1)
    (check,) = calls(window.on_budget(1, granted(3, 3 * LEASE, held=2, waiting=1, capacity=2)))
    assert check.name == names.ACTIVITY_GRAPH_COLLECT and check.input["queryId"] == "q-1"


@VERSIONS
def test_a_lane_granted_another_grant_than_the_one_it_held_lost_its_slot(version: int) -> None:
    window = window_for(budget_sim.spec(b=1, k=1, n=1, m=1000, window_version=version), now=at(0))
    window.fill()
    window.on_budget(0, granted(7, LEASE))
    window.now = at(LEASE - MARGIN)  # its deadline: the next call asks first
    (ask,) = window.on_result(0, ActivityResult.success({"cursor": {"typeIndex": 0}}))
    assert isinstance(ask, CallEntity)
    window.on_budget(0, granted(8, 2 * LEASE))  # granted again, but a new grant: someone held it meanwhile
    assert window.status()["budget"]["lost"] == 1
