"""``LocalHost``: load an app, run it on the local engine, serve it over HTTP from a background thread."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from aiohttp import web

from durable_local.engine_api import DurableEngine
from durable_local.host.admin import AdminFunctions, ManualRunners
from durable_local.host.client_binding import client_binding_json, website_base_url
from durable_local.host.config import (
    AppSettings,
    HostConfigError,
    apply_local_settings,
    hub_name_of,
    load_host_json,
)
from durable_local.host.invoke import AsyncRunner, make_activity, make_entity, make_orchestrator
from durable_local.host.keys import HostKeys
from durable_local.host.loader import (
    ActivityFunction,
    EntityFunction,
    HttpFunction,
    LoadedApp,
    TimerFunction,
    load_app,
)
from durable_local.host.retries import RetryPolicy
from durable_local.host.server import AppServer
from durable_local.host.stats_route import STATS_PATH, stats_handler
from durable_local.host.timers import FileStatusStore, MemoryStatusStore, StatusStore, TimerHost
from durable_local.host.webhooks import DurableHttpApi
from durable_local.model import FunctionRegistry, SchedulingMode
from durable_local.ports import Clock

logger = logging.getLogger(__name__)

EngineFactory = Callable[[FunctionRegistry, AppSettings], DurableEngine]


async def _close_sdk_session() -> None:
    """The SDK client keeps one aiohttp session per process on this loop; close it before the loop ends."""
    try:
        from azure.durable_functions.models.utils import http_utils
    except ImportError:  # pragma: no cover - the SDK is a dependency of every app this host serves
        return
    closer = getattr(http_utils, "_close_session", None)
    if closer is not None:
        await closer()


class LocalHost:
    """Serve one v2-model function app on the local durable engine.

    Args:
        app_dir: folder with ``function_app.py`` (and optionally ``host.json``, ``local.settings.json``).
        host: interface to bind (loopback by default).
        port: TCP port; 0 picks a free one (read it back from ``base_url``).
        store: ``"memory"`` or a SQLite file path; None = ``./.durable_local/<hub>.sqlite``.
        mode: ``"shim"`` (faithful to the extension) or ``"ideal"`` scheduling.
        require_keys: enforce function/master/system keys (``keys``).
        hub_name: overrides ``host.json``'s hub name.
        settings_overrides: ``EngineSettings`` fields to replace (e.g. ``max_queue_polling_interval``).
        engine_factory: build the engine yourself (tests); gets the registry and the app's settings.
        drain_timeout: seconds ``stop()`` lets running work finish.
        clock: the engine's and the store's time (``SystemClock`` by default); tests pass an ``OffsetFileClock``
            to run a simulated week in minutes.
    """

    def __init__(
        self,
        app_dir: str | Path,
        *,
        host: str = "127.0.0.1",
        port: int = 7071,
        store: str | None = None,
        mode: str = "shim",
        require_keys: bool = False,
        hub_name: str | None = None,
        settings_overrides: Mapping[str, Any] | None = None,
        engine_factory: EngineFactory | None = None,
        drain_timeout: float = 30.0,
        clock: Clock | None = None,
    ) -> None:
        self.app_dir = Path(app_dir).resolve()
        self._host = host
        self._port = port
        self._store_spec = store
        self._mode = SchedulingMode(mode)
        self.keys = HostKeys(required=require_keys)
        self._hub_override = hub_name
        self._overrides = dict(settings_overrides or {})
        self._engine_factory = engine_factory
        self._drain_timeout = drain_timeout
        self._clock = clock
        self._runner = AsyncRunner()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._web_runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._store: Any = None
        self._bound_port: int | None = None
        self.settings: AppSettings | None = None
        self.app: LoadedApp | None = None
        self._engine: DurableEngine | None = None
        self._website_hostname: str | None = None
        self._timers: TimerHost | None = None
        self._retries_stop = threading.Event()
        """Set when the host stops: waits between retries of activities and entities end."""
        self._manual_runs: set[Future[None]] = set()
        self._manual_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="manual-run")
        self._registry = FunctionRegistry(orchestrators={}, activities={})

    # -- public surface ------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._bound_port is None:
            raise RuntimeError("the host is not started")
        return f"http://{self._host}:{self._bound_port}"

    @property
    def public_base_url(self) -> str:
        """The base of every URL in the host's answers and of ``req.url`` given to functions.

        ``WEBSITE_HOSTNAME`` when the environment (or ``local.settings.json``) sets it, as the Functions host's
        webhook provider does (http for ``localhost:<port>``, https otherwise; Core Tools sets it to the address it
        serves unless already set); else ``base_url``. Never the request's ``Host`` header: on Azure the front end
        only lets through host names bound to the site, here nothing would, and the answers carry the system key.
        """
        hostname = (self._website_hostname or "").strip()
        return website_base_url(hostname) if hostname else self.base_url

    @property
    def engine(self) -> DurableEngine:
        if self._engine is None:
            raise RuntimeError("the host is not started")
        return self._engine

    def start(self) -> None:
        """Load the app, start the engine and serve HTTP; returns once the port listens."""
        # As `func start` does: the app (and the Functions host's own rules) read it as "local development", ahead
        # of platform variables a developer's container may also carry (CONTAINER_NAME).
        os.environ.setdefault("FUNCTIONS_CORETOOLS_ENVIRONMENT", "true")
        apply_local_settings(self.app_dir)
        self._website_hostname = os.environ.get("WEBSITE_HOSTNAME")
        settings = load_host_json(self.app_dir)
        if self._hub_override:
            settings = replace(settings, hub_name_setting=self._hub_override)
        settings = replace(settings, hub_name=hub_name_of(settings, os.environ))
        self.settings = settings
        self.app = load_app(self.app_dir)
        apply_default_retry(self.app, settings.retry)
        check_client_task_hubs(self.app, settings.hub_name)
        self._timers = TimerHost(
            self.app,
            os.environ,
            store=self._timer_status_store(settings),
            client_binding=lambda client: client_binding_json(
                self.public_base_url, settings.hub_name, self.keys, task_hub=client.task_hub, rpc_base=self.base_url
            ),
        )
        registry = FunctionRegistry(
            orchestrators={name: make_orchestrator(fn) for name, fn in self.app.orchestrators.items()},
            activities={
                name: make_activity(fn, self._runner, str(self.app_dir), self._retries_stop)
                for name, fn in self.app.activities.items()
            },
            entities={name: make_entity(fn, self._retries_stop) for name, fn in self.app.entities.items()},
        )
        self._registry = registry
        self._engine = (self._engine_factory or self._default_engine)(registry, settings)
        self._loop = asyncio.new_event_loop()
        self._runner.loop = self._loop
        self._thread = threading.Thread(target=self._loop.run_forever, name="durable-local-http", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(settings), self._loop).result(timeout=30)
        self._engine.start()
        self._timers.start(self._loop)  # after the engine, as the host starts trigger listeners after extensions
        logger.info("Host started at %s (hub %s)", self.base_url, settings.hub_name)

    def stop(self, drain_timeout: float | None = None) -> None:
        """Stop accepting requests, drain the engine (no work lost), then stop the loop. Idempotent."""
        loop = self._loop
        if loop is None:
            return
        if self._site is not None:
            asyncio.run_coroutine_threadsafe(self._site.stop(), loop).result(timeout=30)
        self._retries_stop.set()
        if self._timers is not None:
            # No new timer invocation; a running one may finish (it may still start orchestrations).
            self._timers.stop(loop, self._drain_timeout if drain_timeout is None else drain_timeout)
        if self._engine is not None:
            # The loop stays up while draining: async activities run on it.
            self._engine.stop(drain_timeout=self._drain_timeout if drain_timeout is None else drain_timeout)
        for manual in list(self._manual_runs):
            manual.cancel()  # manual activity runs not started yet (running ones finish in their thread)
        self._manual_pool.shutdown(wait=False, cancel_futures=True)
        if self._web_runner is not None:
            asyncio.run_coroutine_threadsafe(self._web_runner.cleanup(), loop).result(timeout=30)
        asyncio.run_coroutine_threadsafe(_close_sdk_session(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=30)
        loop.close()
        self._loop = None
        if self._store is not None:
            self._store.close()
            self._store = None
        logger.info("Host stopped")

    def __enter__(self) -> LocalHost:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    # -- internals -----------------------------------------------------------------------------------

    async def _serve(self, settings: AppSettings) -> None:
        assert self.app is not None and self._engine is not None
        api = DurableHttpApi(self._engine, base_url=lambda: self.public_base_url, keys=self.keys)
        server = AppServer(
            self.app,
            api,
            hub_name=settings.hub_name,
            route_prefix=settings.route_prefix,
            keys=self.keys,
            base_url=lambda: self.public_base_url,
            rpc_base_url=lambda: self.base_url,
            admin=AdminFunctions(
                self.app, self.keys, ManualRunners(timer=self._run_timer, activity=self._run_activity)
            ),
            admin_routes={STATS_PATH: stats_handler(self._engine, self.keys)},
        )
        self._web_runner = web.AppRunner(server.build(), access_log=None, handle_signals=False)
        await self._web_runner.setup()
        self._site = web.TCPSite(self._web_runner, self._host, self._port, shutdown_timeout=5)
        await self._site.start()
        sockets = getattr(self._site._server, "sockets", None) or []
        self._bound_port = int(sockets[0].getsockname()[1]) if sockets else self._port

    def _run_timer(self, name: str) -> None:
        assert self._timers is not None
        self._timers.run_now(name)

    def _run_activity(self, name: str, input_json: str | None) -> None:
        """A manual run of an activity: the extension reads the input as the activity's serialized input."""
        function = self._registry.activity(name)
        assert function is not None

        def run() -> None:
            try:
                function(input_json)
            except Exception:
                logger.exception("Manual run of activity '%s' failed", name)

        future: Future[None] = self._manual_pool.submit(run)
        self._manual_runs.add(future)
        future.add_done_callback(self._manual_runs.discard)

    def _store_spec_for(self, settings: AppSettings) -> str:
        return self._store_spec or str(Path.cwd() / ".durable_local" / f"{settings.hub_name}.sqlite")

    def _timer_status_store(self, settings: AppSettings) -> StatusStore:
        """Timer schedule statuses live next to a SQLite store (they survive restarts, like the host's status blobs);
        with the memory store, or an engine the caller built, in memory."""
        if self._engine_factory is not None and self._store_spec is None:
            return MemoryStatusStore()
        spec = self._store_spec_for(settings).strip()
        if spec.lower() == "memory":
            return MemoryStatusStore()
        return FileStatusStore(Path(spec + ".timers"))

    def _default_engine(self, registry: FunctionRegistry, settings: AppSettings) -> DurableEngine:
        from durable_local.clock import SystemClock
        from durable_local.engine import Engine
        from durable_local.settings import EngineSettings
        from durable_local.storage import open_store

        spec = self._store_spec_for(settings)
        clock = self._clock or SystemClock()
        self._store = open_store(spec, clock)
        fields: dict[str, Any] = {
            "hub_name": settings.hub_name,
            "partition_count": settings.partition_count,
            "max_concurrent_activities": settings.max_concurrent_activities,
            "max_concurrent_orchestrations": settings.max_concurrent_orchestrations,
            "scheduling_mode": self._mode,
            "max_entity_operation_batch_size": settings.max_entity_operation_batch_size,
            "entity_message_reorder_window": timedelta(minutes=settings.entity_message_reorder_window_minutes),
            "store_inputs_in_orchestration_history": settings.store_inputs_in_orchestration_history,
            "overridable_existing_instance_states": settings.overridable_existing_instance_states,
        }
        if settings.max_queue_polling_interval is not None:
            fields["max_queue_polling_interval"] = timedelta(seconds=settings.max_queue_polling_interval)
        env_polling = os.environ.get("DURABLE_LOCAL_MAX_POLLING_INTERVAL")
        if env_polling:
            fields["max_queue_polling_interval"] = timedelta(seconds=float(env_polling))
        fields.update(self._overrides)
        ceiling = fields.get("max_queue_polling_interval")
        if isinstance(ceiling, timedelta) and "min_queue_polling_interval" not in fields:
            fields["min_queue_polling_interval"] = min(timedelta(milliseconds=50), ceiling)
        engine_settings = EngineSettings(**fields)
        logger.info("Store: %s", self._store.description)
        engine: DurableEngine = Engine(
            registry, store=self._store, settings=engine_settings, clock=clock, mode=self._mode
        )
        return engine


