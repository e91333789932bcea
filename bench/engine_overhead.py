"""Engine overhead per episode outside the SDK: time in the orchestrator call vs the whole episode.

Run: ``.venv/bin/python bench/engine_overhead.py [--steps 50] [--instances 20]``
Runs chained orchestrations (one activity per episode) on the memory store. For every episode it measures:
the SDK call (the registered orchestrator handle, wrapped with a timer), ``run_episode`` (history JSON, SDK
call, shim emulation), and the whole episode in the dispatcher (``run_episode`` + checkpoint: queue sends,
history batches, instance row, message deletes). Prints per-episode means and the ratios.
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="activities (= episodes) per orchestration")
    parser.add_argument("--instances", type=int, default=20)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    print("sequential (one instance: no GIL contention between episodes):")
    measure(1, args.steps)
    for threads in (1, 4):
        print(f"concurrent ({args.instances} instances; wall-clock timings include waiting for the GIL):")
        measure(args.instances, args.steps, threads)


if __name__ == "__main__":
    main()
