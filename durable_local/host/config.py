"""What the host reads from a function app folder: ``host.json`` and ``local.settings.json``.

Only the settings the local host honours are extracted; everything else in ``host.json`` is ignored
(``docs/local-host.md`` lists what is not supported). What the Functions host or the Durable extension refuses is
refused with their message: a ``host.json`` without ``"version": "2.0"``, a ``storageProvider.type`` other than Azure
Storage, and (``hub_name_of``, once the app settings are known) a task hub name the storage service rejects.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durable_local.host.hub_names import DEFAULT_HUB_NAME, HubNameError, served_hub_name
from durable_local.host.retries import RetryPolicy, RetryPolicyError, policy_from_host_json

logger = logging.getLogger(__name__)

HOST_JSON_HELP = "https://aka.ms/functions-hostjson"
AZURE_STORAGE_PROVIDER = "AzureStorage"


class HostConfigError(Exception):
    """The app folder or one of its settings files is unusable (message names the file and key)."""


@dataclass(frozen=True, slots=True)
class AppSettings:
    """The durable and HTTP settings of one app, from ``host.json``."""

    hub_name: str = DEFAULT_HUB_NAME
    """The served hub: ``hub_name_of`` (resolved and checked) once the host starts; the raw default before."""
    hub_name_setting: str | None = None
    """``extensions.durableTask.hubName`` as written (``%SETTING%`` unresolved), None when absent."""
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
    overridable_existing_instance_states: str = "NonRunningStates"
    """``overridableExistingInstanceStates``: ``AnyState`` lets a start replace a Pending, Running, Suspended or
    ContinuedAsNew instance of the same id (DTFx gets no dedupe statuses); ``NonRunningStates`` refuses it."""
    retry: RetryPolicy | None = None
    """host.json ``retry``: the policy of every function without its own ``@app.retry`` (orchestrators excepted)."""
    raw: Mapping[str, Any] = field(default_factory=dict)


def load_host_json(app_dir: Path) -> AppSettings:
    """Read ``app_dir/host.json`` (a missing file means defaults)."""
    path = app_dir / "host.json"
    if not path.exists():
        return AppSettings()  # the Functions host writes {"version": "2.0"} and goes on with the defaults
    try:
        raw = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as exc:
        raise HostConfigError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise HostConfigError(f"{path}: the top level must be a JSON object")
    _check_version(raw, path)
    extensions = _section(raw, "extensions", path)
    durable = _section(extensions, "durableTask", path)
    provider = _section(durable, "storageProvider", path)
    _check_storage_provider(provider, path)
    hub_setting = durable.get("hubName")
    if hub_setting is not None and not isinstance(hub_setting, str):
        raise HostConfigError(f"{path}: 'hubName' must be a string")
    http = _section(extensions, "http", path)
    prefix = http.get("routePrefix", "api")
    if not isinstance(prefix, str):
        raise HostConfigError(f"{path}: extensions.http.routePrefix must be a string")
    return AppSettings(
        hub_name_setting=hub_setting,
        route_prefix=prefix.strip("/"),
        max_concurrent_activities=_positive_int(durable, "maxConcurrentActivityFunctions", 10, path),
        max_concurrent_orchestrations=_positive_int(durable, "maxConcurrentOrchestratorFunctions", 10, path),
        partition_count=_positive_int(provider, "partitionCount", 4, path),
        max_queue_polling_interval=_timespan_seconds(provider.get("maxQueuePollingInterval"), path),
        max_entity_operation_batch_size=_positive_int(durable, "maxEntityOperationBatchSize", 5000, path),
        entity_message_reorder_window_minutes=_positive_int(durable, "entityMessageReorderWindowInMinutes", 30, path),
        store_inputs_in_orchestration_history=_bool(durable, "storeInputsInOrchestrationHistory", False, path),
        overridable_existing_instance_states=_overridable_states(
            durable.get("overridableExistingInstanceStates"), path
        ),
        retry=_retry(raw, path),
        raw=raw,
    )


OVERRIDABLE_STATES = ("AnyState", "NonRunningStates")
"""The extension's ``OverridableStates`` enum, in the order of its values (0, 1)."""


def _overridable_states(value: object, path: Path) -> str:
    """``overridableExistingInstanceStates`` bound as .NET configuration binds an enum: its name in any case, or its
    number (as text or a JSON number)."""
    if value is None:
        return "NonRunningStates"
    text = _dotnet_string(value)
    text = "" if text is None else text.strip()
    for index, name in enumerate(OVERRIDABLE_STATES):
        if text.lower() == name.lower() or text == str(index):
            return name
    raise HostConfigError(
        f"{path}: Failed to convert configuration value at 'extensions:durableTask:overridableExistingInstanceStates' "
        f"({value!r}) to type 'OverridableStates': use AnyState or NonRunningStates."
    )


def _retry(raw: Mapping[str, Any], path: Path) -> RetryPolicy | None:
    """host.json ``retry`` (top level; keys in any case, as .NET configuration reads them)."""
    section = next((value for key, value in raw.items() if str(key).lower() == "retry"), None)
    if section is None:
        return None
    if not isinstance(section, dict):
        raise HostConfigError(f"{path}: 'retry' must be a JSON object")
    try:
        return policy_from_host_json(section)
    except RetryPolicyError as exc:
        raise HostConfigError(f"{path}: {exc}") from exc


def hub_name_of(settings: AppSettings, environ: Mapping[str, str]) -> str:
    """The hub the extension serves for these settings (``durable_local.host.hub_names``), or ``HostConfigError``
    with the extension's message."""
    try:
        return served_hub_name(settings.hub_name_setting, environ)
    except HubNameError as exc:
        raise HostConfigError(str(exc)) from exc


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


def _check_version(raw: Mapping[str, Any], path: Path) -> None:
    """``HostJsonFileConfigurationSource.InitializeHostConfig``: an empty object becomes the default; otherwise
    ``version`` must be "2.0" (the messages are the host's)."""
    if not raw:
        return
    version = _dotnet_string(raw.get("version"))
    if not version:
        raise HostConfigError(
            f"{path}: The host.json file is missing the required 'version' property. See {HOST_JSON_HELP} for steps "
            "to migrate the configuration file."
        )
    if version != "2.0":
        message = (
            f"'{version}' is an invalid value for host.json 'version' property. We recommend you set the 'version' "
            "property to '2.0'. "
        )
        if version.lower().startswith("3"):
            message += (
                "This does not correspond to the function runtime version, only to the schema version of the "
                "host.json file. "
            )
        raise HostConfigError(f"{path}: {message}See {HOST_JSON_HELP} for more information on this configuration file.")


def _dotnet_string(value: object) -> str | None:
    """``JToken.Value<string>()`` of a JSON value, for the values people write."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _check_storage_provider(provider: Mapping[str, Any], path: Path) -> None:
    """``DurableTaskExtension.GetDurabilityProviderFactory``: ``type`` names a provider (case-insensitive); only
    Azure Storage is emulated here."""
    if "type" not in provider:
        return
    kind = provider["type"]
    if isinstance(kind, str) and kind.lower() == AZURE_STORAGE_PROVIDER.lower():
        return
    raise HostConfigError(
        f"{path}: Storage provider type ({kind}) was not found. Available storage providers: "
        f"{AZURE_STORAGE_PROVIDER}. (extensions.durableTask.storageProvider.type: {kind} is not supported by the local "
        "host, which emulates the Azure Storage provider only; remove 'type' or set it to AzureStorage to run the app "
        "here.)"
    )


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
