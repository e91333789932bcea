"""A stop is honoured whenever it is sent: the real follower orchestrator replayed by ``durable_local.replay`` in SHIM
mode (the extension's sequential-await shim), its passes played by the test.

Today's extension drops the events an execution buffered when it continues as new (the shim calls ``ContinueAsNew``
without ``preserveUnprocessedEvents``), and the Python SDK holds an event that arrived before its waiter only until
then; DTFx carries into the next execution only the events processed *after* ``ContinueAsNew`` was reached
(docs/durable-protocol.md, "Continue-as-new"). These tests send the stop at each of those moments.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from durable_local.model import RuntimeStatus
from shared.follow.state import FollowState
from shared.models import iso
from tests.collector.follow_replay import HOUR, NOW, Follower, payload, written


def stopped_output(follower: Follower) -> dict[str, Any]:
    assert follower.result is not None
    assert follower.status is RuntimeStatus.COMPLETED, (
        f"the follower did not end: {follower.status.name}, passes {[p[0] for p in follower.passes]}, "
        f"executions {follower.executions}"
    )
    return json.loads(follower.result.output or "null")  # type: ignore[no-any-return]


def test_a_stop_sent_while_a_pass_runs_ends_the_follower_after_that_pass() -> None:
    follower = Follower(payload(NOW - 6 * HOUR))
    follower.run_until_pass()
    (first,) = follower.passes
    follower.deliver([follower.stop_message()])  # the stop arrives while the pass runs
    assert follower.status is RuntimeStatus.RUNNING, "the pass it runs is finished first"
    assert follower.statuses[-1]["status"] == "stopping" and follower.statuses[-1]["running"]
    follower.now += timedelta(minutes=3)
    follower.deliver([follower.pass_answer(written(first[2]))])
    follower.idle()
    output = stopped_output(follower)
    assert len(follower.passes) == 1, "no pass after the stop"
    assert output["status"] == "stopped" and output["passes"] == 1
    assert output["covered"]["end"] == first[2]["spec"]["explicit"][-1]["end"], "the pass it ran is applied"
    assert FollowState.from_json(output["state"]).stopped


def test_a_stop_processed_after_the_execution_continued_as_new_is_carried_and_honoured() -> None:
    """The pass's answer and the stop in one batch: the follower reaches ``continue_as_new`` on the answer, and DTFx
    carries the stop into the next execution, whose waiter takes it before anything else."""
    follower = Follower(payload(NOW - 6 * HOUR))
    follower.run_until_pass()
    (first,) = follower.passes
    follower.deliver([follower.pass_answer(written(first[2])), follower.stop_message()])
    follower.idle()
    output = stopped_output(follower)
    assert len(follower.passes) == 1 and output["status"] == "stopped"


def test_a_stop_during_a_failed_pass_still_ends_the_follower() -> None:
    follower = Follower(payload(NOW - 6 * HOUR))
    follower.run_until_pass()
    follower.deliver([follower.stop_message()])
    follower.deliver([follower.pass_answer(None)])  # the collection itself failed
    follower.idle()
    output = stopped_output(follower)
    assert len(follower.passes) == 1 and output["lastError"]["kind"] == "pass_failed"


def test_a_stop_during_the_first_of_two_passes_ends_the_follower_before_the_second() -> None:
    """Windows of two days are due (a settle pass for yesterday, new windows today): the stop sent during the first
    pass ends the follower after it, without starting the second."""
    start = NOW.replace(hour=0) - timedelta(days=1)
    follower = Follower(payload(start, covered=NOW.replace(hour=0) - 6 * HOUR))
    follower.run_until_pass()
    (first,) = follower.passes
    assert first[2]["spec"]["collectionId"].endswith(f"{start:%Y%m%d}"), "yesterday's pass first"
    follower.deliver([follower.stop_message()])
    follower.deliver([follower.pass_answer(written(first[2]))])
    follower.idle()
    output = stopped_output(follower)
    assert len(follower.passes) == 1, "the second day's pass never started"
    assert output["covered"]["end"] == iso(NOW.replace(hour=0))


def test_a_stop_while_it_waits_ends_it_at_once_and_a_follower_without_stop_goes_on() -> None:
    follower = Follower(payload(NOW - 6 * HOUR))
    follower.run_until_pass()
    follower.deliver([follower.pass_answer(written(follower.passes[0][2]))])
    follower.now += timedelta(minutes=1)
    follower.fire_timers()  # nothing is due before the next wake: it waits
    assert follower.status is RuntimeStatus.RUNNING and not follower.open_passes
    follower.deliver([follower.stop_message()])
    assert stopped_output(follower)["status"] == "stopped"

    going = Follower(payload(NOW - 6 * HOUR))
    going.run_until_pass()
    going.deliver([going.pass_answer(written(going.passes[0][2]))])
    going.now += 2 * HOUR
    going.run_until_pass()
    assert going.status is RuntimeStatus.RUNNING and len(going.passes) == 2, "without a stop it goes on"
