"""Issue 10, item 3: ``retry-failed`` is idempotent, also under 20 concurrent calls, and follows the retry chain.

While a retry of a collection runs, every further call answers 200 with that retry; once it has finished, the next
call retries what is still failed (the previous retry's failures), as the next link of the chain
``root -> root-retry-1 -> root-retry-2``, whichever link the call names.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from durable_local.faults import CrashPoint
from durable_local.host import LocalHost
from m365_emulator import Emulator, EmulatorConfig
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import REPO, START, TENANT, Host, base_env, body, serve

CALLS = 20


def _retry_together(host: Host, targets: list[str]) -> list[requests.Response]:
    """POST retry-failed for every target at the same moment (a barrier releases all threads at once)."""
    barrier = threading.Barrier(len(targets))

    def call(target: str) -> requests.Response:
        barrier.wait()
        return host.post_path(f"/api/collections/{target}/retry-failed")

    with ThreadPoolExecutor(len(targets)) as pool:
        return list(pool.map(call, targets))


def _collections(host: Host) -> set[str]:
    return {i["instanceId"] for i in host.instances() if not i["instanceId"].startswith("@")}


def test_concurrent_retry_failed_calls_start_one_retry_per_link_of_the_chain(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    bad = [(START + timedelta(hours=h), START + timedelta(hours=h + 1)) for h in (2, 4)]

    def fail_two_windows(config: EmulatorConfig) -> None:
        config.faults.fail_query_windows = tuple(bad)

    emulator = make_emulator(configure=fail_two_windows)
    end = START + timedelta(hours=6)
    with serve(emulator, tmp_path) as host:
        assert host.post(body(end, interval=60, k=3, collectionId="root")).status_code == 202
        root = host.wait("root")
        assert (root["status"], root["progress"]["failed"]) == ("CompletedWithFailures", 2), root

        # First link: one window heals, the other still fails; queries take long enough that every call sees the
        # retry running.
        emulator.faults.fail_query_windows = (bad[1],)
        emulator.config.graph.completion_delay_seconds = 3.0
        before = _collections(host)
        answers = _retry_together(host, ["root"] * CALLS)
        assert sorted(a.status_code for a in answers) == [200] * (CALLS - 1) + [202], [a.text for a in answers]
        [first] = {a.json()["collectionId"] for a in answers}
        assert _collections(host) - before == {first}
        assert all(a.json()["parentCollectionId"] == "root" for a in answers)
        retry1 = host.wait(first)
        assert retry1["parentCollectionId"] == "root" and retry1["progress"]["completed"] == 1, retry1
        assert retry1["status"] == "CompletedWithFailures" and len(retry1["failures"]) == 1

        # Second link: calls naming the root and calls naming the first retry start one retry of what is still
        # failed, linked to the first retry. The window heals now (a query's outcome is drawn when it is created).
        emulator.faults.fail_query_windows = ()
        before = _collections(host)
        answers = _retry_together(host, ["root", first] * (CALLS // 2))
        assert sorted(a.status_code for a in answers) == [200] * (CALLS - 1) + [202], [a.text for a in answers]
        [second] = {a.json()["collectionId"] for a in answers}
        assert _collections(host) - before == {second} and second != first
        assert all(a.json()["parentCollectionId"] == first for a in answers)
        retry2 = host.wait(second)
        assert retry2["status"] == "Completed" and retry2["progress"]["completed"] == 1, retry2

        # Nothing is still failed: every link answers 400 and starts nothing.
        before = _collections(host)
        for target in ("root", first, second):
            done = host.post_path(f"/api/collections/{target}/retry-failed")
            assert done.status_code == 400 and done.json()["error"]["rule"] == "none_failed", done.text
        assert _collections(host) == before

        ids = host.chunk_ids("root") + host.chunk_ids(first) + host.chunk_ids(second)
        # The newest link's manifest proves the root's whole range over the chain; the first link's said what
        # was still failed then.
        chain = host.manifest(second)["chain"]
        first_chain = host.manifest(first)["chain"]
    truth = emulator.ground_truth_ids(TENANT, START, end)
    assert chain["links"] == ["root", first, second] and chain["totals"]["records"] == len(truth)
    assert (chain["gaps"], chain["failures"], chain["expired"]) == ([], [], [])
    assert first_chain["gaps"] == [] and len(first_chain["failures"]) == 1
    assert first_chain["totals"]["records"] == len(truth) - len(emulator.ground_truth_ids(TENANT, *bad[1]))
    assert len(ids) == len(set(ids)) and sorted(ids) == sorted(truth)
    assert sorted(host.chunk_ids(second)) == sorted(emulator.ground_truth_ids(TENANT, *bad[1]))


TRIALS = 10
START_ROW_DELAY = 0.3
"""Seconds between a start's ExecutionStarted message and its Instances row (crash point C10): DTFx writes the row
after the message, and a start that checks for the instance within that window does not see it. On Azure the window
is one storage round trip; the delay makes it wide enough that 20 concurrent calls land in it in every trial."""


@pytest.fixture
def in_process_host(make_emulator: MakeEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The collector app on a local host in this process (so a test can reach its engine's crash points)."""

    def serve_here(emulator: Emulator, extra: dict[str, str]) -> LocalHost:
        for name, value in {**base_env(emulator, tmp_path / "output"), **extra}.items():
            monkeypatch.setenv(name, value)
        host = LocalHost(
            REPO,
            port=0,
            store="memory",
            settings_overrides={"max_queue_polling_interval": timedelta(milliseconds=20)},
            drain_timeout=5,
        )
        host.start()
        hosts.append(host)
        return host

    hosts: list[LocalHost] = []
    yield serve_here
    for host in hosts:
        host.stop()


def test_twenty_concurrent_retry_failed_calls_answer_one_202_in_every_trial(
    make_emulator: MakeEmulator, in_process_host: Any
) -> None:
    """Issue 18.5: with starts as slow to become visible as DTFx allows, the Durable start's refusal of a running
    instance cannot make concurrent calls exactly-once; the chain's claim of the next link does."""
    bad = (START + timedelta(hours=1), START + timedelta(hours=2))

    def fail_one_window(config: EmulatorConfig) -> None:
        config.faults.fail_query_windows = (bad,)

    emulator = make_emulator(configure=fail_one_window)
    host = in_process_host(emulator, {"COLLECTOR_MAX_ATTEMPTS": "1"})
    base = host.base_url
    host.engine.faults.arm(
        CrashPoint.C10_CLIENT_AFTER_START_ENQUEUE,
        times=10**6,
        when=lambda context: "-retry-" in str(context.get("instance_id")),
        action=lambda _: time.sleep(START_ROW_DELAY),
    )
    served = Host(base, Path(), Path())
    assert served.post(body(START + timedelta(hours=2), k=2, collectionId="storm")).status_code == 202
    assert served.wait("storm")["status"] == "CompletedWithFailures"
    accepted: list[int] = []
    for trial in range(1, TRIALS + 1):
        answers = _retry_together(served, ["storm"] * CALLS)
        statuses = sorted(a.status_code for a in answers)
        accepted.append(statuses.count(202))
        assert {a.json()["collectionId"] for a in answers} == {f"storm-retry-{trial}"}, [a.text for a in answers]
        assert served.wait(f"storm-retry-{trial}")["status"] == "CompletedWithFailures"
    assert accepted == [1] * TRIALS, accepted
