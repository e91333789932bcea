"""A ``requests.Session`` that applies its CA bundle and timeout to every request.

requests lets the ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE`` environment variables override ``Session.verify``
(psf/requests#3829), so a configured CA bundle (the local emulator's) must be passed on each call to take effect.
"""

from __future__ import annotations

from typing import Any

import requests

from shared.errors import ConfigError


def tls_config_error(host: str) -> ConfigError:
    """A certificate verification failure is a setup problem, not a transient one: name the setting to fix."""
    return ConfigError("ca_bundle", f"TLS certificate of {host} is not trusted; set ca_bundle to its CA bundle")


class PinnedSession(requests.Session):
    """Session whose ``verify`` and ``timeout`` defaults win over the environment."""

    def __init__(self, *, verify: str | bool = True, timeout: float | None = None) -> None:
        super().__init__()
        self.verify = verify
        self._default_timeout = timeout

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        if kwargs.get("verify") is None:
            kwargs["verify"] = self.verify
        if kwargs.get("timeout") is None and self._default_timeout is not None:
            kwargs["timeout"] = self._default_timeout
        return super().request(method, url, *args, **kwargs)
