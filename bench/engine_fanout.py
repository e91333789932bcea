"""Engine throughput: a no-op fan-out/fan-in of N activities, memory store vs SQLite, in activities/s.

Run: ``.venv/bin/python bench/engine_fanout.py [--activities 1000] [--mode shim|ideal]``
Prints activities/s for each store next to the Azure Storage provider's published anchor (parallel activity
execution: 100 activities/s per instance, MicrosoftDocs "durable-functions-azure-storage-provider" performance
targets). Numbers depend on the machine; compare ratios.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import azure.durable_functions as df

from durable_local.clock import SystemClock
from durable_local.engine import Engine
from durable_local.model import FunctionRegistry, SchedulingMode
from durable_local.settings import EngineSettings
from durable_local.storage import StoreBundle, open_memory_store, open_sqlite_store

AZURE_STORAGE_ANCHOR = 100.0  # activities/s per instance, fan-out (MicrosoftDocs performance targets)


def fan_out(ctx: df.DurableOrchestrationContext) -> Any:
    count = ctx.get_input()
    results = yield ctx.task_all([ctx.call_activity("noop", i) for i in range(count)])
    return len(results)


def noop(data: str | None) -> str | None:
    return data


def run(store: StoreBundle, activities: int, mode: SchedulingMode) -> tuple[float, dict[str, Any]]:
    registry = FunctionRegistry(orchestrators={"fan_out": df.Orchestrator.create(fan_out)}, activities={"noop": noop})
    settings = EngineSettings(
        min_queue_polling_interval=timedelta(milliseconds=5),
        max_queue_polling_interval=timedelta(milliseconds=50),
        scheduling_mode=mode,
    )
    engine = Engine(registry, store=store, settings=settings, clock=SystemClock())
    engine.start()
    try:
        started = time.perf_counter()
        instance_id = engine.start_new("fan_out", input_json=json.dumps(json.dumps(activities)))
        status = engine.wait_for_completion(instance_id, 600)
        elapsed = time.perf_counter() - started
        if status is None or status.output != str(activities):
            raise SystemExit(f"fan-out did not complete correctly: {status}")
        return activities / elapsed, engine.stats()
    finally:
        engine.stop(drain_timeout=5)


def _summary(stats: dict[str, Any]) -> str:
    return (
        f"(episodes {stats['episodes']}, episode time {stats['episode_seconds']:.2f} s of which run_episode "
        f"{stats['replay_seconds']:.2f} s, peak activities in flight {stats['activities_peak_in_flight']})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--activities", type=int, default=1000)
    parser.add_argument("--mode", choices=["shim", "ideal"], default="shim")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    mode = SchedulingMode(args.mode)
    clock = SystemClock()
    rates: dict[str, float] = {}
    with open_memory_store(clock) as store:
        rates["memory"], stats = run(store, args.activities, mode)
        print(f"memory : {rates['memory']:8.1f} activities/s  {_summary(stats)}")
    with tempfile.TemporaryDirectory() as folder, open_sqlite_store(Path(folder) / "hub.db", clock) as store:
        rates["sqlite"], stats = run(store, args.activities, mode)
        print(f"sqlite : {rates['sqlite']:8.1f} activities/s  {_summary(stats)}")
    print(f"Azure Storage anchor: {AZURE_STORAGE_ANCHOR:.0f} activities/s per instance (fan-out)")
    for name, rate in rates.items():
        print(f"  {name} / anchor = {rate / AZURE_STORAGE_ANCHOR:.2f}x")
    print(f"  memory / sqlite = {rates['memory'] / rates['sqlite']:.2f}x")


if __name__ == "__main__":
    main()
