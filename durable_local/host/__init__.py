"""The local Functions host: serve any Python v2-model function app on the local durable engine.

Command line (see ``docs/local-host.md``)::

    python -m durable_local serve --app-dir DIR [--port 7071] [--store memory|PATH] [--mode shim|ideal]
                                  [--require-keys] [--verbose] [--replay-logs]

Programmatic use (tests, tools)::

    from durable_local.host import LocalHost

    with LocalHost("path/to/app", port=0, store="memory") as host:
        host.base_url                      # "http://127.0.0.1:<port>"
        host.keys                          # HostKeys(function_key, master_key, system_key, required)
        host.engine                        # the DurableEngine the app runs on
    # leaving the block drains the engine and stops the server

``LocalHost(app_dir, *, host="127.0.0.1", port=7071, store=None, mode="shim", require_keys=False,
hub_name=None, settings_overrides=None, engine_factory=None, drain_timeout=30.0)``; ``start()`` loads the
app, starts the engine and serves HTTP from a background thread with its own event loop; ``stop()`` stops
accepting requests and drains the engine.

Modules: ``config`` (host.json, local.settings.json), ``loader`` (import + index the app), ``routing``
(route templates), ``invoke`` (worker-compatible invocation), ``client_binding`` (durableClient JSON),
``keys``, ``status_json`` (extension JSON shapes), ``webhooks`` (the Durable HTTP API; ``entity_api`` its
``entities/`` routes), ``server``
(aiohttp app), ``host`` (``LocalHost``).
"""

from __future__ import annotations

from durable_local.host.config import AppSettings, HostConfigError
from durable_local.host.host import LocalHost
from durable_local.host.keys import HostKeys
from durable_local.host.loader import AppLoadError, LoadedApp, load_app

__all__ = ["AppLoadError", "AppSettings", "HostConfigError", "HostKeys", "LoadedApp", "LocalHost", "load_app"]
