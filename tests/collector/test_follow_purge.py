"""Which finished passes the purge timer deletes: those of days their follower says are final (``finalBefore``), ended
at least ``COLLECTOR_FOLLOW_PURGE_AFTER_HOURS`` ago; never a running pass, a pass of a day still read, or a pass
whose follower published nothing. And ``finalBefore`` itself: the oldest day with coverage, a provisional window or a
failure still open."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from azure.durable_functions.models.DurableOrchestrationStatus import DurableOrchestrationStatus

from http_api.follow_purge import purge_passes
from orchestrators.collect import NUDGE_HORIZON
from shared import names
from shared.follow.plan import final_before
from shared.follow.state import FollowState, WindowFailure
from shared.models import Chunk

NOW = datetime(2024, 11, 18, 12, tzinfo=UTC)
FOLLOW = "follow-graph-0123456789ab"
OTHER = "follow-graph-ba9876543210"


def follower(instance: str, final: str | None, *, stopped: bool = False) -> DurableOrchestrationStatus:
    view = {"followId": instance, **({"finalBefore": final} if final else {})}
    return DurableOrchestrationStatus(
        name=names.ORCHESTRATOR_FOLLOW, instanceId=instance, createdTime="2024-11-18T00:00:00Z",
        runtimeStatus="Completed" if stopped else "Running",
        **({"output": view} if stopped else {"customStatus": view}),
    )  # fmt: skip


def a_pass(instance: str, status: str = "Completed", ended: datetime = NOW - timedelta(hours=30)) -> Any:
    return DurableOrchestrationStatus(
        name=names.ORCHESTRATOR_COLLECT, instanceId=instance, createdTime="2024-11-15T00:00:00Z",
        lastUpdatedTime=ended.isoformat().replace("+00:00", "Z"), runtimeStatus=status,
    )  # fmt: skip


class Pages:
    def __init__(self, instances: list[Any], size: int = 3) -> None:
        self.instances, self.size = instances, size

    async def page(self, *, prefix: str, top: int, token: str | None) -> tuple[list[Any], str | None]:
        start = int(token or 0)
        end = start + self.size
        return self.instances[start:end], (str(end) if end < len(self.instances) else None)


class Client:
    def __init__(self, failing: frozenset[str] = frozenset()) -> None:
        self.purged: list[str] = []
        self.failing = failing

    async def purge_instance_history(self, instance_id: str) -> None:
        if instance_id in self.failing:
            raise RuntimeError("404")
        self.purged.append(instance_id)


def run(instances: list[Any], keep: timedelta = timedelta(0), client: Client | None = None) -> tuple[Client, Any]:
    client = client or Client()
    report = asyncio.run(purge_passes(client, Pages(instances), NOW, keep=keep))
    return client, report


def test_finished_passes_of_final_days_are_purged_and_the_rest_kept() -> None:
    instances = [
        a_pass(f"{FOLLOW}-20241115-p0"),  # a final day
        a_pass(f"{FOLLOW}-20241116-p1", status="Failed"),  # a final day, the pass failed: purged too
        a_pass(f"{FOLLOW}-20241116-p2", status="Terminated"),
        a_pass(f"{FOLLOW}-20241117-p3"),  # the day finalBefore names: not final yet
        a_pass(f"{FOLLOW}-20241118-p4", status="Running"),
        follower(FOLLOW, "2024-11-17T00:00:00Z"),  # listed after its passes: the sweep reads every page first
        a_pass(f"{OTHER}-20241115-p0"),  # its follower published no finalBefore (older code): kept
        follower(OTHER, None),
        a_pass("follow-graph-cccccccccccc-20241115-p0"),  # no follower any more (purged by hand): kept
        a_pass(f"{FOLLOW}-20241115-p0-retry-1"),  # not a pass's id
    ]
    client, report = run(instances)
    assert client.purged == [f"{FOLLOW}-20241115-p0", f"{FOLLOW}-20241116-p1", f"{FOLLOW}-20241116-p2"]
    assert report.kept == 3 and report.failed == []


def test_a_stopped_followers_final_days_come_from_its_output() -> None:
    client, _ = run([follower(FOLLOW, "2024-11-17T00:00:00Z", stopped=True), a_pass(f"{FOLLOW}-20241116-p0")])
    assert client.purged == [f"{FOLLOW}-20241116-p0"]


def test_a_pass_is_kept_the_hours_the_setting_asks_after_it_ended() -> None:
    recent = a_pass(f"{FOLLOW}-20241115-p7", ended=NOW - timedelta(hours=2))
    instances = [follower(FOLLOW, "2024-11-17T00:00:00Z"), recent, a_pass(f"{FOLLOW}-20241115-p0")]
    client, report = run(instances, keep=timedelta(hours=3))
    assert client.purged == [f"{FOLLOW}-20241115-p0"] and report.kept == 1
    client, _ = run(instances, keep=timedelta(hours=2))
    assert sorted(client.purged) == [f"{FOLLOW}-20241115-p0", f"{FOLLOW}-20241115-p7"]


def test_a_pass_is_kept_until_the_timers_it_left_behind_have_fired_whatever_the_setting() -> None:
    # Each episode of a pass that added a task left a cancelled nudge timer whose TimerFired DTFx still queues,
    # NUDGE_HORIZON (1 h) ahead. Purged before then, each such message is for a nonexistent instance: dequeued six
    # times before it is discarded. Kept until then, it finds the completed instance and is discarded at once.
    just = a_pass(f"{FOLLOW}-20241115-p7", ended=NOW - timedelta(minutes=30))
    later = a_pass(f"{FOLLOW}-20241115-p8", ended=NOW - NUDGE_HORIZON - timedelta(minutes=10))
    client, report = run([follower(FOLLOW, "2024-11-17T00:00:00Z"), just, later], keep=timedelta(0))
    assert client.purged == [f"{FOLLOW}-20241115-p8"] and report.kept == 1


def test_a_failing_purge_is_reported_and_the_others_go_on() -> None:
    instances = [
        follower(FOLLOW, "2024-11-17T00:00:00Z"),
        a_pass(f"{FOLLOW}-20241115-p0"),
        a_pass(f"{FOLLOW}-20241116-p1"),
    ]
    client, report = run(instances, client=Client(failing=frozenset({f"{FOLLOW}-20241115-p0"})))
    assert client.purged == [f"{FOLLOW}-20241116-p1"] and report.failed == [f"{FOLLOW}-20241115-p0"]


def test_final_before_is_the_oldest_day_still_open() -> None:
    day = datetime(2024, 11, 15, tzinfo=UTC)
    state = FollowState(covered_until=day + timedelta(days=2))
    assert final_before(state) == day + timedelta(days=2), "covered to midnight: the day before is final"
    state.covered_until = day + timedelta(days=2, hours=5)
    assert final_before(state) == day + timedelta(days=2), "a day covered in part is not final"
    state.provisional = [Chunk(day + timedelta(days=1, hours=23), day + timedelta(days=2))]
    assert final_before(state) == day + timedelta(days=1), "a provisional window keeps its day open"
    failed = Chunk(day + timedelta(hours=3), day + timedelta(hours=4))
    state.failures = [WindowFailure(failed, "query_failed", "boom", 1, NOW)]
    assert final_before(state) == day, "a failed window keeps its day open"
