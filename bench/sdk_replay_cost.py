"""SDK replay cost per orchestrator episode: dateutil vs the fast history-timestamp parser, side by side.

Records the context JSON of every episode of one real collection (Graph, SHIM mode, replayed by ``durable_local.replay``
with the activity bodies over fakes), picks episodes at several history lengths, then times the collector's
orchestrator handle (the SDK's whole call: JSON parse, HistoryEvent construction, replay, actions JSON) on each, with
``dateutil`` and with ``shared.hosting.sdk_timestamps``, interleaved so both see the same machine state. Prints the mean
per call and the ratio.

    .venv/bin/python bench/sdk_replay_cost.py [--chunks 120] [--repeat 20]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dateutil.parser import parse as dateutil_parse

from shared.hosting import sdk_timestamps
from shared.sinks.memory import MemorySink
from tests.collector.fakes import FakeQueryApi, synthetic
from tests.collector.replay_driver import ReplayDriver, orchestrator_handle
from tests.collector.test_orchestrator_replay import START, graph_activities, payload


def record_contexts(chunks: int) -> list[str]:
    handle = orchestrator_handle()
    contexts: list[str] = []

    def recording(context_json: str) -> str:
        contexts.append(context_json)
        return handle(context_json)

    api = FakeQueryApi(synthetic(START, hours=chunks, per_hour=5), polls_until_done=2)
    driver = ReplayDriver(recording, graph_activities(api, MemorySink()), seed=1)
    driver.start(payload("graph", hours=chunks, k=3, m=100_000, poll_interval_seconds=5.0))
    driver.run(max_steps=10_000_000)
    return contexts


def time_call(handle: object, context_json: str, repeat: int) -> float:
    began = time.perf_counter()
    for _ in range(repeat):
        handle(context_json)  # type: ignore[operator]
    return (time.perf_counter() - began) / repeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=120, help="chunks in the recorded collection (history length)")
    parser.add_argument("--repeat", type=int, default=20, help="calls per measurement")
    args = parser.parse_args()

    contexts = record_contexts(args.chunks)
    by_length = sorted(contexts, key=lambda c: len(json.loads(c)["history"]))
    lengths = [len(json.loads(c)["history"]) for c in by_length]
    picks = sorted({min(len(by_length) - 1, int(q * (len(by_length) - 1))) for q in (0.1, 0.25, 0.5, 0.75, 1.0)})

    handle = orchestrator_handle()
    module = importlib.import_module(sdk_timestamps.HISTORY_EVENT_MODULE)
    print(f"one Graph collection of {args.chunks} chunks, K=3, one execution: {len(contexts)} episodes")
    print(f"{'events':>7} {'dateutil ms':>12} {'fast ms':>8} {'ratio':>6}")
    totals = [0.0, 0.0]
    for index in picks:
        context_json = by_length[index]
        slow = fast = 0.0
        for _ in range(3):  # interleave, so drift on a shared machine hits both alike
            module.dt_parse = dateutil_parse
            slow += time_call(handle, context_json, args.repeat)
            module.dt_parse = sdk_timestamps.parse_history_timestamp
            fast += time_call(handle, context_json, args.repeat)
        totals[0] += slow
        totals[1] += fast
        print(f"{lengths[index]:>7} {slow / 3 * 1000:>12.2f} {fast / 3 * 1000:>8.2f} {slow / fast:>5.2f}x")
    print(f"all picked episodes: {totals[0] / totals[1]:.2f}x less time in the SDK call with the fast parser")


if __name__ == "__main__":
    main()