def apply_default_retry(app: LoadedApp, policy: RetryPolicy | None) -> None:
    """host.json ``retry`` is the policy of every function without its own (the host puts it on the functions' type,
    the method's ``@app.retry`` wins). Orchestrators are left out: see ``docs/local-host.md``, "Retry policies"."""
    if policy is None:
        return
    functions: list[HttpFunction | TimerFunction | ActivityFunction | EntityFunction] = [
        *app.http,
        *app.timers,
        *app.activities.values(),
        *app.entities.values(),
    ]
    for function in functions:
        if function.retry is None:
            function.retry = policy


def check_client_task_hubs(app: LoadedApp, hub_name: str) -> None:
    """Refuse a ``durableClient`` binding that names another task hub than the one served.

    The extension gives such a client the other hub; this host serves one hub, so the client would silently
    manage the wrong instances. ``%SETTING%`` values are resolved from the environment, as the host does.
    Task hub names compare case-insensitively (Azure Storage names are).
    """
    with_clients: list[HttpFunction | TimerFunction] = [*app.http, *app.timers]
    for function in with_clients:
        for client in function.clients:
            wanted = client.task_hub
            if not wanted:
                continue
            if wanted.startswith("%") and wanted.endswith("%") and len(wanted) > 2:
                wanted = os.environ.get(wanted[1:-1], "")
            if wanted and wanted.lower() != hub_name.lower():
                raise HostConfigError(
                    f"function {function.name!r}: durableClient binding {client.parameter!r} targets task hub "
                    f"{wanted!r}, but the local host serves only {hub_name!r} (set it in host.json or --hub)"
                )
