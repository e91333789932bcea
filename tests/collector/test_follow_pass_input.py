"""What the follower orchestrator hands each pass, replayed through the shim emulation
(``tests.collector.follow_replay``): every window the day's pass is due to read (not only the new ones), the day's
scope, a run of its own, and a seal the admission activity accepts for the pass's instance; and a follower started
with an input nobody sealed runs no pass. The rules a hand mutation showed no other test held (docs/testing.md,
"Mutation")."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

from durable_local.model import RuntimeStatus
from shared.follow.plan import plan
from shared.follow.state import FollowSpec, FollowState, WindowFailure
from shared.models import Chunk
from shared.requests import admission
from shared.window.machine import CollectionSpec
from tests.collector.follow_replay import FOLLOW, HOUR, NOW, Follower, payload, written

SECRET = "follow-pass-secret-" * 2
GUID = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
YESTERDAY = NOW.replace(hour=0) - timedelta(days=1)


def behind_with_work_of_yesterday() -> dict[str, Any]:
    """Covered to this morning; of yesterday, a provisional window due to be read again, a failed window due for its
    retry and another failed one not due yet."""
    start = payload(YESTERDAY, covered=NOW.replace(hour=6))
    start["spec"] = replace(FollowSpec.from_json(start["spec"]), tenant_guid=GUID).to_json()
    state = FollowState.from_json(start["state"])
    state.provisional = [Chunk(YESTERDAY + 2 * HOUR, YESTERDAY + 3 * HOUR)]
    state.failures = [
        WindowFailure(Chunk(YESTERDAY + 4 * HOUR, YESTERDAY + 5 * HOUR), "throttled", "429", 1, NOW - HOUR),
        WindowFailure(Chunk(YESTERDAY + 7 * HOUR, YESTERDAY + 8 * HOUR), "throttled", "429", 3, NOW + 5 * HOUR),
    ]
    return {**start, "state": state.to_json()}


def test_a_days_pass_reads_every_window_due_that_day_within_the_days_scope() -> None:
    start = behind_with_work_of_yesterday()
    follower = Follower(start)
    follower.run_until_pass()
    instance, _, handed = follower.passes[0]
    spec, state = FollowSpec.from_json(start["spec"]), FollowState.from_json(start["state"])
    due = plan(spec, state, follower.now)[0]
    assert due.day == YESTERDAY.date() and due.new == () and len(due.windows) == 2, "a settle and a retry, no new"
    assert instance == due.instance_id
    assert [Chunk.from_json(c) for c in handed["spec"]["explicit"]] == list(due.windows)
    assert handed["scope"] == due.scope
    assert CollectionSpec.from_json(handed["spec"]).budget_tenant == GUID, "the tenant's one budget, by its GUID"
    assert handed["scope"]["failures"] == [state.failures[1].manifest_json()], "the failure not retried stays failed"
    assert handed["scope"]["provisional"] == [state.provisional[0].span_json()]


def test_each_pass_is_sealed_for_its_own_instance_with_a_run_of_its_own() -> None:
    start = admission.sealed(SECRET, FOLLOW, {**behind_with_work_of_yesterday(), admission.RUN: "a" * 32})
    follower = Follower(start, secret=SECRET)
    follower.run_until_pass()
    follower.deliver([follower.pass_answer(written(follower.passes[0][2]))])
    assert len(follower.passes) == 2, "yesterday's pass, then today's"
    runs = set()
    for instance, _, handed in follower.passes:
        request = {
            "instance": instance,
            "digest": admission.digest(instance, handed),
            "seal": handed.get(admission.SEAL, ""),
            "owner": handed["spec"]["collectionId"],
            "run": handed.get(admission.RUN, ""),
        }
        answer = admission.admit(SECRET, request)
        assert answer["admitted"] is True, answer
        assert answer["budgetToken"], "a pass's budget token is derived from its run"
        runs.add(handed[admission.RUN])
    assert len(runs) == 2 and "a" * 32 not in runs, "each pass runs under a run id of its own"


def test_a_follower_started_with_an_input_nobody_sealed_runs_no_pass() -> None:
    """The direct start through the Durable HTTP API (issue 29) with a follower's input: refused before anything of
    the input is read; no pass, no timer."""
    follower = Follower({**behind_with_work_of_yesterday(), admission.RUN: "a" * 32}, secret=SECRET)
    follower.idle()
    assert follower.status is RuntimeStatus.COMPLETED and follower.passes == [] and follower.timers == []
    assert follower.result is not None
    output = json.loads(follower.result.output or "null")
    assert output["status"] == "Failed" and output["reason"]["kind"] == admission.REFUSED_UNSEALED
    assert output["followId"] == FOLLOW
