"""A worker process for the kill -9 test: runs a sequential orchestration on a SQLite store.

Usage: ``python -m tests.engine.runtime.sqlite_worker DB_PATH INSTANCE_ID`` — starts the instance (if new)
and runs an Engine forever; each activity prints ``done <i>`` on stdout so the parent knows when to kill.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import timedelta
from typing import Any

import azure.durable_functions as df

from durable_local.clock import SystemClock
from durable_local.engine import Engine
from durable_local.model import FunctionRegistry
from durable_local.settings import EngineSettings
from durable_local.storage import open_sqlite_store

STEPS = 6


def steps(ctx: df.DurableOrchestrationContext) -> Any:
    results = []
    for i in range(STEPS):
        results.append((yield ctx.call_activity("step", i)))
    return results


def step(data: str | None) -> str:
    index = json.loads(data or "0")
    print(f"done {index}", flush=True)
    return json.dumps(index * 10)


def registry() -> FunctionRegistry:
    return FunctionRegistry(orchestrators={"steps": df.Orchestrator.create(steps)}, activities={"step": step})


def settings() -> EngineSettings:
    # Short visibility timeouts: after the kill, hidden messages come back within seconds.
    return EngineSettings(
        control_queue_visibility_timeout=timedelta(seconds=2),
        work_item_visibility_timeout=timedelta(seconds=2),
        min_queue_polling_interval=timedelta(milliseconds=5),
        max_queue_polling_interval=timedelta(milliseconds=50),
    )


def expected_output() -> list[int]:
    return [i * 10 for i in range(STEPS)]


def main(db_path: str, instance_id: str) -> None:
    clock = SystemClock()
    store = open_sqlite_store(db_path, clock)
    engine = Engine(registry(), store=store, settings=settings(), clock=clock)
    if store.tracking.get_instance(instance_id) is None:
        engine.start_new("steps", instance_id=instance_id)
    engine.start()
    while True:  # until killed
        time.sleep(1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
