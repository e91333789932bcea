"""Issue 13, goal 1: does the sliding window keep K chunks busy at the API? Graph and Exchange, K side by side.

Each run: a fresh emulator whose chunks have heterogeneous latency (a stable draw per window: Graph queries run
``--graph-latency`` + [0, ``--graph-jitter``) seconds; every Exchange call of a window takes ``--exchange-latency`` +
[0, ``--exchange-jitter``)), the function app on the local host in SHIM mode, one collection of ``--chunks`` hourly
chunks in one execution (no continue-as-new inside the run: that is ``switch_idle.py``). Polling uses the production
ratios scaled down 60x (30 s -> 0.5 s first poll, 300 s -> 5 s ceiling), like the query latencies.

Measured from the emulator's own event log (``bench/api_timeline.py`` defines each quantity):

* ``busy``: mean API in-flight / K over the steady state (goal: >= 0.95);
* ``makespan / bound``: first API call to last, over max(sum(d)/K, max(d)) where d is each chunk's API-busy time
  (goal: <= 1.05);
* the median refill gap (a chunk ends -> the next starts in its lane);
* ``greedy / bound``: the tail no online scheduler avoids with these chunks (the zero-gap greedy schedule of the same
  d in the same order), and ``makespan / greedy``: what this scheduler adds to it.

``--app LABEL=DIR`` runs another checkout of this repository (e.g. ``--app before=/tmp/base --app after=.``) so a
before/after comparison is measured side by side in one run.

    .venv/bin/python bench/window_busy.py [--ks 2 3 5] [--sources graph exchange] [--chunks 32]
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
from m365_emulator import AppRegistration, EmulatorConfig, TenantSpec, run_emulator
from tests.e2e.harness import CLIENT, REPO, SECRET, START, TENANT, body, serve

POLL_ENV = {
    # Production: 30 s first poll, x1.5, at most 300 s, for queries that run minutes. Scaled down 60x.
    "COLLECTOR_POLL_INTERVAL_SECONDS": "0.5",
    "COLLECTOR_POLL_BACKOFF": "1.5",
    "COLLECTOR_POLL_MAX_INTERVAL_SECONDS": "5",
    "COLLECTOR_POLL_MIN_INTERVAL_SECONDS": "0.5",
}


def parse_app(text: str) -> tuple[str, Path]:
    label, _, folder = text.partition("=")
    if not folder:
        label, folder = Path(text).name or "app", text
    return label, Path(folder).resolve()


def run_once(app: Path, source: str, k: int, args: argparse.Namespace) -> WindowFigures:
    config = lift(EmulatorConfig(tenants=[TenantSpec(TENANT, seed=5, records_per_hour=args.records_per_hour)]))
    config.graph.completion_delay_seconds = args.graph_latency
    config.graph.completion_jitter_seconds = args.graph_jitter
    config.graph.concurrency_retry_after_seconds = 0
    config.exchange.latency_seconds = args.exchange_latency
    config.exchange.latency_jitter_seconds = args.exchange_jitter
    config.exchange.max_concurrent_sessions = k
    config.exchange.concurrency_retry_after_seconds = 0
    config.faults.broken_page_rate = 0.0
    with run_emulator(config) as emulator, tempfile.TemporaryDirectory() as workdir:
        emulator.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
        env = {**POLL_ENV, **NO_DAILY_QUOTA, "COLLECTOR_CHUNKS_PER_EXECUTION": "10000"}
        with serve(emulator, Path(workdir), env, app_dir=app) as host:
            end = START + timedelta(hours=args.chunks)
            response = host.post(body(end, interval=60, k=k, source=source, collectionId="bench-window"))
            assert response.status_code == 202, response.text
            summary = host.wait("bench-window", limit_seconds=3600)
        if summary["status"] != "Completed":
            raise SystemExit(f"{app} {source} K={k}: collection ended {summary['status']}: {summary}")
        return window_figures(chunk_spans(emulator.stats, TENANT, source), k)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ks", type=int, nargs="+", default=[2, 3, 5])
    parser.add_argument("--sources", nargs="+", default=["graph", "exchange"], choices=["graph", "exchange"])
    parser.add_argument("--chunks", type=int, default=32)
    parser.add_argument("--graph-latency", type=float, default=2.0)
    parser.add_argument("--graph-jitter", type=float, default=6.0)
    parser.add_argument("--exchange-latency", type=float, default=1.0)
    parser.add_argument("--exchange-jitter", type=float, default=3.0)
    parser.add_argument("--records-per-hour", type=float, default=300.0)
    parser.add_argument("--app", action="append", type=parse_app, help="LABEL=DIR of a checkout to run (repeatable)")
    args = parser.parse_args()
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        os.environ.pop(name, None)
    apps = args.app or [("this", REPO)]

    print(
        f"{args.chunks} hourly chunks, one execution, SHIM mode; Graph queries {args.graph_latency:g}.."
        f"{args.graph_latency + args.graph_jitter:g} s, Exchange calls {args.exchange_latency:g}.."
        f"{args.exchange_latency + args.exchange_jitter:g} s"
    )
    print(
        f"{'app':>8} {'source':>8} {'K':>2} {'busy':>6} {'makespan':>9} {'bound':>7} {'ratio':>6} "
        f"{'greedy/bound':>12} {'makespan/greedy':>15} {'median gap':>11} {'mean d':>7}"
    )
    for source in args.sources:
        for k in args.ks:
            for label, app in apps:
                f = run_once(app, source, k, args)
                print(
                    f"{label:>8} {source:>8} {k:>2} {f.busy_fraction:>6.1%} {f.makespan:>8.1f}s {f.bound:>6.1f}s "
                    f"{f.makespan_ratio:>6.3f} {f.greedy / f.bound:>12.3f} {f.makespan / f.greedy:>15.3f} "
                    f"{f.median_gap:>10.2f}s {f.sum_d / f.chunks:>6.2f}s",
                    flush=True,
                )
    print("goal: busy >= 95.0%, ratio (makespan / max(sum d / K, max d)) <= 1.05")


if __name__ == "__main__":
    main()
