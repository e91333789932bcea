"""Function keys, like ``func start`` with authentication enforced.

Without ``require_keys`` every route is anonymous (what ``func start`` does locally). With it, a function
key, the master key and the Durable extension's system key are generated per process:

* ``anonymous`` routes: no key;
* ``function`` routes: the function key or the master key;
* ``admin`` routes: the master key only;
* the Durable webhooks (``/runtime/webhooks/durabletask/...``): the system key or the master key.

A key is presented as ``?code=`` or in the ``x-functions-key`` header.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field


def _new_key() -> str:
    return secrets.token_urlsafe(32)


def keys_equal(presented: str, expected: str) -> bool:
    """Constant-time comparison of a presented key with an expected one.

    Compares UTF-8 bytes: ``hmac.compare_digest`` raises ``TypeError`` for ``str`` arguments with non-ASCII
    characters, which would turn a junk key from a client into a 500 instead of a 401.
    """
    return hmac.compare_digest(presented.encode("utf-8"), expected.encode("utf-8"))


@dataclass(frozen=True, slots=True)
class HostKeys:
    required: bool = False
    function_key: str = field(default_factory=_new_key)
    master_key: str = field(default_factory=_new_key)
    system_key: str = field(default_factory=_new_key)
    """The ``durabletask_extension`` system key, embedded in the management URLs."""
    rpc_token: str = field(default_factory=_new_key)
    """Path secret of the SDK's RPC base URL (the SDK cannot add a query string to RPC calls)."""

    def as_dict(self) -> dict[str, str]:
        return {"default": self.function_key, "master": self.master_key, "durabletask_extension": self.system_key}

    def allows(self, level: str, query: Mapping[str, str], headers: Mapping[str, str]) -> bool:
        """Whether a request may call a route of that auth level (``anonymous``/``function``/``admin``/
        ``system``)."""
        if not self.required or level == "anonymous":
            return True
        presented = headers.get("x-functions-key") or query.get("code") or ""
        if not presented:
            return False
        accepted = {
            "function": (self.function_key, self.master_key),
            "admin": (self.master_key,),
            "system": (self.system_key, self.master_key),
        }.get(level, (self.master_key,))
        return any(keys_equal(presented, key) for key in accepted)
