"""What the host reads from a function app folder: ``host.json`` and ``local.settings.json``.

Only the settings the local host honours are extracted; everything else in ``host.json`` is ignored
(``docs/local-host.md`` lists what is not supported).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

DEFAULT_HUB_NAME = "TestHubName"
"""The hub name the Durable extension uses locally when ``host.json`` names none."""


class HostConfigError(Exception):
    """The app folder or one of its settings files is unusable (message names the file and key)."""


@dataclass(frozen=True, slots=True)
class AppSettings:
    """The durable and HTTP settings of one app, from ``host.json``."""

    hub_name: str = DEFAULT_HUB_NAME
    route_prefix: str = "api"
    max_concurrent_activities: int = 10
    max_concurrent_orchestrations: int = 10
    partition_count: int = 4
    max_queue_polling_interval: float | None = None
    """Seconds (``storageProvider.maxQueuePollingInterval``), None when not set."""
    max_entity_operation_batch_size: int = 5000
    entity_message_reorder_window_minutes: int = 30
    store_inputs_in_orchestration_history: bool = False
    """``storeInputsInOrchestrationHistory``: activity and sub-orchestration inputs are kept in history."""
    raw: Mapping[str, Any] = field(default_factory=dict)


def load_host_json(app_dir: Path) -> AppSettings:
    """Read ``app_dir/host.json`` (a missing file means defaults)."""
    path = app_dir / "host.json"
    if not path.exists():
        return AppSettings()
    try:
        raw = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as exc:
        raise HostConfigError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise HostConfigError(f"{path}: the top level must be a JSON object")
    extensions = _section(raw, "extensions", path)
    durable = _section(extensions, "durableTask", path)
    provider = _section(durable, "storageProvider", path)
    http = _section(extensions, "http", path)
    prefix = http.get("routePrefix", "api")
    if not isinstance(prefix, str):
        raise HostConfigError(f"{path}: extensions.http.routePrefix must be a string")
    return AppSettings(
        hub_name=_string(durable, "hubName", DEFAULT_HUB_NAME, path),
        route_prefix=prefix.strip("/"),
        max_concurrent_activities=_positive_int(durable, "maxConcurrentActivityFunctions", 10, path),
        max_concurrent_orchestrations=_positive_int(durable, "maxConcurrentOrchestratorFunctions", 10, path),
        partition_count=_positive_int(provider, "partitionCount", 4, path),
        max_queue_polling_interval=_timespan_seconds(provider.get("maxQueuePollingInterval"), path),
        max_entity_operation_batch_size=_positive_int(durable, "maxEntityOperationBatchSize", 5000, path),
        entity_message_reorder_window_minutes=_positive_int(durable, "entityMessageReorderWindowInMinutes", 30, path),
        store_inputs_in_orchestration_history=_bool(durable, "storeInputsInOrchestrationHistory", False, path),
        raw=raw,
    )


def apply_local_settings(app_dir: Path, environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Copy ``local.settings.json`` ``Values`` into the environment like ``func start``: variables that
    are already set win. Returns the names that were set (never their values: they may be secrets)."""
    env = os.environ if environ is None else environ
    path = app_dir / "local.settings.json"
    if not path.exists():
        return []
    try:
        raw = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as exc:
        raise HostConfigError(f"{path}: not valid JSON ({exc})") from exc
    values = raw.get("Values", {}) if isinstance(raw, dict) else None
    if not isinstance(values, dict):
        raise HostConfigError(f"{path}: 'Values' must be a JSON object")
    applied: list[str] = []
    for name, value in values.items():
        if name in env:
            continue
        env[str(name)] = "" if value is None else str(value)
        applied.append(str(name))
    return applied


def _section(parent: Mapping[str, Any], key: str, path: Path) -> Mapping[str, Any]:
    value = parent.get(key, {})
    if not isinstance(value, dict):
        raise HostConfigError(f"{path}: '{key}' must be a JSON object")
    return value


def _string(section: Mapping[str, Any], key: str, default: str, path: Path) -> str:
    value = section.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise HostConfigError(f"{path}: '{key}' must be a non-empty string")
    # Like the extension, app settings can be referenced as %NAME%.
    if value.startswith("%") and value.endswith("%") and len(value) > 2:
        return os.environ.get(value[1:-1], default)
    return value


def _bool(section: Mapping[str, Any], key: str, default: bool, path: Path) -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise HostConfigError(f"{path}: '{key}' must be true or false, got {value!r}")
    return value


def _positive_int(section: Mapping[str, Any], key: str, default: int, path: Path) -> int:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise HostConfigError(f"{path}: '{key}' must be a positive integer, got {value!r}")
    return value


def _timespan_seconds(value: object, path: Path) -> float | None:
    """Parse a .NET TimeSpan (``hh:mm:ss[.fff]`` or ``d.hh:mm:ss``) into seconds."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise HostConfigError(f"{path}: maxQueuePollingInterval must be a TimeSpan string like '00:00:30'")
    days = 0
    text = value.strip()
    head, _, rest = text.partition(":")
    if "." in head:
        day_text, _, head = head.partition(".")
        days = int(day_text)
    try:
        hours = int(head)
        minutes_text, _, seconds_text = rest.partition(":")
        seconds = days * 86400 + hours * 3600 + int(minutes_text) * 60 + float(seconds_text)
    except ValueError as exc:
        raise HostConfigError(f"{path}: maxQueuePollingInterval {value!r} is not a TimeSpan") from exc
    return seconds
