"""Issue 13, goal 2: how much lane time does continue-as-new cost? The same collection with and without switches.

For each source the same workload (heterogeneous latency, a stable draw per window, so the API does the same work in
both runs) runs twice on the local host in SHIM mode: once in one execution (``COLLECTOR_CHUNKS_PER_EXECUTION`` above
the chunk count) and once with a small execution budget (``--per-execution``), so it continues as new many times.

Lane idle time is ``K x steady span - area under API in-flight`` over the steady state (first chunk start to last
chunk start), from the emulator's event log (``bench/api_timeline.py``). The switching cost is the difference
between the two runs, printed per switch (lane-seconds), as a share of the lane time (K x steady span) of the run
with switches, and extrapolated to executions of ``--default-m`` chunks (per-switch cost x chunks / M over the lane
time of the run without switches). Graph lanes spend most of their time waiting for a running query; Exchange chunks
here take ``--exchange-calls`` InvokeCommand calls of 5,000 rows each.

    .venv/bin/python bench/switch_idle.py [--k 3] [--chunks 24] [--per-execution 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.api_timeline import WindowFigures, chunk_spans, window_figures
from bench.quota import NO_DAILY_QUOTA, lift
from bench.window_busy import POLL_ENV, parse_app
from m365_emulator import AppRegistration, EmulatorConfig, TenantSpec, run_emulator
from tests.e2e.harness import CLIENT, REPO, SECRET, START, TENANT, body, serve


def run_once(app: Path, source: str, per_execution: int, args: argparse.Namespace) -> tuple[WindowFigures, int]:
    """The window figures and the number of executions of one collection."""
    per_hour = args.graph_records if source == "graph" else args.exchange_records or 5000 * args.exchange_calls - 500
    config = lift(EmulatorConfig(tenants=[TenantSpec(TENANT, seed=7, records_per_hour=per_hour)]))
    config.graph.completion_delay_seconds = args.graph_latency
    config.graph.completion_jitter_seconds = args.graph_jitter
    config.graph.concurrency_retry_after_seconds = 0
    config.exchange.latency_seconds = args.exchange_latency
    config.exchange.latency_jitter_seconds = args.exchange_jitter
    config.exchange.max_concurrent_sessions = args.k
    config.exchange.concurrency_retry_after_seconds = 0
    config.faults.broken_page_rate = 0.0
    with run_emulator(config) as emulator, tempfile.TemporaryDirectory() as workdir:
        emulator.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
        env = {**POLL_ENV, **NO_DAILY_QUOTA, "COLLECTOR_CHUNKS_PER_EXECUTION": str(per_execution)}
        with serve(emulator, Path(workdir), env, app_dir=app) as host:
            end = START + timedelta(hours=args.chunks)
            response = host.post(body(end, interval=60, k=args.k, source=source, collectionId="bench-switch"))
            assert response.status_code == 202, response.text
            summary = host.wait("bench-switch", limit_seconds=3600)
        if summary["status"] != "Completed":
            raise SystemExit(f"{app} {source}: collection ended {summary['status']}: {summary}")
        executions = int(summary.get("progress", {}).get("execution") or 1)
        return window_figures(chunk_spans(emulator.stats, TENANT, source), args.k), executions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--chunks", type=int, default=24)
    parser.add_argument("--per-execution", type=int, default=3, help="the small execution budget")
    parser.add_argument("--default-m", type=int, default=20, help="COLLECTOR_CHUNKS_PER_EXECUTION to extrapolate to")
    parser.add_argument("--sources", nargs="+", default=["graph", "exchange"], choices=["graph", "exchange"])
    parser.add_argument("--graph-latency", type=float, default=2.0)
    parser.add_argument("--graph-jitter", type=float, default=6.0)
    parser.add_argument("--graph-records", type=float, default=300.0, help="records per hourly Graph chunk")
    parser.add_argument("--exchange-latency", type=float, default=0.5, help="seconds per InvokeCommand call")
    parser.add_argument("--exchange-jitter", type=float, default=1.5)
    parser.add_argument("--exchange-calls", type=int, default=2, help="5,000-row calls per Exchange chunk")
    parser.add_argument("--exchange-records", type=float, default=0, help="records per Exchange chunk (overrides)")
    parser.add_argument("--app", action="append", type=parse_app, help="LABEL=DIR of a checkout to run (repeatable)")
    args = parser.parse_args()
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        os.environ.pop(name, None)
    apps = args.app or [("this", REPO)]

    print(
        f"K={args.k}, {args.chunks} hourly chunks; one execution vs at most {args.per_execution} chunks started per "
        "execution; SHIM mode"
    )
    print(
        f"{'app':>8} {'source':>8} {'execs':>5} {'idle 1 exec':>11} {'idle switching':>14} "
        f"{'per switch':>10} {'share of lane time':>18} {'share at M=' + str(args.default_m):>14}"
    )
    for source in args.sources:
        for label, app in apps:
            single, _ = run_once(app, source, 10_000, args)
            many, executions = run_once(app, source, args.per_execution, args)
            extra = many.lane_idle - single.lane_idle
            switches = max(1, executions - 1)
            share = extra / (args.k * many.steady_span) if many.steady_span else 0.0
            at_default = (extra / switches) * (args.chunks / args.default_m) / (args.k * single.steady_span)
            print(
                f"{label:>8} {source:>8} {executions:>5} {single.lane_idle:>10.1f}s {many.lane_idle:>13.1f}s "
                f"{extra / switches:>9.2f}s {share:>18.1%} {at_default:>14.1%}",
                flush=True,
            )
    print("goal: idle lane time around continue-as-new <= 1% of lane time")


if __name__ == "__main__":
    main()
