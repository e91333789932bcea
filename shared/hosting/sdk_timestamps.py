"""Opt-in speed-up of the Durable Functions Python SDK's history parsing (``COLLECTOR_FAST_SDK_TIMESTAMPS``).

Every orchestrator episode, the SDK builds one ``HistoryEvent`` per event of the whole history and parses each
event's ``Timestamp`` with ``dateutil.parser.parse`` (about 40 µs per call): for a long execution that is most of the
episode's CPU, on Azure as much as locally. The extension writes those timestamps in one form only, .NET's round-trip
UTC form (``2024-01-01T00:00:00.1234567Z``, fraction trimmed or absent), which ``datetime.fromisoformat`` parses in
well under a microsecond with the same result (fractions beyond six digits truncated, as dateutil does).

``install`` swaps the module-level name ``dt_parse`` of ``azure.durable_functions.models.history.HistoryEvent`` — an
internal of the SDK, not an API — for :func:`parse_history_timestamp`, which takes the fast path only for text ending
in ``Z`` that ``fromisoformat`` accepts and hands everything else to dateutil. It only does so for SDK versions whose
``HistoryEvent`` module was read and checked (:data:`VERIFIED_SDK_VERSIONS`); any other version, or a module that no
longer looks as expected, is left alone. What is and is not identical is in ``docs/sdk-timestamps.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from importlib import metadata
from types import ModuleType

from dateutil.parser import parse as _dateutil_parse

logger = logging.getLogger(__name__)

SDK_DISTRIBUTION = "azure-functions-durable"
HISTORY_EVENT_MODULE = "azure.durable_functions.models.history.HistoryEvent"

VERIFIED_SDK_VERSIONS = frozenset(
    {"1.2.9", "1.2.10", "1.3.0", "1.3.1", "1.3.2", "1.3.3", "1.4.0", "1.5.0", "1.6.0", "1.7.0"}
)
"""Releases whose ``HistoryEvent`` module imports ``dateutil.parser.parse as dt_parse`` and calls it once, on the
event's ``Timestamp``, and whose other uses of that datetime are ``strftime``/``timestamp()``/arithmetic."""


def parse_history_timestamp(text: str) -> datetime:
    """What ``dateutil.parser.parse`` returns for a history timestamp, without its cost for the extension's form."""
    if isinstance(text, str) and len(text) >= 20 and text[10] == "T" and text[-1] == "Z":
        try:
            parsed = datetime.fromisoformat(text[:-1])
        except ValueError:
            parsed = None  # not ISO after all (or out of range): let dateutil decide, as the SDK would
        if parsed is not None and parsed.tzinfo is None:
            return parsed.replace(tzinfo=UTC)
    result: datetime = _dateutil_parse(text)
    return result


class InstallOutcome(StrEnum):
    INSTALLED = "installed"
    ALREADY_INSTALLED = "already installed"
    DISABLED = "disabled by setting"
    UNVERIFIED_VERSION = "SDK version not verified"
    UNEXPECTED_LAYOUT = "SDK module does not look as expected"


def _sdk_version() -> str | None:
    try:
        return metadata.version(SDK_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def _history_module() -> ModuleType | None:
    import importlib

    try:
        return importlib.import_module(HISTORY_EVENT_MODULE)
    except ImportError:
        return None


def install(
    *,
    enabled: bool = True,
    version: Callable[[], str | None] = _sdk_version,
    module: Callable[[], ModuleType | None] = _history_module,
) -> InstallOutcome:
    """Swap the SDK's history-timestamp parser when enabled, the SDK version is verified and the module matches."""
    if not enabled:
        return InstallOutcome.DISABLED
    found = version()
    if found not in VERIFIED_SDK_VERSIONS:
        logger.info("fast SDK timestamps not installed: %s %s is not a verified version", SDK_DISTRIBUTION, found)
        return InstallOutcome.UNVERIFIED_VERSION
    target = module()
    current = getattr(target, "dt_parse", None)
    if current is parse_history_timestamp:
        return InstallOutcome.ALREADY_INSTALLED
    if target is None or current is not _dateutil_parse:
        logger.warning("fast SDK timestamps not installed: %s has no dateutil dt_parse", HISTORY_EVENT_MODULE)
        return InstallOutcome.UNEXPECTED_LAYOUT
    target.dt_parse = parse_history_timestamp  # type: ignore[attr-defined]
    return InstallOutcome.INSTALLED


def uninstall(module: Callable[[], ModuleType | None] = _history_module) -> None:
    """Put dateutil back (tests and benchmarks compare both)."""
    target = module()
    if target is not None and getattr(target, "dt_parse", None) is parse_history_timestamp:
        target.dt_parse = _dateutil_parse  # type: ignore[attr-defined]


def install_from_env(environ: Mapping[str, str]) -> InstallOutcome:
    """The app's composition root calls this: the setting comes from the one settings object when it is valid.

    A settings error elsewhere must not stop the app from loading (the collection reports it, naming the setting),
    so an invalid environment falls back to the documented default (on).
    """
    from shared.errors import ConfigError
    from shared.settings import Settings

    try:
        enabled = Settings.from_env(environ).fast_sdk_timestamps
    except ConfigError:
        enabled = Settings().fast_sdk_timestamps
    return install(enabled=enabled)
