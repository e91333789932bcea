"""Command line of the local durable runtime: ``python -m durable_local serve --app-dir DIR ...``."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from datetime import timedelta
from types import FrameType

from durable_local.clock import OffsetFileClock
from durable_local.host import AppLoadError, HostConfigError, LocalHost
from durable_local.host.invoke import ReplayLogFilter

logger = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m durable_local", description="Local Durable Functions runtime")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve a v2-model function app on the local durable engine")
    serve.add_argument("--app-dir", required=True, help="folder with function_app.py (and host.json)")
    serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default: loopback)")
    serve.add_argument("--port", type=int, default=7071, help="TCP port (default 7071; 0 picks a free one)")
    serve.add_argument(
        "--store", default=None, help="'memory' or a SQLite file (default ./.durable_local/<hub>.sqlite)"
    )
    serve.add_argument("--mode", choices=("shim", "ideal"), default="shim", help="action scheduling mode")
    serve.add_argument("--hub", default=None, help="task hub name (overrides host.json)")
    serve.add_argument("--require-keys", action="store_true", help="enforce function/master/system keys")
    serve.add_argument("--verbose", action="store_true", help="log engine events")
    serve.add_argument("--replay-logs", action="store_true", help="keep orchestrator log lines emitted in replay")
    serve.add_argument(
        "--max-polling-interval",
        type=float,
        default=None,
        help="ceiling of the queue polling back-off in seconds (default: host.json or 30)",
    )
    serve.add_argument(
        "--visibility-timeout",
        type=float,
        default=None,
        help="seconds a dequeued message stays hidden (default 300, as in Azure); bounds recovery after a crash",
    )
    serve.add_argument("--drain-timeout", type=float, default=30.0, help="seconds to let running work finish")
    serve.add_argument(
        "--clock-file",
        default=None,
        help="tests only: run on the wall clock plus the offset in seconds this file holds (OffsetFileClock), so a "
        "test can move the host's time (durable timers, timestamps) together with other processes reading the file",
    )
    return parser


def configure_logging(*, verbose: bool, replay_logs: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s %(name)s: %(message)s"))
    if not replay_logs:
        handler.addFilter(ReplayLogFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    # Engine internals are quiet unless asked; the host's own lines (one per invocation) always show.
    logging.getLogger("durable_local").setLevel(logging.DEBUG if verbose else logging.WARNING)
    logging.getLogger("durable_local.host").setLevel(logging.INFO)
    logging.getLogger("durable_local.cli").setLevel(logging.INFO)
    logging.getLogger("azure").setLevel(logging.WARNING)


def serve(args: argparse.Namespace) -> int:
    configure_logging(verbose=args.verbose, replay_logs=args.replay_logs)
    overrides: dict[str, timedelta] = {}
    if args.max_polling_interval is not None:
        overrides["max_queue_polling_interval"] = timedelta(seconds=args.max_polling_interval)
    if args.visibility_timeout is not None:
        hidden = timedelta(seconds=args.visibility_timeout)
        overrides["control_queue_visibility_timeout"] = hidden
        overrides["work_item_visibility_timeout"] = hidden
    host = LocalHost(
        args.app_dir,
        host=args.host,
        port=args.port,
        store=args.store,
        mode=args.mode,
        require_keys=args.require_keys,
        hub_name=args.hub,
        settings_overrides=overrides,
        drain_timeout=args.drain_timeout,
        clock=OffsetFileClock(args.clock_file) if args.clock_file else None,
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        logger.info("Received %s: draining", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        host.start()
    except (AppLoadError, HostConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        host.stop(drain_timeout=0)
        return 2
    print_banner(host)
    stop.wait()
    host.stop()
    return 0


def print_banner(host: LocalHost) -> None:
    assert host.app is not None and host.settings is not None
    prefix = f"/{host.settings.route_prefix}" if host.settings.route_prefix else ""
    lines = [f"Listening on {host.base_url} (hub {host.settings.hub_name})", "", "Functions:", ""]
    for function in host.app.http:
        methods = ",".join(function.methods)
        lines.append(f"        {function.name}: [{methods}] {host.base_url}{prefix}/{function.route.template}")
    lines += [f"        {timer.name}: timerTrigger ({timer.schedule})" for timer in host.app.timers]
    lines += [f"        {name}: orchestrationTrigger" for name in host.app.orchestrators]
    lines += [f"        {name}: activityTrigger" for name in host.app.activities]
    lines += [f"        {name}: entityTrigger" for name in host.app.entities]
    if host.app.timers or host.app.activities:
        lines += [
            "",
            f'Run a timer or activity by hand: POST {host.base_url}/admin/functions/<name> {{"input": "..."}}',
        ]
    if host.keys.required:
        # Printed on purpose (like `func keys list`): these are throw-away keys of this local process.
        lines += [
            "",
            f"Function key (default): {host.keys.function_key}",
            f"Master key: {host.keys.master_key}",
            f"System key (durabletask_extension): {host.keys.system_key}",
        ]
    print("\n".join(lines), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "serve":
        return serve(args)
    return 2
