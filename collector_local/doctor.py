"""``python -m collector_local doctor --tenant ...``: the read-only preflight (``shared.doctor``) from a terminal.

Settings are the app settings, read like the local host reads them: the environment, plus ``local.settings.json``
``Values`` from the app folder for names the environment does not set (as ``func start`` does). One line per probe;
exit code 0 only when nothing failed, 1 when a probe failed, 2 for a bad command line or settings file.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from durable_local.host.config import HostConfigError, apply_local_settings
from shared.doctor import DEFAULT_BUDGET_SECONDS, SOURCES, run_doctor
from shared.requests.validation import InvalidRequest, validate_tenant_id

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m collector_local doctor",
        description="Check the collector's settings, sign-in, API permissions, Exchange role and anchor mailbox, and "
        "output store against a real tenant. Read-only, except for one tiny Graph audit query (deleted when the "
        "service allows it) and a probe object written to and deleted from the output store.",
    )
    parser.add_argument(
        "--tenant",
        required=True,
        help="the tenant: its initial domain <name>.onmicrosoft.com (needed for Exchange) or its GUID",
    )
    parser.add_argument("--source", choices=SOURCES, default="all", help="which audit API to probe (default all)")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON document")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_BUDGET_SECONDS,
        help=f"time budget in seconds for the whole run (default {DEFAULT_BUDGET_SECONDS:g})",
    )
    parser.add_argument("--verbose", action="store_true", help="also print the adapters' warnings (stderr)")
    parser.add_argument(
        "--app-dir",
        type=Path,
        default=REPO,
        help="folder whose local.settings.json supplies settings the environment lacks (default: this repository)",
    )
    return parser.parse_args(argv)


def app_environment(app_dir: Path) -> dict[str, str]:
    """The environment plus ``local.settings.json`` ``Values`` it does not already set. A run from a checkout is local
    (``FUNCTIONS_CORETOOLS_ENVIRONMENT``, as under ``func start``): its default output folder is this machine's."""
    env = dict(os.environ)
    env.setdefault("FUNCTIONS_CORETOOLS_ENVIRONMENT", "true")
    apply_local_settings(app_dir, env)
    return env


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # The results say what failed; the adapters' own warnings repeat it, so they are shown only on request.
    logging.basicConfig(level=logging.WARNING if args.verbose else logging.CRITICAL, stream=sys.stderr)
    try:
        tenant = validate_tenant_id(args.tenant)
    except InvalidRequest as exc:
        print(f"--tenant: {exc.message}", file=sys.stderr)
        return 2
    if not 1 <= args.timeout <= 3600:
        print("--timeout: must be between 1 and 3600 seconds", file=sys.stderr)
        return 2
    try:
        env = app_environment(args.app_dir)
    except HostConfigError as exc:
        print(f"settings: {exc}", file=sys.stderr)
        return 2
    report = run_doctor(env, tenant, args.source, budget_seconds=args.timeout)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print("\n".join(report.lines()))
    return 0 if report.ok else 1
