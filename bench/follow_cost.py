"""Issue 20: what following a tenant costs per hour of its audit activity, at 1,000 and 100,000 records per hour.

Each rate runs the function app on the local host (SHIM mode, SQLite store) in a subprocess, on a clock it shares
with the emulator (an ``OffsetFileClock``), and starts a follower a little more than a day back (15-minute windows,
a wake every 15 minutes, K = 3, the tenant budget on). Once it has caught up, the clock moves 15 minutes at a time
for ``--hours`` simulated hours, waiting each time until the follower is idle again: its steady state, every cycle
reading the window that just closed the usual delay ago and reading again the one whose late-arrival band just
passed. Per simulated hour it prints:

* audit API calls the emulator answered (token requests not counted),
* orchestration work: episodes (invocations of the orchestrators and the budget entity, from the host's log) and
  history events written by the passes (rows of the passes' instances in the SQLite store) plus the follower's
  own (its current execution's rows, one cycle's, times the cycles),
* host CPU seconds (user + system of the host process, ``psutil``; the emulator runs in this process),
* records read (first reads and re-reads) and the wall time the host took per simulated hour,
* the follower's ``cycles`` and ``passes`` counters: a wake is one cycle (an execution that waits for its wake, runs
  the passes due, one per UTC day with work, and continues as new), so four wakes an hour are four cycles.

The tenant holds ``rate`` records per hour in the hours the measured cycles read (the new hours, and the same hours a
day earlier, which they read again); the other hours of the catch-up before them hold a hundredth of it, so setting
up a 100,000-records-per-hour run does not first read a whole day of it.

    .venv/bin/python bench/follow_cost.py [--rates 1000 100000] [--hours 3]
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psutil
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.quota import NO_DAILY_QUOTA, lift
from durable_local.clock import OffsetFileClock
from m365_emulator import AppRegistration, BurstWindow, EmulatorConfig, TenantSpec, run_emulator
from shared.models import iso, parse_iso
from tests.e2e.harness import CLIENT, SECRET, TENANT, Host, serve

STEP = timedelta(minutes=15)
DELAY = timedelta(minutes=90)
EPISODE = re.compile(r"Executed '(collect_orchestrator|follow_orchestrator|tenant_budget)'")
ACTIVITY = re.compile(r"Executed '(graph_\w+|finalize_activity)'")


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def frontier(start: datetime, now: datetime) -> datetime:
    return start + STEP * ((now - DELAY - start) // STEP)


def idle(host: Host, follow: str, covered: datetime, limit: float = 1800.0) -> dict[str, Any]:
    """Wait until the follower covers at least up to ``covered`` and waits for its next wake.

    At least, not exactly: the moved clock is the wall clock plus an offset, so real time runs on while the follower
    works, and a window boundary that passes meanwhile lets the follower (waking at it) cover one window more. A wait
    for the covered end to *equal* a frontier computed before would then never end."""
    deadline = time.monotonic() + limit
    found: dict[str, Any] = {}
    while time.monotonic() < deadline:
        found = requests.get(f"{host.base}/api/follows/{follow}", timeout=60).json()
        end = found.get("covered", {}).get("end")
        if end is not None and parse_iso(end) >= covered and found.get("running") is None:
            return found
        time.sleep(0.1)
    raise SystemExit(f"the follower never caught up to {iso(covered)}: {found}\n{host.log_tail()}")


def snapshot(host: Host, emulator: Any, store: Path, follow: str) -> dict[str, float]:
    log = host.log.read_text(errors="replace")
    with sqlite3.connect(store) as db:
        passes = db.execute(
            "SELECT count(*) FROM history WHERE instance_id LIKE ? AND instance_id != ?", (f"{follow}-%", follow)
        ).fetchone()[0]
        own = db.execute("SELECT count(*) FROM history WHERE instance_id = ?", (follow,)).fetchone()[0]
    return {
        "calls": float(emulator.stats.requests[(TENANT, "graph")]),
        "episodes": float(len(EPISODE.findall(log))),
        "activities": float(len(ACTIVITY.findall(log))),
        "pass_events": float(passes),
        "follower_events": float(own),
        "cpu": cpu_seconds(host.pid),
        "wall": time.monotonic(),
    }


def run_rate(rate: float, hours: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as workdir:
        work = Path(workdir)
        clock = OffsetFileClock(work / "clock")
        now = clock.now()
        start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=26)
        caught = frontier(start, now)
        measured = (caught - timedelta(hours=1), caught + timedelta(hours=hours + 1))  # whole hours, with a margin
        quiet = [
            (start, measured[0] - timedelta(days=1)),
            (measured[1] - timedelta(days=1), measured[0]),
        ]
        bursts = tuple(BurstWindow(a.replace(minute=0), b.replace(minute=0), 0.01) for a, b in quiet if b > a)
        config = lift(EmulatorConfig(tenants=[TenantSpec(TENANT, seed=5, records_per_hour=rate, bursts=bursts)]))
        config.graph.completion_delay_seconds = 0.05
        config.graph.concurrency_retry_after_seconds = 0
        config.faults.broken_page_rate = 0.0
        store = work / "hub.sqlite"
        with run_emulator(config, clock=clock.now) as emulator:
            emulator.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
            with serve(
                emulator,
                work,
                {**NO_DAILY_QUOTA, "COLLECTOR_CHUNKS_PER_EXECUTION": ""},
                clock_file=clock.path,
                store=str(store),
            ) as host:
                body = {
                    "tenantId": TENANT,
                    "startDate": iso(start),
                    "intervalMinutes": 15,
                    "everyMinutes": 15,
                    "maxConcurrency": 3,
                }
                answer = requests.post(f"{host.base}/api/follows", json=body, timeout=60)
                assert answer.status_code == 202, answer.text
                follow = answer.json()["followId"]
                idle(host, follow, frontier(start, clock.now()))
                clock.advance(STEP)  # one cycle before measuring, so the first measured one is a steady one
                idle(host, follow, frontier(start, clock.now()))
                first_window = frontier(start, clock.now())
                before = snapshot(host, emulator, store, follow)
                counted = requests.get(f"{host.base}/api/follows/{follow}", timeout=60).json()
                for _ in range(hours * 4):
                    clock.advance(STEP)
                    idle(host, follow, frontier(start, clock.now()))
                after = snapshot(host, emulator, store, follow)
                summary = requests.get(f"{host.base}/api/follows/{follow}", timeout=60).json()
                cycles = summary["cycles"] - counted["cycles"]
                passes = summary["passes"] - counted["passes"]
                last_window = frontier(start, clock.now())
            first_reads = len(emulator.ground_truth_ids(TENANT, first_window, last_window))
            rereads = len(
                emulator.ground_truth_ids(TENANT, first_window - timedelta(days=1), last_window - timedelta(days=1))
            )
    per = {key: (after[key] - before[key]) / hours for key in before}
    per["follower_events"] = after["follower_events"] * cycles / hours  # one cycle's rows, every cycle
    per["events"] = per["pass_events"] + per["follower_events"]
    per["records"] = (first_reads + rereads) / hours
    per["cycles"] = cycles / hours
    per["passes"] = passes / hours
    return per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", type=float, nargs="+", default=[1000.0, 100000.0])
    parser.add_argument("--hours", type=int, default=3, help="simulated hours measured at each rate")
    args = parser.parse_args()
    results = {rate: run_rate(rate, args.hours) for rate in args.rates}
    print(f"per simulated hour of tenant activity ({args.hours} h measured at each rate, 15-minute windows)")
    header = [
        "records/h",
        "records read",
        "cycles",
        "passes",
        "API calls",
        "activities",
        "episodes",
        "history events",
        "host CPU s",
        "wall s",
    ]
    print(" | ".join(header))
    for rate, per in results.items():
        row = [
            per["records"],
            per["cycles"],
            per["passes"],
            per["calls"],
            per["activities"],
            per["episodes"],
            per["events"],
            per["cpu"],
            per["wall"],
        ]
        print(f"{rate:,.0f} | " + " | ".join(f"{value:,.2f}" for value in row))
    if len(results) == 2:
        (low, a), (high, b) = sorted(results.items())
        print(
            f"ratio {high:,.0f} / {low:,.0f} records/h: records read {b['records'] / a['records']:.1f}x, "
            f"API calls {b['calls'] / a['calls']:.2f}x, history events {b['events'] / a['events']:.2f}x, "
            f"host CPU {b['cpu'] / a['cpu']:.1f}x; CPU per 1,000 records read "
            f"{1000 * a['cpu'] / a['records']:.3f} s vs {1000 * b['cpu'] / b['records']:.3f} s"
        )


if __name__ == "__main__":
    main()
