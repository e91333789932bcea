"""Issues 17 and 25: what the evidence costs. Calls per 10,000 records, splits, confirmations and collection time of the
Exchange path, two app checkouts side by side in one run on the same tenant and service shape.

Service shapes (``--services``): "old" is the service *before* 2026 (``ResultCount`` the window's true total, sessions
that continue, rows in order, no disguised failures, no false answers): the only service the pre-issue-17 path was
right on. "capped-restart" etc. are the 2026 shapes with everything else at the emulator's defaults. The issue-25
shapes, "false-<count>-<sessions>" (``false-capped-restart``, ``false-total-continue``, ...), make a third of the
windows' first answers false (no rows, or a bogus row with ``ResultIndex`` -1) and shuffle each call's rows across HTTP
pages of 700 (``--pages mix``: 1,000, 5,000 or 1..5,000), in every ``ResultCount`` and session mode;
"unsorted-pages" and "false-answers" are each alone.

Each run serves an app checkout on the local host (SHIM mode, memory store) against the emulator over HTTPS, with a
per-request latency so collection time reflects calls, and compares the output with the ground truth. A call is one
``Search-UnifiedAuditLog`` cmdlet call (the emulator's ``cmdlet_calls``; its nextLink pages are HTTP requests, counted
apart). To run the code before a change, check it out first (``git worktree add /tmp/before <commit>``; remove it with
``git worktree remove /tmp/before`` afterwards):

    .venv/bin/python bench/exchange_evidence.py --app before=/tmp/before --app after=.
        [--hours 6] [--records-per-hour 12000] [--k 3] [--latency 0.05] [--services old false-capped-restart ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.window_busy import parse_app
from m365_emulator import AppRegistration, EmulatorConfig, TenantSpec, run_emulator
from tests.e2e.harness import CLIENT, REPO, SECRET, START, TENANT, body, serve

SERVICES: dict[str, dict[str, object]] = {
    "old": {"result_count": "total", "over_delivery": 0.0, "session_mode": "continue", "unsorted": False,
            "cancel_warning_rate": 0.0, "transient_400_rate": 0.0, "false_answer_rate": 0.0,
            "page_size_mode": "fixed", "page_size": 1000},
    "capped-continue": {"result_count": "capped", "session_mode": "continue", "false_answer_rate": 0.0},
    "capped-restart": {"result_count": "capped", "session_mode": "restart", "false_answer_rate": 0.0},
    "size-empty": {"result_count": "size", "session_mode": "empty", "false_answer_rate": 0.0},
    **{
        f"false-{count}-{sessions}": {
            "result_count": count, "session_mode": sessions, "false_answer_rate": 1 / 3, "unsorted": True,
            "unsorted_across_pages": True, "page_size_mode": "fixed", "page_size": 700,
            **({"over_delivery": 0.0} if count == "total" else {}),
        }
        for count in ("total", "capped", "size")
        for sessions in ("continue", "restart", "empty")
    },
    # Each finding of issue 25 alone, on the 2026 defaults (capped counts, sessions that restart):
    "unsorted-pages": {"false_answer_rate": 0.0, "unsorted": True, "unsorted_across_pages": True,
                       "page_size_mode": "fixed", "page_size": 700},
    "false-answers": {"false_answer_rate": 1 / 3, "unsorted": True, "unsorted_across_pages": False,
                      "page_size_mode": "fixed", "page_size": 1000},
}  # fmt: skip
"""Emulator Exchange knobs per service shape ("old": before 2026; the others keep the 2026 defaults otherwise)."""


@dataclass
class Figures:
    app: str
    service: str
    status: str
    records: int
    truth: int
    calls: int
    requests: int
    wall: float
    splits: int = 0
    presplits: int = 0
    confirmations: int = 0
    false_answers: int = 0

    @property
    def per_10k(self) -> float:
        return self.calls / max(1, self.truth) * 10_000


def run_once(label: str, app: Path, service: str, args: argparse.Namespace) -> Figures:
    config = EmulatorConfig(tenants=[TenantSpec(TENANT, seed=29, records_per_hour=args.records_per_hour)])
    config.exchange.max_concurrent_sessions = args.k
    config.exchange.concurrency_retry_after_seconds = 0
    config.exchange.latency_seconds = args.latency
    config.faults.broken_page_rate = 0.0
    config.faults.retry_after_seconds = 0
    for name, value in SERVICES[service].items():
        setattr(config.exchange, name, value)
    if args.pages == "mix" and service.startswith("false-"):
        config.exchange.page_size_mode = "mix"
    with run_emulator(config) as emulator, tempfile.TemporaryDirectory() as workdir:
        emulator.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
        end = START + timedelta(hours=args.hours)
        with serve(emulator, Path(workdir), {"COLLECTOR_MAX_CHUNKS": "100000"}, app_dir=app) as host:
            time.sleep(1.0)  # let start-up settle before the clock starts
            began = time.monotonic()
            response = host.post(body(end, interval=60, k=args.k, source="exchange", collectionId="bench-ev"))
            assert response.status_code == 202, response.text
            summary = host.wait("bench-ev", limit_seconds=7200)
            wall = time.monotonic() - began
        written = set(host.chunk_ids("bench-ev"))
        truth = set(emulator.ground_truth_ids(TENANT, START, end))
        key = (TENANT, "exchange")
        cost = summary.get("exchange") or {}
        return Figures(
            label,
            service,
            str(summary["status"]),
            len(written & truth),
            len(truth),
            emulator.stats.cmdlet_calls[key],
            emulator.stats.requests[key],
            wall,
            int(summary.get("progress", {}).get("splits", cost.get("splits", 0)) or 0),
            int(cost.get("presplits", 0)),
            int(cost.get("confirmations", 0)),
            int(emulator.stats.false_answers[key]),
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--app", action="append", type=parse_app, help="LABEL=DIR of a checkout to run (repeatable)")
    parser.add_argument("--hours", type=int, default=6, help="one-hour chunks")
    parser.add_argument("--records-per-hour", type=float, default=12_000.0)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds each InvokeCommand request takes")
    parser.add_argument("--services", nargs="+", default=["old"], choices=sorted(SERVICES))
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (service, app), interleaved")
    parser.add_argument("--pages", choices=("700", "mix"), default="700", help="HTTP pages of the false-* shapes")
    args = parser.parse_args()
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        os.environ.pop(name, None)
    apps = args.app or [("this", REPO)]
    print(
        f"exchange, K={args.k}, {args.hours} one-hour chunks of ~{args.records_per_hour:,.0f} records, "
        f"{args.latency:g} s per request"
    )
    print(
        f"{'service':>22} {'app':>8} {'status':>22} {'written':>14} {'calls':>6} {'requests':>8} "
        f"{'calls/10k':>9} {'splits':>6} {'pre':>4} {'confirm':>7} {'false':>5} {'wall s':>7}"
    )
    results: dict[tuple[str, str], list[Figures]] = {}
    for _ in range(args.repeat):
        for service in args.services:
            for label, app in apps:
                f = run_once(label, app, service, args)
                results.setdefault((service, label), []).append(f)
                print(
                    f"{service:>22} {label:>8} {f.status:>22} {f'{f.records}/{f.truth}':>14} {f.calls:>6} "
                    f"{f.requests:>8} {f.per_10k:>9.2f} {f.splits:>6} {f.presplits:>4} {f.confirmations:>7} "
                    f"{f.false_answers:>5} {f.wall:>7.1f}",
                    flush=True,
                )
    if len(apps) >= 2:
        first, _ = apps[0]
        for service in args.services:
            for second, _ in apps[1:]:
                a, b = results[(service, first)], results[(service, second)]
                calls = sum(x.per_10k for x in b) / sum(x.per_10k for x in a)
                wall = sum(x.wall for x in b) / sum(x.wall for x in a)
                exact = all(x.records == x.truth for x in b)
                print(
                    f"{service}: {second} / {first} = {calls:.2f}x calls per 10,000 records, {wall:.2f}x collection "
                    f"time; {second} exact: {exact}, {first} exact: {all(x.records == x.truth for x in a)}"
                )


if __name__ == "__main__":
    main()
