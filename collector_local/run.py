"""The main job on the embedded default, wired from real parts over real HTTP.

1. start ``m365_emulator`` (HTTPS on loopback) with a deterministic synthetic tenant and an app registration;
2. point the collector's settings at it (``AUDIT_*``) and at a local output folder (``OUTPUT_FOLDER``);
3. serve this repository's function app with ``durable_local.host.LocalHost`` (shim-faithful mode by default);
4. ``POST /api/collections``, print the live page's URL (``--open`` opens it in the default browser), follow
   ``GET /api/collections/{id}`` with a progress line;
5. print a summary, where the output is, and whether the records written equal the emulator's ground truth.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
import uuid
import webbrowser
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests

from shared.settings import BUDGET_KEY_SETTING, DEFAULT_TASK_HUB, TASK_HUB_SETTING
from shared.sources.registry import SOURCES

REPO = Path(__file__).resolve().parents[1]
TENANT_ID = "8e3af657-a8ff-443c-a75c-2fe8c4bcb635"
TENANT_DOMAIN = "contoso.onmicrosoft.com"
CLIENT_ID = "5b1f0d3e-2c4a-4e8f-9a6b-7d8c9e0f1a2b"
TERMINAL = {"Completed", "Failed", "Terminated", "Canceled"}


@dataclass(frozen=True)
class Options:
    start: datetime
    end: datetime
    interval_minutes: int
    concurrency: int
    source: str
    output: Path
    records_per_hour: float
    mode: str
    store: str
    timeout: float
    open_page: bool = False
    keep_serving: bool = False
    events: Path | None = None


def _utc(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def parse_args(argv: list[str] | None = None) -> Options:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    parser = argparse.ArgumentParser(
        prog="python -m collector_local",
        description="Collect a synthetic tenant's Unified Audit Log on the local engine + emulator. "
        "Defaults reproduce the seed scenario: the last day in 240-minute chunks, at most 2 at once.",
        epilog="To check the settings against a real tenant instead: python -m collector_local doctor --help",
    )
    parser.add_argument("--end", type=_utc, default=now, help="end of the range, ISO 8601 (default: now)")
    parser.add_argument("--start", type=_utc, default=None, help="start of the range (default: end - --days)")
    parser.add_argument("--days", type=float, default=1.0, help="length of the range when --start is not given")
    parser.add_argument("--interval", type=int, default=240, help="chunk length in minutes (default 240)")
    parser.add_argument("--concurrency", type=int, default=2, help="K, chunks in flight at most (default 2)")
    parser.add_argument("--source", choices=tuple(SOURCES), default="graph")
    parser.add_argument("--output", type=Path, default=REPO / "output", help="output folder (default ./output)")
    parser.add_argument("--records-per-hour", type=float, default=250.0, help="synthetic tenant volume")
    parser.add_argument("--mode", choices=("shim", "ideal"), default="shim", help="engine scheduling mode")
    parser.add_argument("--store", default="memory", help="engine store: memory or a SQLite path")
    parser.add_argument("--timeout", type=float, default=600.0, help="give up after this many seconds")
    parser.add_argument("--open", action="store_true", help="open the collection's live page in the default browser")
    parser.add_argument(
        "--keep-serving", action="store_true", help="after the collection ends, keep the local host (and the page) up "
        "until Ctrl+C"
    )  # fmt: skip
    parser.add_argument(
        "--events", type=Path, default=None, help="append the collector's structured log events to this JSON-lines "
        "file (docs/operations.md; python -m collector_local.events FILE answers its queries over them)"
    )  # fmt: skip
    args = parser.parse_args(argv)
    start = args.start or args.end - timedelta(days=args.days)
    return Options(
        start=start,
        end=args.end,
        interval_minutes=args.interval,
        concurrency=args.concurrency,
        source=args.source,
        output=args.output.resolve(),
        records_per_hour=args.records_per_hour,
        mode=args.mode,
        store=args.store,
        timeout=args.timeout,
        open_page=args.open,
        keep_serving=args.keep_serving,
        events=args.events,
    )


def _app_environment(emu: Any, secret: str, output: Path) -> dict[str, str]:
    """The collector's settings for this run (real environment variables, like app settings on Azure): as deployed
    where it matters (the task hub, the tenant budget on and its key, which Azure requires: a fresh one per run unless
    the environment has one), with short polls and an output folder for a local run."""
    return {
        TASK_HUB_SETTING: DEFAULT_TASK_HUB,
        BUDGET_KEY_SETTING: os.environ.get(BUDGET_KEY_SETTING) or secrets.token_hex(32),
        "AUDIT_CLIENT_ID": CLIENT_ID,
        "AUDIT_CLIENT_SECRET": secret,
        "AUDIT_AUTHORITY_HOST": emu.authority_host,
        "AUDIT_GRAPH_BASE_URL": emu.graph_base_url,
        "AUDIT_EXCHANGE_BASE_URL": emu.exchange_base_url,
        "AUDIT_FEED_BASE_URL": emu.feed_base_url,
        "AUDIT_CA_BUNDLE": str(emu.ca_bundle),
        "OUTPUT_FOLDER": str(output),
        "OUTPUT_STORAGE_CONNECTION": "",
        "OUTPUT_STORAGE_ACCOUNT_URL": "",
        "COLLECTOR_POLL_INTERVAL_SECONDS": "1",
        "COLLECTOR_POLL_MAX_INTERVAL_SECONDS": "5",
        # The emulator finishes a query in 0.2 s but leaves a few running for good, as the service may: one still
        # unfinished after 12 checks (a minute) is given up on and submitted again, not after the 240 of Azure.
        "COLLECTOR_MAX_POLLS": "12",
        "COLLECTOR_RETRY_BASE_SECONDS": "1",
        "COLLECTOR_RETRY_MAX_SECONDS": "10",
    }


def _progress_line(summary: dict[str, Any]) -> str:
    progress = summary.get("progress") or {}
    total = int(progress.get("total") or 0)
    done = int(progress.get("completed") or 0) + int(progress.get("failed") or 0)
    percent = float(progress.get("percent") or (100.0 * done / total if total else 0.0))
    filled = int(percent // 5)
    bar = "#" * filled + "." * (20 - filled)
    return (
        f"[{bar}] {percent:5.1f}%  chunks {done}/{total}  in flight {progress.get('inFlight', 0)}  "
        f"failed {progress.get('failed', 0)}  records {summary.get('records', 0):,}  "
        f"({summary.get('runtimeStatus')})"
    )


def _follow(session: requests.Session, summary_url: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last = ""
    tty = sys.stdout.isatty()
    summary: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = session.get(summary_url, timeout=30)
        response.raise_for_status()
        summary = response.json()
        line = _progress_line(summary)
        if line != last:
            print(("\r" + line) if tty else line, end="" if tty else "\n", flush=True)
            last = line
        if summary.get("runtimeStatus") in TERMINAL:
            if tty:
                print()
            return summary
        time.sleep(0.5)
    raise TimeoutError(f"the collection did not finish within {timeout:.0f}s; last status: {summary}")


def _linger(options: Options, page: str) -> None:
    """Keep the host up after the end: until Ctrl+C with ``--keep-serving``, or for one refresh of an opened page
    (the page polls every 2 s and shows the final state once it has read it)."""
    if options.keep_serving:
        print(f"\nServing    {page} until Ctrl+C", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print()
    elif options.open_page:
        time.sleep(3.0)


def _written_ids(folder: Path) -> list[str]:
    ids: list[str] = []
    for path in sorted((folder / "chunks").glob("*.jsonl")):
        if path.name.endswith(".quarantine.jsonl"):
            continue
        with path.open("rb") as handle:
            ids.extend(json.loads(line)["id"] for line in handle if line.strip())
    return ids


def run(options: Options) -> int:
    from durable_local.host import LocalHost
    from m365_emulator import AppRegistration, EmulatorConfig, TenantSpec, run_emulator

    if options.events is not None:
        from collector_local.events import record_events

        record_events(options.events)

    secret = secrets.token_urlsafe(24)
    tenant = TenantSpec(
        tenant_id=TENANT_ID,
        domain=TENANT_DOMAIN,
        seed=7,
        records_per_hour=options.records_per_hour,
        retention_start=options.start - timedelta(days=1),
    )
    collection_id = f"local-{uuid.uuid4().hex[:12]}"
    print(
        f"Range      {options.start.isoformat()} .. {options.end.isoformat()}  ({options.source}, "
        f"{options.interval_minutes}-minute chunks, K={options.concurrency}, engine mode {options.mode})"
    )
    with run_emulator(EmulatorConfig(tenants=[tenant])) as emu:
        emu.register_app(AppRegistration(TENANT_ID, CLIENT_ID, client_secret=secret))
        print(f"Emulator   {emu.base_url} (tenant {TENANT_DOMAIN})")
        os.environ.update(_app_environment(emu, secret, options.output))
        host = LocalHost(
            REPO,
            port=0,
            store=options.store,
            mode=options.mode,
            settings_overrides={"max_queue_polling_interval": timedelta(milliseconds=200)},
        )
        with host:
            print(f"Local host {host.base_url}")
            session = requests.Session()
            body = {
                "tenantId": TENANT_DOMAIN,
                "startDate": options.start.isoformat(),
                "endDate": options.end.isoformat(),
                "intervalMinutes": options.interval_minutes,
                "maxConcurrency": options.concurrency,
                "source": options.source,
                "collectionId": collection_id,
            }
            started = time.monotonic()
            submitted_at = emu.now()
            response = session.post(f"{host.base_url}/api/collections", json=body, timeout=60)
            if response.status_code != 202:
                print(f"The collection was not started: HTTP {response.status_code} {response.text}")
                return 1
            accepted = response.json()
            print(
                f"Started    collection {collection_id}: {accepted.get('chunks')} chunks; "
                f"status {accepted.get('statusQueryGetUri')}"
            )
            page = f"{accepted['summaryUri']}/view"
            print(f"Live page  {page}", flush=True)
            if options.open_page and not webbrowser.open(page):
                print("           (no browser could be opened; open the URL yourself)")
            summary = _follow(session, accepted["summaryUri"], options.timeout)
            elapsed = time.monotonic() - started
            finished_at = emu.now()
            _linger(options, page)
        # Records reach the audit log late (the emulator's ingestion delay, as on a real tenant): the output is exact
        # when it holds every record ingested before the collection started and none not ingested by its end.
        before = set(emu.ground_truth_ids(TENANT_ID, options.start, options.end, visible_at=submitted_at))
        after = set(emu.ground_truth_ids(TENANT_ID, options.start, options.end, visible_at=finished_at))
        everything = set(emu.ground_truth_ids(TENANT_ID, options.start, options.end))
    folder = options.output / TENANT_DOMAIN / collection_id
    written = _written_ids(folder)
    exact = len(written) == len(set(written)) and before <= set(written) <= after
    print()
    print(f"Status     {summary.get('status')} (runtime {summary.get('runtimeStatus')}) in {elapsed:.1f}s")
    if summary.get("reason"):
        print(f"Reason     {summary.get('reason')}")
    for failure in summary.get("failures") or []:
        print(f"Failed     {failure.get('window')}: {failure.get('kind')}: {failure.get('reason')}")
    print(
        f"Records    {len(written):,} written; emulator ground truth {len(after):,} ingested by then: "
        f"{'exact match' if exact else 'MISMATCH'}"
    )
    print(f"Output     {folder}")
    manifest = folder / "manifest.json"
    if manifest.exists():
        print(f"Manifest   {manifest}")
    late = (summary.get("latency") or {}).get("provisional") or []
    if late:  # records still on their way, on the emulator as on a real tenant
        windows = ", ".join(f"{w['start']} .. {w['end']}" for w in late)
        print(f"Late       {windows} may still gain records (up to a day late; {len(everything - after):,} are on")
        print(
            f"           their way in the emulator); collect again after {summary['latency']['settledAfter']} for a "
            'final copy, or ask for "settle": true'
        )
    return 0 if exact and summary.get("status") == "Completed" else 1


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(argv))
