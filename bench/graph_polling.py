"""Issue 13, goal 3: how late does a Graph lane notice that its query finished, relative to the query's duration?

Graph queries run ``--latency`` + [0, ``--jitter``) seconds (a stable draw per window); the collector polls with
the production settings scaled down ``--scale`` times (30 s first poll, x1.5 back-off, 300 s ceiling; the adaptive
settings likewise). For each query the emulator logs when it turned succeeded and every status call
(``bench/api_timeline.py``): the **noticing delay** is the time from the query succeeding to the lane's next status
call, printed as a fraction of the query's running time (goal: <= 10%), with the status calls per query (each is a
timer, an activity and history events in the orchestration).

    .venv/bin/python bench/graph_polling.py [--chunks 24] [--k 4] [--latency 5] [--jitter 25]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.api_timeline import noticing_delays
from bench.quota import NO_DAILY_QUOTA, lift
from bench.window_busy import parse_app
from m365_emulator import AppRegistration, EmulatorConfig, TenantSpec, run_emulator
from tests.e2e.harness import CLIENT, REPO, SECRET, START, TENANT, body, serve


def polling_env(scale: float) -> dict[str, str]:
    """The production polling settings divided by ``scale`` (old and new names; each app reads what it knows)."""
    return {
        "COLLECTOR_POLL_INTERVAL_SECONDS": f"{30 / scale:g}",
        "COLLECTOR_POLL_BACKOFF": "1.5",
        "COLLECTOR_POLL_MAX_INTERVAL_SECONDS": f"{300 / scale:g}",
        "COLLECTOR_POLL_MIN_INTERVAL_SECONDS": f"{15 / scale:g}",
    }


def run_once(app: Path, args: argparse.Namespace) -> list[tuple[float, float, int]]:
    config = lift(EmulatorConfig(tenants=[TenantSpec(TENANT, seed=11, records_per_hour=100.0)]))
    config.graph.completion_delay_seconds = args.latency
    config.graph.completion_jitter_seconds = args.jitter
    config.graph.concurrency_retry_after_seconds = 0
    config.faults.broken_page_rate = 0.0
    with run_emulator(config) as emulator, tempfile.TemporaryDirectory() as workdir:
        emulator.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
        env = {**polling_env(args.scale), **NO_DAILY_QUOTA, "COLLECTOR_CHUNKS_PER_EXECUTION": "10000"}
        with serve(emulator, Path(workdir), env, app_dir=app) as host:
            end = START + timedelta(hours=args.chunks)
            response = host.post(body(end, interval=60, k=args.k, collectionId="bench-polling"))
            assert response.status_code == 202, response.text
            summary = host.wait("bench-polling", limit_seconds=3600)
        if summary["status"] != "Completed":
            raise SystemExit(f"{app}: collection ended {summary['status']}: {summary}")
        return noticing_delays(emulator.stats, TENANT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=24)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--latency", type=float, default=5.0, help="shortest query, seconds (5 minutes / 60)")
    parser.add_argument("--jitter", type=float, default=25.0, help="spread of query durations, seconds")
    parser.add_argument("--scale", type=float, default=60.0, help="production settings divided by this")
    parser.add_argument("--app", action="append", type=parse_app, help="LABEL=DIR of a checkout to run (repeatable)")
    parser.add_argument("--detail", action="store_true", help="also list the queries noticed later than 10%%")
    args = parser.parse_args()
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        os.environ.pop(name, None)
    apps = args.app or [("this", REPO)]

    print(
        f"{args.chunks} Graph chunks, K={args.k}, queries {args.latency:g}..{args.latency + args.jitter:g} s; "
        f"polling settings = production / {args.scale:g}"
    )
    print(
        f"{'app':>8} {'queries':>7} {'delay/duration median':>22} {'p90':>6} {'max':>6} "
        f"{'median delay':>12} {'status calls/query':>18}"
    )
    for label, app in apps:
        rows = run_once(app, args)
        fractions = sorted(delay / duration for duration, delay, _ in rows if duration > 0)
        p90 = fractions[min(len(fractions) - 1, int(0.9 * len(fractions)))]
        print(
            f"{label:>8} {len(rows):>7} {statistics.median(fractions):>22.1%} {p90:>6.1%} {max(fractions):>6.1%} "
            f"{statistics.median(d for _, d, _ in rows):>11.2f}s {statistics.mean(p for _, _, p in rows):>18.2f}",
            flush=True,
        )
        if args.detail:
            for duration, delay, polls in sorted(rows):
                if delay > 0.1 * duration:
                    late = f"{delay:4.2f} s late ({delay / duration:.0%})"
                    print(f"         ran {duration:5.2f} s, noticed {late}, {polls} checks")
    print("goal: noticing delay <= 10% of the query's duration")


if __name__ == "__main__":
    main()
