"""``python -m m365_emulator serve [--port N] [--config FILE.json] [--records-per-hour R] [--seed S] [--clock-file F]``.

Starts the emulator in the foreground, prints its URLs, the CA bundle and a demo app registration (a fresh secret
each start), and serves until interrupted.
"""

from __future__ import annotations

import argparse
import json
import secrets
import signal
import sys
import threading
from pathlib import Path

from m365_emulator.config import AppRegistration, EmulatorConfig, TenantSpec
from m365_emulator.emulator import Emulator

DEMO_TENANT = "8d1c6e6c-0b7a-4c55-9d8e-2f1f4a9c3b10"
DEMO_CLIENT = "4b2e9c1a-7f3d-4e8b-a6c5-1d9e0f2a3b4c"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m m365_emulator", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the emulator until Ctrl-C")
    serve.add_argument("--host", default=None, help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default: an ephemeral one)")
    serve.add_argument("--config", type=Path, help="JSON file shaped like EmulatorConfig (see README)")
    serve.add_argument("--records-per-hour", type=float, default=200.0, help="demo tenant volume")
    serve.add_argument("--seed", type=int, default=1, help="demo tenant seed")
    serve.add_argument(
        "--clock-file",
        type=Path,
        default=None,
        help="tests: the emulator's now is the wall clock plus the offset in seconds this file holds (the file the "
        "local host reads with --clock-file), so moving it makes late records searchable",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    config = EmulatorConfig.from_json(json.loads(args.config.read_text())) if args.config else EmulatorConfig()
    if args.host:
        config.host = args.host
    if args.port is not None:
        config.port = args.port
    if not config.tenants:
        config.tenants.append(
            TenantSpec(DEMO_TENANT, "contoso.onmicrosoft.com", seed=args.seed, records_per_hour=args.records_per_hour)
        )
    demo_secret = secrets.token_urlsafe(24)
    config.apps.append(AppRegistration(config.tenants[0].tenant_id, DEMO_CLIENT, client_secret=demo_secret))
    clock = None
    if args.clock_file is not None:
        from durable_local.clock import OffsetFileClock  # the same file format as the local host's

        clock = OffsetFileClock(args.clock_file).now
    emulator = Emulator(config, clock).start()
    tenant = config.tenants[0].tenant_id
    lines = [
        f"base_url          {emulator.base_url}",
        f"authority         {emulator.authority_host}/{tenant}   (msal: instance_discovery=False)",
        f"graph_base_url    {emulator.graph_base_url}",
        f"exchange_base_url {emulator.exchange_base_url}",
        f"feed_base_url     {emulator.feed_base_url}",
        f"ca_bundle         {emulator.ca_bundle}",
        f"tenant_id         {tenant}",
        f"client_id         {DEMO_CLIENT}",
        f"client_secret     {demo_secret}",
        "ready",
    ]
    print("\n".join(lines), flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
