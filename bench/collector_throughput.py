"""Collector throughput for K=1 vs K=3 vs K=5, side by side, through the real stack.

Each run: a fresh M365 emulator (Graph queries with a per-query latency of ``--latency`` + [0, ``--jitter``) seconds),
the function app on ``python -m durable_local serve`` (SHIM mode), one collection of ``--chunks`` chunks. Prints
chunks/s and records/s per K and the ratio to K=1. The ideal ratio is K (the server does the waiting); the gap to it
is orchestration overhead per chunk turn and the continue-as-new drain every ``--per-execution`` chunks.

    .venv/bin/python bench/collector_throughput.py --chunks 15 --ks 1 3 5
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.quota import NO_DAILY_QUOTA, lift
from m365_emulator import AppRegistration, EmulatorConfig, TenantSpec, run_emulator
from tests.e2e.harness import CLIENT, SECRET, START, TENANT, body, serve


def run_once(k: int, args: argparse.Namespace) -> tuple[float, int, int]:
    """(seconds, chunks, records) of one collection with concurrency ``k``."""
    config = lift(EmulatorConfig(tenants=[TenantSpec(TENANT, seed=5, records_per_hour=args.records_per_hour)]))
    config.graph.completion_delay_seconds = args.latency
    config.graph.completion_jitter_seconds = args.jitter
    with run_emulator(config) as emulator, tempfile.TemporaryDirectory() as workdir:
        emulator.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
        env = {
            **NO_DAILY_QUOTA,
            "COLLECTOR_CHUNKS_PER_EXECUTION": str(args.per_execution),
            "COLLECTOR_POLL_INTERVAL_SECONDS": str(args.poll),
            "COLLECTOR_POLL_MAX_INTERVAL_SECONDS": str(args.poll * 2),
        }
        with serve(emulator, Path(workdir), env) as host:
            end = START + timedelta(hours=args.chunks)
            began = time.monotonic()
            response = host.post(body(end, interval=60, k=k, collectionId=f"bench-k{k}"))
            assert response.status_code == 202, response.text
            summary = host.wait(f"bench-k{k}", limit_seconds=3600)
            elapsed = time.monotonic() - began
        if summary["status"] != "Completed":
            raise SystemExit(f"K={k}: collection ended {summary['status']}: {summary}")
        return elapsed, int(summary["progress"]["completed"]), int(summary["records"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=15)
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 3, 5])
    parser.add_argument("--latency", type=float, default=1.0, help="base Graph query latency, seconds")
    parser.add_argument("--jitter", type=float, default=1.0, help="extra per-query latency in [0, jitter)")
    parser.add_argument("--poll", type=float, default=0.25, help="COLLECTOR_POLL_INTERVAL_SECONDS")
    parser.add_argument("--per-execution", type=int, default=50, help="COLLECTOR_CHUNKS_PER_EXECUTION")
    parser.add_argument("--records-per-hour", type=float, default=200.0)
    args = parser.parse_args()
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        os.environ.pop(name, None)

    results = {k: run_once(k, args) for k in args.ks}
    base_seconds, _, _ = results[args.ks[0]]
    print(f"{args.chunks} chunks, query latency {args.latency}..{args.latency + args.jitter} s, SHIM mode")
    print(f"{'K':>3} {'seconds':>8} {'chunks/s':>9} {'records/s':>10} {'speed-up':>9} {'of ideal':>9}")
    for k, (seconds, chunks, records) in results.items():
        speedup = base_seconds / seconds
        ideal = k / args.ks[0]
        print(
            f"{k:>3} {seconds:>8.2f} {chunks / seconds:>9.2f} {records / seconds:>10.0f} "
            f"{speedup:>8.2f}x {speedup / ideal:>8.0%}"
        )


if __name__ == "__main__":
    main()
