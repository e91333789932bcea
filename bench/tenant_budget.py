"""Several collections on one tenant vs one alone: total makespan and the audit API's peak concurrency, side by side,
with the tenant budget off (``COLLECTOR_BUDGET_<SOURCE>=0``: each collection only caps itself at K) and on (B).

Each scenario gets a fresh M365 emulator whose per-tenant concurrency limit is ``--server-limit`` (default: the
tenant budget B of the source, which is what the real service allows) and a fresh local host (SHIM mode). Scenario
``n`` starts ``n`` collections at once, each at K = B over its own ``--chunks`` hours of the same tenant, and waits
for all of them; every scenario runs with the budget off and on, interleaved. Printed per scenario:

* makespan: from the first POST until the last collection ended; chunks/s over all collections, and that rate as a
  fraction of one collection alone (the tenant's API is the bottleneck, so the ideal is 100%: more collections
  share the same slots, they do not add any);
* peak: the most requests in flight at once for (tenant, source) as the emulator counted them (Exchange: calls in
  flight; Graph: unfinished queries); it never exceeds the server's limit, which answers the excess with 429;
* 429s: concurrency 429s the emulator served, i.e. requests the collector sent beyond the tenant's limit;
* failed: chunks that failed (e.g. still throttled after every retry), not counted in chunks/s.

    .venv/bin/python bench/tenant_budget.py --source exchange --chunks 6 --collections 1 2 3 [--modes off on]
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
from shared.settings import Settings
from tests.e2e.harness import CLIENT, SECRET, START, TENANT, body, serve


def run_scenario(collections: int, budget: int, mode: str, args: argparse.Namespace) -> dict[str, float]:
    config = lift(EmulatorConfig(tenants=[TenantSpec(TENANT, seed=5, records_per_hour=args.records_per_hour)]))
    limit = args.server_limit or budget
    config.graph.completion_delay_seconds = args.latency
    config.graph.completion_jitter_seconds = args.jitter
    config.graph.max_concurrent_queries = limit
    config.exchange.latency_seconds = args.latency / 2  # a small chunk is one InvokeCommand call
    config.exchange.latency_jitter_seconds = args.jitter / 2
    config.exchange.max_concurrent_sessions = limit
    config.graph.concurrency_retry_after_seconds = 0
    config.exchange.concurrency_retry_after_seconds = 0
    with run_emulator(config) as emulator, tempfile.TemporaryDirectory() as workdir:
        emulator.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
        env = {
            **NO_DAILY_QUOTA,
            "COLLECTOR_POLL_INTERVAL_SECONDS": str(args.poll),
            "COLLECTOR_POLL_MAX_INTERVAL_SECONDS": str(args.poll * 2),
            "COLLECTOR_BUDGET_POLL_SECONDS": str(args.poll),
            "COLLECTOR_MAX_CONCURRENCY": str(max(budget, 10)),
        }
        setting = f"COLLECTOR_BUDGET_{args.source.upper()}"
        on, off = {setting: str(budget)}, {setting: "0"}  # off: a deviation from the hosted profile, said as one
        with serve(
            emulator, Path(workdir), {**env, **on} if mode == "on" else env, deviations=None if mode == "on" else off
        ) as host:
            ids = [f"bench-{mode}-{collections}-{i}" for i in range(collections)]
            began = time.monotonic()
            for index, collection_id in enumerate(ids):
                start = START + timedelta(hours=index * args.chunks)
                request = body(
                    start + timedelta(hours=args.chunks),
                    start=start,
                    interval=60,
                    k=budget,
                    source=args.source,
                    collectionId=collection_id,
                )
                response = host.post(request)
                assert response.status_code == 202, response.text
            summaries = [host.wait(collection_id, limit_seconds=3600) for collection_id in ids]
            makespan = time.monotonic() - began
        key = (TENANT, args.source)
        return {
            "makespan": makespan,
            "chunks": float(sum(int(s["progress"]["completed"]) for s in summaries)),
            "failed": float(sum(int(s["progress"]["failed"]) for s in summaries)),
            "peak": float(emulator.stats.peak_concurrency[key]),
            "throttled": float(emulator.stats.concurrency_429[key]),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", choices=["exchange", "graph"], default="exchange")
    parser.add_argument("--chunks", type=int, default=6, help="one-hour chunks per collection")
    parser.add_argument("--collections", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--latency", type=float, default=1.0, help="base server latency per chunk, seconds")
    parser.add_argument("--jitter", type=float, default=1.0, help="extra per-chunk latency in [0, jitter)")
    parser.add_argument("--poll", type=float, default=0.2, help="COLLECTOR_POLL_* and COLLECTOR_BUDGET_POLL_SECONDS")
    parser.add_argument("--server-limit", type=int, default=0, help="the emulator's per-tenant limit (0 = B)")
    parser.add_argument("--records-per-hour", type=float, default=200.0)
    parser.add_argument("--modes", nargs="+", choices=["off", "on"], default=["off", "on"], help="tenant budget")
    args = parser.parse_args()
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        os.environ.pop(name, None)

    budget = Settings.from_env(os.environ).budget(args.source).capacity or 3
    results = {(n, mode): run_scenario(n, budget, mode, args) for n in args.collections for mode in args.modes}
    print(
        f"{args.source}: B = K = {budget}, server limit {args.server_limit or budget}, {args.chunks} chunks per "
        f"collection, latency {args.latency}..{args.latency + args.jitter} s per chunk, SHIM mode"
    )
    print(
        f"{'budget':>6} {'collections':>11} {'makespan s':>10} {'chunks/s':>9} {'vs alone':>9} {'peak':>5} "
        f"{'429s':>6} {'failed':>7}"
    )
    for mode in args.modes:
        alone = results[(args.collections[0], mode)]
        base_rate = alone["chunks"] / alone["makespan"]
        for n in args.collections:
            r = results[(n, mode)]
            rate = r["chunks"] / r["makespan"]
            print(
                f"{mode:>6} {n:>11} {r['makespan']:>10.2f} {rate:>9.2f} {rate / base_rate:>8.0%} {r['peak']:>5.0f} "
                f"{r['throttled']:>6.0f} {r['failed']:>7.0f}"
            )


if __name__ == "__main__":
    main()
