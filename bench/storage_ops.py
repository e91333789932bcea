"""Storage throughput, memory vs SQLite side by side: enqueue, dequeue, delete, history batch writes.

Run: ``.venv/bin/python bench/storage_ops.py [--messages N] [--batches N] [--batch-size N] [--synchronous FULL]``
Prints operations per second for each backend and the memory/SQLite ratio. Numbers depend on the machine
and the file system; compare ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

# Runnable as a plain script from anywhere: put the repository root on the path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from durable_local.clock import SystemClock
from durable_local.model import TaskMessage
from durable_local.ports import HistoryBatch
from durable_local.storage import StoreBundle, open_memory_store, open_sqlite_store


def _timed(fn: Callable[[], int]) -> float:
    start = time.perf_counter()
    ops = fn()
    return ops / max(time.perf_counter() - start, 1e-9)


def measure(store: StoreBundle, messages: int, batches: int, batch_size: int) -> dict[str, float]:
    queue = store.queues.get_queue("bench-control-00")
    taken = []

    def enqueue() -> int:
        for n in range(messages):
            queue.add(TaskMessage(f"inst{n % 50}", "e", {"EventType": 5, "EventId": -1, "TaskScheduledId": n}, n))
        return messages

    def dequeue() -> int:
        while got := queue.get_messages(32, timedelta(minutes=5)):
            taken.extend(got)
        return len(taken)

    def delete() -> int:
        for m in taken:
            queue.delete(m.message_id, m.pop_receipt)
        return len(taken)

    def history() -> int:
        etags: dict[str, str | None] = {}
        lengths: dict[str, int] = {}
        for b in range(batches):
            iid = f"inst{b % 20}"
            first = lengths.get(iid, 0)
            events = [
                {"EventType": 4, "EventId": first + i, "Name": "act", "Input": "x" * 200} for i in range(batch_size)
            ]
            etags[iid] = store.tracking.write_history_batch(
                HistoryBatch(iid, "e", first, events, is_final_batch=True), etags.get(iid)
            )
            lengths[iid] = first + batch_size
        return batches

    return {
        "enqueue msg/s": _timed(enqueue),
        "dequeue msg/s (32/call)": _timed(dequeue),
        "delete msg/s": _timed(delete),
        f"history batches/s ({batch_size} ev)": _timed(history),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=10)
    parser.add_argument("--synchronous", default="NORMAL", help="SQLite synchronous pragma (NORMAL or FULL)")
    args = parser.parse_args()
    clock = SystemClock()
    with tempfile.TemporaryDirectory() as tmp:
        with open_memory_store(clock) as memory:
            mem = measure(memory, args.messages, args.batches, args.batch_size)
        with open_sqlite_store(Path(tmp) / "bench.db", clock, synchronous=args.synchronous) as sqlite:
            sql = measure(sqlite, args.messages, args.batches, args.batch_size)
    print(f"{'operation':34} {'memory':>12} {'sqlite':>12} {'memory/sqlite':>14}")
    for key in mem:
        print(f"{key:34} {mem[key]:12.0f} {sql[key]:12.0f} {mem[key] / sql[key]:13.1f}x")
    print(f"(sqlite synchronous={args.synchronous.upper()}, {args.messages} messages, {args.batches} batches)")


if __name__ == "__main__":
    main()
