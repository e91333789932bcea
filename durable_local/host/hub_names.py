"""The task hub name the Durable extension (Azure Storage provider) serves, and the names it refuses.

Re-implemented from azure-functions-durable-extension (v2.13):

* ``DurableTaskOptions.HubName``: without ``hubName`` in host.json the hub is ``WEBSITE_SITE_NAME``, or
  ``TestHubName`` when that is unset; ``ResolveAppSettingOptions`` resolves a whole-string ``%SETTING%`` (an
  unresolved reference stays as written); ``Validate`` refuses an empty name.
* ``AzureStorageDurabilityProviderFactory.EnsureDefaultClientSettingsInitialized``: a default name (the one above,
  compared case-insensitively) is *sanitized* (``AzureStorageOptions.IsSanitizedHubName``: letters and digits kept,
  a ``t`` put before a leading digit, cut to 45 characters, ``Hub`` appended below 3, ``DefaultTaskHub`` when nothing
  is left); any other name is *validated* (``AzureStorageOptions.ValidateHubName``): it must be a valid blob,
  container, table and queue name, the table rule being the strictest (ASCII letters and digits, a letter first,
  3-63 characters: learn.microsoft.com, "Understanding the Table service data model"), and at most 50 characters.
  The message says 45; the code's limit is 50, and so is the one here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

DEFAULT_HUB_NAME = "TestHubName"
_MIN_LENGTH = 3
_MAX_SANITIZED_LENGTH = 45
_MAX_VALIDATED_LENGTH = 50
_TABLE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]{2,62}")


class HubNameError(ValueError):
    """The extension refuses the hub name; the message is the extension's."""


def served_hub_name(setting: str | None, environ: Mapping[str, str]) -> str:
    """The hub a host.json ``hubName`` setting (None = absent) names, or ``HubNameError``."""
    default = environ.get("WEBSITE_SITE_NAME") or DEFAULT_HUB_NAME
    name = default if setting is None else _resolve_whole_string(setting, environ)
    if not name:
        raise HubNameError("A non-empty HubName configuration is required.")
    if name.lower() == default.lower():
        return sanitized_hub_name(name)
    validate_hub_name(name)
    return name


def validate_hub_name(name: str) -> None:
    if _TABLE_NAME.fullmatch(name) is None or len(name) > _MAX_VALIDATED_LENGTH:
        raise HubNameError(
            f"Task hub name '{name}' should contain only alphanumeric characters, start with a letter, and have length "
            f"between {_MIN_LENGTH} and {_MAX_SANITIZED_LENGTH}."
        )


def sanitized_hub_name(name: str) -> str:
    kept = [c for c in name if c.isalnum()]
    if not kept:
        return "DefaultTaskHub"
    if kept[0].isdigit():
        kept.insert(0, "t")
    sanitized = "".join(kept[:_MAX_SANITIZED_LENGTH])
    return sanitized + "Hub" if len(sanitized) < _MIN_LENGTH else sanitized


def _resolve_whole_string(value: str, environ: Mapping[str, str]) -> str:
    """``INameResolver.TryResolveWholeString``: ``%NAME%`` becomes the setting's value when it exists."""
    if len(value) > 2 and value.startswith("%") and value.endswith("%"):
        resolved = environ.get(value[1:-1])
        if resolved is not None:
            return resolved
    return value
