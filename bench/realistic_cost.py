"""Issue 28: what one chunk costs as deployed: Graph queries of 30 s to minutes, the tenant budget on with its secret.

Each run serves a checkout's function app on the local host (SHIM mode, memory store) in a subprocess and collects
``--chunks`` hourly chunks at K = ``--k`` from the emulator, whose Graph queries take ``--graph-latency`` +
[0, ``--graph-jitter``) seconds (a stable draw per chunk; by default 30 s to 5 minutes) and whose Exchange calls take
``--exchange-latency`` + [0, ``--exchange-jitter``) seconds. The app runs with its default settings (polling from 30 s,
the budget's 10 s poll, 600 s lease, 20 chunk starts per execution) and ``COLLECTOR_BUDGET_SECRET`` set, as deployed.

**Time runs up to ``--speed`` times faster** (20 by default), so a run of half an hour takes a few minutes. The host,
the app and the emulator share an ``OffsetFileClock`` that a thread here moves forward by ``speed - 1`` seconds every
real second (in steps of ``--tick``) while the host process is idle: durable timers, the budget's poll and lease,
query completion (the emulator's Graph queries read that clock), the app's slot deadlines all see minutes pass, and
the settings keep their deployed values. What this preserves is every duration the collector compares: a query's
running time against the poll interval and the budget's 10 s poll (chunks run 3 to 30 polls), the lease against its
renewal. While the host works (it used more than ``--busy`` of a core in the last tick) time runs at its real rate,
so the host's own latency is not multiplied by the speed: on a loaded machine an entity round trip of half a second
would otherwise be ten seconds of collector time, a whole budget poll, and episodes would batch more messages than
they do on a real host. An Exchange call is a real wait in the emulator, so its latency is given in collector seconds
and slept ``1/speed`` of it.

Per run it prints, per chunk: host CPU (user + system of the host process, ``psutil``, from the POST to the end; the
idle host's own polling, measured for two seconds before the POST, taken off in ``net ms``; and per episode,
orchestration and entity, ``CPU/ep.``: the number of episodes moves between runs, see below), orchestration episodes,
past events the episodes replayed, entity episodes and entity operations, audit API calls; and per Graph query, its
status checks (``checks/q.``) and how late the collector noticed it finished (``notice s``: from the moment the
emulator turned it succeeded to the first status call after it, in collector seconds; ``notice %``: that delay as a
share of the query's running time), what fewer episodes must not cost (``Noticing``). The engine counts them
(``GET /admin/host/stats``); a checkout older than that route runs with ``bench/engine_probe`` on its path, which counts
the same things from outside. ``--app LABEL=DIR`` runs another checkout (repeatable), ``--set LABEL:NAME=VALUE`` gives
one a setting, e.g. the budget off::

    .venv/bin/python bench/realistic_cost.py --app old=/tmp/bench-main --app new=. \\
        --app old-off=/tmp/bench-main --app new-off=. \\
        --set old-off:COLLECTOR_BUDGET_GRAPH=0 --set new-off:COLLECTOR_BUDGET_GRAPH=0

Ratios of the medians follow the table: each label against the first, or the pairs ``--ratio A/B`` names (e.g.
``--ratio old/new --ratio new/new-off``).

**The episodes per chunk move between runs of the same code** (e.g. 15.7 to 18.5): how many status checks a query gets
depends on when its lane started it and on the running times the collection learned from the queries that finished
before (the first check comes at 0.9 x the shortest of the last eight), so on timing. Use ``--repeat`` (runs are
interleaved) and read ``CPU/ep.`` beside the per-chunk figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import psutil
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.orchestration_cpu import cpu_seconds
from bench.quota import steady
from bench.window_busy import parse_app
from durable_local.clock import OffsetFileClock
from m365_emulator import AppRegistration, EmulatorConfig, TenantSpec, run_emulator
from tests.e2e.harness import CLIENT, REPO, SECRET, START, TENANT, TERMINAL, Host, body, serve
from tests.support.hosted_profile import GUARDED

PROBE = Path(__file__).resolve().parent / "engine_probe"
DEPLOYED = {
    # The harness shortens these for tests; empty means the app's default.
    "COLLECTOR_POLL_INTERVAL_SECONDS": "",
    "COLLECTOR_POLL_MAX_INTERVAL_SECONDS": "",
    "COLLECTOR_RETRY_BASE_SECONDS": "",
    "COLLECTOR_RETRY_MAX_SECONDS": "",
    "COLLECTOR_CHUNKS_PER_EXECUTION": "",
}
COUNTS = ("orchestration_episodes", "replayed_events", "entity_episodes", "entity_operations")


@contextmanager
def fast_time(clock: OffsetFileClock, args: argparse.Namespace, pid: int) -> Any:
    """Move ``clock`` ``speed - 1`` seconds forward every real second while the host process ``pid`` is idle (it
    used at most ``--busy`` of a core over the last tick), until the block ends. While the host works, time runs at
    its real rate, so the host's own latency stays what it is instead of being multiplied by the speed."""
    stop = threading.Event()
    process = psutil.Process(pid)

    def used() -> float:
        times = process.cpu_times()
        return float(times.user + times.system)

    def run() -> None:
        last, last_cpu = time.monotonic(), used()
        while not stop.wait(args.tick):
            now, cpu = time.monotonic(), used()
            if cpu - last_cpu <= args.busy * (now - last):
                clock.advance((now - last) * (args.speed - 1))
            last, last_cpu = now, cpu

    thread = threading.Thread(target=run, name="fast-time", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


class Noticing:
    """How late the collector notices that a Graph query finished: from the moment the emulator turns it succeeded
    (``Stats.query_finishes``, in the moved clock's seconds) to the first status call after it (the check whose answer
    the lane acts on), in collector seconds and as a share of the query's running time. It listens to the emulator's
    query log, noting each create and status call on the moved clock."""

    def __init__(self, stats: Any, clock: OffsetFileClock) -> None:
        self.stats, self.clock = stats, clock
        self.created: dict[str, float] = {}
        self.checks: dict[str, list[float]] = {}
        log = stats.log_query

        def logged(tenant_id: str, kind: str, query_id: str, api: str = "graph", call: str = "") -> None:
            if api == "graph" and call == "create":
                self.created.setdefault(query_id, clock.now().timestamp())
            elif api == "graph" and call == "status":
                self.checks.setdefault(query_id, []).append(clock.now().timestamp())
            log(tenant_id, kind, query_id, api, call)

        stats.log_query = logged

    def detail(self) -> list[str]:
        """Per query: its running time, how late it was noticed, and its checks (seconds from its creation)."""
        finishes, lines = dict(self.stats.query_finishes), []
        for query_id, born in sorted(self.created.items(), key=lambda item: item[1]):
            done = finishes.get(query_id)
            if done is None:
                continue
            seen = [round(moment - born, 1) for moment in self.checks.get(query_id, [])]
            late = min((m for m in seen if m >= done - born), default=float("nan")) - (done - born)
            lines.append(f"ran {done - born:6.1f} s, noticed {late:5.1f} s late, checks at {seen}")
        return lines

    def figures(self) -> dict[str, float]:
        finishes = dict(self.stats.query_finishes)
        late: list[float] = []
        share: list[float] = []
        checks: list[int] = []
        for query_id, born in self.created.items():
            done, seen = finishes.get(query_id), self.checks.get(query_id, [])
            after = [moment for moment in seen if done is not None and moment >= done]
            if done is None or not after:
                continue
            late.append(min(after) - done)
            share.append(late[-1] / max(done - born, 1e-9))
            checks.append(len(seen))
        if not late:
            return {"notice_s": 0.0, "notice_share": 0.0, "checks": 0.0}
        return {
            "notice_s": statistics.mean(late),
            "notice_share": 100 * statistics.mean(share),
            "checks": statistics.mean(checks),
        }


class Counts:
    """The engine's counters: its stats route, or the probe's file for a checkout without one."""

    def __init__(self, host: Host, probe_file: Path | None) -> None:
        self.host, self.probe_file = host, probe_file

    def read(self) -> dict[str, float]:
        if self.probe_file is not None:
            time.sleep(0.6)  # the probe writes four times a second
            data = json.loads(self.probe_file.read_text(encoding="ascii")) if self.probe_file.exists() else {}
        else:
            response = requests.get(f"{self.host.base}/admin/host/stats", timeout=30)
            response.raise_for_status()
            data = response.json()
        return {name: float(data.get(name, 0)) for name in COUNTS}


def wait(host: Host, collection_id: str, limit: float) -> dict[str, Any]:
    """``Host.wait`` at a slower pace: each summary is an HTTP function the host runs (its CPU counts)."""
    deadline = time.monotonic() + limit
    while True:
        summary = host.summary(collection_id)
        if summary.get("runtimeStatus") in TERMINAL or time.monotonic() > deadline:
            return summary
        time.sleep(2.0)


def has_stats_route(app: Path) -> bool:
    return (app / "durable_local" / "host" / "stats_route.py").exists()


def run_once(label: str, app: Path, args: argparse.Namespace, extra: dict[str, str]) -> dict[str, float]:
    config = EmulatorConfig(tenants=[TenantSpec(TENANT, seed=7, records_per_hour=args.records_per_hour)])
    config.graph.completion_delay_seconds = args.graph_latency
    config.graph.completion_jitter_seconds = args.graph_jitter
    config.graph.concurrency_retry_after_seconds = 0
    config.exchange.latency_seconds = args.exchange_latency / args.speed
    config.exchange.latency_jitter_seconds = args.exchange_jitter / args.speed
    config.exchange.concurrency_retry_after_seconds = 0
    config.faults.broken_page_rate = 0.0
    steady(config)  # no query failed, lost or left running: a stuck one would wait four (moved) hours
    with tempfile.TemporaryDirectory() as workdir:
        work = Path(workdir)
        clock = OffsetFileClock(work / "clock")
        env = {**DEPLOYED, **{name: value for name, value in extra.items() if name not in GUARDED}}
        departs = {name: value for name, value in extra.items() if name in GUARDED}  # e.g. the budget off
        probe_file = work / "probe.json" if label in args.probe or not has_stats_route(app) else None
        if probe_file is not None:
            env["PYTHONPATH"] = f"{PROBE}{os.pathsep}{app}"
            env["BENCH_ENGINE_PROBE"] = str(probe_file)
        with run_emulator(config, clock=clock.now) as emulator:
            emulator.graph.clock = lambda: clock.now().timestamp()  # query latency in the moved time
            noticing = Noticing(emulator.stats, clock)
            emulator.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
            with (
                serve(emulator, work, env, app_dir=app, clock_file=clock.path, deviations=departs) as host,
                fast_time(clock, args, host.pid),
            ):
                counts = Counts(host, probe_file)
                time.sleep(1.0)
                idle_began, idle_cpu = time.monotonic(), cpu_seconds(host.pid)
                time.sleep(2.0)
                idle_rate = (cpu_seconds(host.pid) - idle_cpu) / (time.monotonic() - idle_began)
                before = counts.read()
                cpu_before, began, sim_began = cpu_seconds(host.pid), time.monotonic(), clock.now()
                end = START + timedelta(hours=args.chunks)
                request = body(end, interval=60, k=args.k, source=args.source, collectionId="bench-real")
                response = host.post(request)
                assert response.status_code == 202, response.text
                summary = wait(host, "bench-real", args.limit)
                cpu = cpu_seconds(host.pid) - cpu_before
                wall = time.monotonic() - began
                simulated = (clock.now() - sim_began).total_seconds()
                after = counts.read()
                if probe_file is not None and has_stats_route(app):  # --probe: what the engine counted, to compare
                    engine = Counts(host, None).read()
                    print(f"{label:>10} engine counted: {json.dumps(engine)}", flush=True)
            calls = sum(count for (tenant, _), count in emulator.stats.requests.items() if tenant == TENANT)
        if summary["status"] != "Completed":
            raise SystemExit(f"{app}: collection ended {summary['status']}: {json.dumps(summary)[:2000]}")
    n = float(args.chunks)
    figures = {name: (after[name] - before[name]) / n for name in COUNTS}
    figures.update(noticing.figures())
    if args.detail:
        print("\n".join(f"{label:>10} {line}" for line in noticing.detail()), flush=True)
    episodes = figures["orchestration_episodes"] + figures["entity_episodes"]
    figures.update(
        cpu_ms=1000 * cpu / n,
        per_episode=1000 * cpu / n / episodes if episodes else 0.0,
        net_ms=1000 * max(0.0, cpu - idle_rate * wall) / n,
        calls=calls / n,
        wall=wall,
        simulated=simulated,
        probe=float(probe_file is not None),
    )
    return figures


COLUMNS = (
    ("cpu_ms", "CPU ms", "{:.0f}"),
    ("net_ms", "net ms", "{:.0f}"),
    ("per_episode", "CPU/ep. ms", "{:.1f}"),
    ("orchestration_episodes", "episodes", "{:.2f}"),
    ("replayed_events", "replayed", "{:.0f}"),
    ("entity_episodes", "entity ep.", "{:.2f}"),
    ("entity_operations", "entity ops", "{:.2f}"),
    ("calls", "API calls", "{:.2f}"),
    ("checks", "checks/q.", "{:.2f}"),
    ("notice_s", "notice s", "{:.1f}"),
    ("notice_share", "notice %", "{:.1f}"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=30)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--source", default="graph", choices=["graph", "exchange"])
    parser.add_argument("--graph-latency", type=float, default=30.0, help="shortest Graph query, collector seconds")
    parser.add_argument("--graph-jitter", type=float, default=270.0)
    parser.add_argument("--exchange-latency", type=float, default=2.0, help="shortest Exchange call, collector s")
    parser.add_argument("--exchange-jitter", type=float, default=6.0)
    parser.add_argument("--records-per-hour", type=float, default=50.0)
    parser.add_argument("--speed", type=float, default=20.0, help="collector seconds per real second")
    parser.add_argument("--tick", type=float, default=0.1, help="real seconds between two moves of the clock")
    parser.add_argument("--busy", type=float, default=0.15, help="share of a core above which the host is busy")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each app, interleaved; medians are compared")
    parser.add_argument("--limit", type=float, default=3600.0, help="real seconds before a run counts as hung")
    parser.add_argument("--app", action="append", type=parse_app, help="LABEL=DIR of a checkout to run (repeatable)")
    parser.add_argument("--set", action="append", default=[], help="LABEL:NAME=VALUE, a setting for one app")
    parser.add_argument("--probe", action="append", default=[], help="LABEL to count by the probe (to check it)")
    parser.add_argument("--detail", action="store_true", help="list every query's checks and how late it was seen")
    parser.add_argument("--ratio", action="append", default=[], help="A/B: print A's figures over B's (repeatable)")
    args = parser.parse_args()
    settings: dict[str, dict[str, str]] = {}
    for item in args.set:
        label, _, assignment = item.partition(":")
        name, _, value = assignment.partition("=")
        settings.setdefault(label, {})[name] = value
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        os.environ.pop(name, None)
    apps = args.app or [("this", REPO)]

    latency = (
        f"Graph queries {args.graph_latency:g}..{args.graph_latency + args.graph_jitter:g} s"
        if args.source == "graph"
        else f"Exchange calls {args.exchange_latency:g}..{args.exchange_latency + args.exchange_jitter:g} s"
    )
    print(
        f"{args.source}, {args.chunks} hourly chunks, K={args.k}, {latency}, time x{args.speed:g}, default settings, "
        "budget secret set; per chunk:"
    )
    header = " ".join(f"{title:>10}" for _, title, _ in COLUMNS)
    print(f"{'app':>10} {header} {'wall s':>7} {'sim. s':>7}  counted by")
    runs: dict[str, list[dict[str, float]]] = {}
    for _ in range(args.repeat):
        for label, app in apps:
            figures = run_once(label, app, args, settings.get(label, {}))
            runs.setdefault(label, []).append(figures)
            row = " ".join(f"{form.format(figures[key]):>10}" for key, _, form in COLUMNS)
            source = "probe" if figures["probe"] else "engine"
            print(f"{label:>10} {row} {figures['wall']:>7.1f} {figures['simulated']:>7.0f}  {source}", flush=True)
    medians = {
        label: {key: statistics.median(r[key] for r in rs) for key, _, _ in COLUMNS} for label, rs in runs.items()
    }
    if args.repeat > 1:
        for label, values in medians.items():
            row = " ".join(f"{form.format(values[key]):>10}" for key, _, form in COLUMNS)
            print(f"{label:>10} {row}  (median of {args.repeat})")
    pairs = [tuple(item.split("/", 1)) for item in args.ratio] or [(apps[0][0], label) for label, _ in apps[1:]]
    for top, bottom in pairs:
        ratios = ", ".join(
            f"{title} {medians[top][key] / medians[bottom][key]:.2f}x" if medians[bottom][key] else f"{title} -"
            for key, title, _ in COLUMNS
        )
        print(f"{top} / {bottom}: {ratios}")


if __name__ == "__main__":
    main()
