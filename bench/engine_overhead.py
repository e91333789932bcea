"""Engine overhead per episode outside the SDK: time in the orchestrator call vs the whole episode.

Run: ``.venv/bin/python bench/engine_overhead.py [--steps 50] [--instances 20] [--chunks 60]``
Runs chained orchestrations (one activity per episode) on the memory store. For every episode it measures:
the SDK call (the registered orchestrator handle, wrapped with a timer), ``run_episode`` (history JSON, SDK
call, shim emulation), and the whole episode in the dispatcher (``run_episode`` + checkpoint: queue sends,
history batches, instance row, message deletes). Prints per-episode means and the ratios.

Then the execution cache (``durable_local.replay.execution_cache``) side by side: the episodes of one real collection
(the collector's orchestrator, Graph, K = 3, the tenant budget on, ``--chunks`` chunks, 20 chunk starts per execution,
recorded through ``tests/collector/replay_driver.py``) are replayed by ``run_episode`` without a cache and with each
episode's cache handed to the next, interleaved three times; it prints the time per episode outside the SDK call
(encoding the history, parsing the answer, the shim), the SDK call, and the ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import azure.durable_functions as df

from durable_local.clock import SystemClock
from durable_local.engine import Engine
from durable_local.model import FunctionRegistry, OrchestratorFn
from durable_local.replay.api import EpisodeInput, EpisodeResult
from durable_local.replay.episode import run_episode
from durable_local.settings import EngineSettings
from durable_local.storage import open_memory_store


def chain(ctx: df.DurableOrchestrationContext) -> Any:
    steps = ctx.get_input()
    total = 0
    for i in range(steps):
        total += yield ctx.call_activity("inc", i)
    return total


def inc(data: str | None) -> str:
    return json.dumps(json.loads(data or "0") + 1)


class Timed:
    """Wraps an orchestrator handle and accumulates the time spent inside the SDK call."""

    def __init__(self, handle: OrchestratorFn) -> None:
        self._handle = handle
        self._lock = threading.Lock()
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, context_json: str) -> str:
        started = time.perf_counter()
        try:
            return self._handle(context_json)
        finally:
            elapsed = time.perf_counter() - started
            with self._lock:
                self.seconds += elapsed
                self.calls += 1


def measure(instances: int, steps: int, threads: int = 4) -> None:
    timed = Timed(df.Orchestrator.create(chain))
    registry = FunctionRegistry(orchestrators={"chain": timed}, activities={"inc": inc})
    settings = EngineSettings(
        min_queue_polling_interval=timedelta(milliseconds=1),
        max_queue_polling_interval=timedelta(milliseconds=20),
        orchestration_worker_threads=threads,
    )
    clock = SystemClock()
    with open_memory_store(clock) as store:
        engine = Engine(registry, store=store, settings=settings, clock=clock)
        engine.start()
        try:
            started = time.perf_counter()
            ids = [engine.start_new("chain", input_json=json.dumps(json.dumps(steps))) for _ in range(instances)]
            for instance_id in ids:
                status = engine.wait_for_completion(instance_id, 600)
                expected = sum(i + 1 for i in range(steps))
                if status is None or status.output != str(expected):
                    raise SystemExit(f"{instance_id} did not complete correctly: {status}")
            wall = time.perf_counter() - started
            stats = engine.stats()
        finally:
            engine.stop(drain_timeout=5)
    episodes = stats["episodes"]
    per = 1000.0 / max(episodes, 1)
    sdk_ms = timed.seconds * per
    replay_ms = stats["replay_seconds"] * per
    episode_ms = stats["episode_seconds"] * per
    print(
        f"{instances} orchestration(s) x {steps} activities, {threads} episode thread(s): "
        f"{episodes} episodes in {wall:.2f} s wall ({episodes / wall:.0f} episodes/s)"
    )
    print(f"  per episode: total {episode_ms:.3f} ms | run_episode {replay_ms:.3f} ms | SDK call {sdk_ms:.3f} ms")
    print(f"  engine overhead outside the SDK call: {episode_ms - sdk_ms:.3f} ms per episode")
    print(f"  ratio SDK call / total episode = {sdk_ms / episode_ms:.2f}")
    print(f"  ratio run_episode / total episode = {replay_ms / episode_ms:.2f}")
    print(f"  ratio checkpoint / total episode = {stats['checkpoint_seconds'] * per / episode_ms:.2f}")


def record_collection(chunks: int, timed: Timed) -> list[EpisodeInput]:
    """Every episode input of one real Graph collection, in order (each episode's past is the previous history)."""
    from shared.sinks.memory import MemorySink
    from tests.collector import replay_driver
    from tests.collector.fakes import FakeQueryApi, synthetic
    from tests.collector.test_orchestrator_replay import START, graph_activities, payload

    inputs: list[EpisodeInput] = []
    cache: list[Any] = [None]

    def recording(episode: EpisodeInput) -> EpisodeResult:
        inputs.append(episode)
        result = run_episode(dataclasses.replace(episode, cache=cache[0]))
        cache[0] = result.cache
        return result

    replay_driver.run_episode = recording  # type: ignore[assignment]
    api = FakeQueryApi(synthetic(START, hours=chunks, per_hour=5), polls_until_done=3)
    driver = replay_driver.ReplayDriver(timed, graph_activities(api, MemorySink()), seed=1, budget_capacity=10)
    options = {"budget_capacity": 10, "budget_lease_seconds": 600.0, "budget_poll_seconds": 10.0}
    driver.start(payload("graph", hours=chunks, k=3, m=20, poll_interval_seconds=30.0, **options))
    driver.run(max_steps=10_000_000)
    replay_driver.run_episode = run_episode
    return inputs


def replay(inputs: list[EpisodeInput], timed: Timed, *, cached: bool) -> tuple[float, float]:
    """(seconds in run_episode, of which in the SDK call) over ``inputs``, with or without the cache."""
    cache = None
    sdk_before = timed.seconds
    began = time.perf_counter()
    for episode in inputs:
        result = run_episode(dataclasses.replace(episode, cache=cache))
        cache = result.cache if cached else None
    return time.perf_counter() - began, timed.seconds - sdk_before


def measure_cache(chunks: int) -> None:
    from tests.collector.replay_driver import orchestrator_handle

    timed = Timed(orchestrator_handle())
    inputs = record_collection(chunks, timed)
    replayed = sum(len(episode.past_events) for episode in inputs)
    totals = {False: [0.0, 0.0], True: [0.0, 0.0]}
    for _ in range(3):  # interleaved, so drift on a shared machine hits both alike
        for cached in (False, True):
            total, sdk = replay(inputs, timed, cached=cached)
            totals[cached][0] += total
            totals[cached][1] += sdk
    per = 1000.0 / (3 * len(inputs))
    print(
        f"one Graph collection of {chunks} chunks: {len(inputs)} episodes, {replayed / len(inputs):.0f} past events "
        "per episode on average"
    )
    for cached in (False, True):
        total, sdk = totals[cached]
        label = "with the cache" if cached else "no cache"
        print(
            f"  {label:>14}: run_episode {total * per:.3f} ms | SDK call {sdk * per:.3f} ms | outside the SDK "
            f"{(total - sdk) * per:.3f} ms per episode"
        )
    (off, off_sdk), (on, on_sdk) = totals[False], totals[True]
    print(
        f"  outside the SDK, no cache / cache = {(off - off_sdk) / (on - on_sdk):.2f}x; "
        f"whole run_episode {off / on:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="activities (= episodes) per orchestration")
    parser.add_argument("--instances", type=int, default=20)
    parser.add_argument(
        "--chunks", type=int, default=60, help="chunks of the collection replayed with and without cache"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    print("sequential (one instance: no GIL contention between episodes):")
    measure(1, args.steps)
    for threads in (1, 4):
        print(f"concurrent ({args.instances} instances; wall-clock timings include waiting for the GIL):")
        measure(args.instances, args.steps, threads)
    print("the execution cache:")
    measure_cache(args.chunks)


if __name__ == "__main__":
    main()
