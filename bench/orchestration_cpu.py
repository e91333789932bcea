"""Issue 13, goal 4: host CPU per chunk at N = 250 and N = 2,000 chunks on a zero-latency emulator.

Each run serves the function app on the local host (SHIM mode, memory store) in a subprocess and measures that
process's CPU time (user + system, ``psutil``) from the POST to the collection's end: the orchestrator episodes (the
SDK replay and the engine's own work), the activities (HTTPS to the emulator, writing the output folder) and the
host's HTTP server. The emulator runs in this process and is not counted. Queries finish at once and chunks are small,
so the figure is the per-chunk orchestration overhead. It prints CPU ms per chunk for each N and the ratio
N = 2,000 / N = 250 (goal: <= 1.3), and with two ``--app`` checkouts the ratio between them at each N (goal: >= 3x).

    .venv/bin/python bench/orchestration_cpu.py [--ns 250 2000] [--app before=/tmp/base --app after=.]
        [--app budget-off=. --set budget-off:COLLECTOR_BUDGET_GRAPH=0]

``--set LABEL:NAME=VALUE`` gives one app's host an extra setting (the tenant budget is on by default: B = 6 for
Graph, 3 for Exchange; the daily Graph quota is lifted, ``bench/quota.py``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.quota import NO_DAILY_QUOTA, lift
from bench.window_busy import parse_app
from m365_emulator import AppRegistration, EmulatorConfig, TenantSpec, run_emulator
from tests.e2e.harness import CLIENT, REPO, SECRET, START, TENANT, body, serve
from tests.support.hosted_profile import GUARDED


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def run_once(
    app: Path, n: int, args: argparse.Namespace, extra: dict[str, str] | None = None
) -> tuple[float, float, dict[str, object]]:
    """(host CPU seconds, wall seconds, summary) of one collection of ``n`` chunks."""
    config = lift(EmulatorConfig(tenants=[TenantSpec(TENANT, seed=3, records_per_hour=args.records_per_hour)]))
    config.graph.completion_delay_seconds = 0.0
    config.graph.concurrency_retry_after_seconds = 0
    config.exchange.max_concurrent_sessions = args.k
    config.exchange.concurrency_retry_after_seconds = 0
    config.faults.broken_page_rate = 0.0
    env = {
        **NO_DAILY_QUOTA,
        "COLLECTOR_POLL_INTERVAL_SECONDS": "0.05",
        "COLLECTOR_POLL_MIN_INTERVAL_SECONDS": "0.05",
        "COLLECTOR_POLL_MAX_INTERVAL_SECONDS": "0.2",
        "COLLECTOR_MAX_CHUNKS": "100000",
        # Empty = the app's own default (the test harness sets a small one).
        "COLLECTOR_CHUNKS_PER_EXECUTION": str(args.per_execution) if args.per_execution else "",
        **(extra or {}),
    }
    with run_emulator(config) as emulator, tempfile.TemporaryDirectory() as workdir:
        emulator.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
        guarded = {name: value for name, value in env.items() if name in GUARDED}  # e.g. the budget off: a deviation
        plain = {name: value for name, value in env.items() if name not in GUARDED}
        with serve(emulator, Path(workdir), plain, app_dir=app, deviations=guarded) as host:
            time.sleep(1.0)  # let start-up settle before the clock starts
            cpu_before = cpu_seconds(host.pid)
            began = time.monotonic()
            end = START + timedelta(hours=n)
            response = host.post(body(end, interval=60, k=args.k, source=args.source, collectionId="bench-cpu"))
            assert response.status_code == 202, response.text
            summary = host.wait("bench-cpu", limit_seconds=7200)
            wall = time.monotonic() - began
            cpu = cpu_seconds(host.pid) - cpu_before
        if summary["status"] != "Completed":
            raise SystemExit(f"{app} N={n}: collection ended {summary['status']}: {summary}")
        return cpu, wall, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ns", type=int, nargs="+", default=[250, 2000])
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--source", default="graph", choices=["graph", "exchange"])
    parser.add_argument("--records-per-hour", type=float, default=20.0)
    parser.add_argument("--per-execution", type=int, default=0, help="COLLECTOR_CHUNKS_PER_EXECUTION (0: default)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (app, N), interleaved; the median counts")
    parser.add_argument("--app", action="append", type=parse_app, help="LABEL=DIR of a checkout to run (repeatable)")
    parser.add_argument("--set", action="append", default=[], help="LABEL:NAME=VALUE, a setting for one app")
    args = parser.parse_args()
    settings: dict[str, dict[str, str]] = {}
    for item in args.set:
        label, _, assignment = item.partition(":")
        name, _, value = assignment.partition("=")
        settings.setdefault(label, {})[name] = value
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        os.environ.pop(name, None)
    apps = args.app or [("this", REPO)]

    print(f"{args.source}, K={args.k}, zero-latency emulator, {args.records_per_hour:g} records per chunk")
    print(f"{'app':>8} {'N':>6} {'CPU s':>8} {'wall s':>8} {'CPU ms/chunk':>13} {'chunks/s':>9} {'executions':>10}")
    runs: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.repeat):
        for n in args.ns:
            for label, app in apps:
                cpu, wall, summary = run_once(app, n, args, settings.get(label))
                runs.setdefault((label, n), []).append(cpu / n)
                executions = summary.get("progress", {}).get("execution")  # type: ignore[union-attr]
                print(
                    f"{label:>8} {n:>6} {cpu:>8.1f} {wall:>8.1f} {1000 * cpu / n:>13.1f} {n / wall:>9.2f} "
                    f"{executions!s:>10}",
                    flush=True,
                )
    per_chunk = {key: statistics.median(values) for key, values in runs.items()}
    if args.repeat > 1:
        for (label, n), value in per_chunk.items():
            print(f"{label} N={n}: median {1000 * value:.1f} ms per chunk over {args.repeat} runs")
    small, large = min(args.ns), max(args.ns)
    for label, _ in apps:
        if small != large:
            ratio = per_chunk[(label, large)] / per_chunk[(label, small)]
            print(f"{label}: per-chunk CPU at N={large} / N={small} = {ratio:.2f} (goal <= 1.3)")
    if len(apps) >= 2:
        first, _ = apps[0]
        for second, _ in apps[1:]:
            for n in args.ns:
                ratio = per_chunk[(first, n)] / per_chunk[(second, n)]
                print(f"N={n}: {first} / {second} = {ratio:.2f}x CPU per chunk")
    print("goal: >= 3x less host CPU per chunk than before at N=2,000")


if __name__ == "__main__":
    main()
