"""The per-collection token that ties tenant budget operations to the collection that sends them.

An entity operation cannot know its sender: the out-of-proc batch the extension hands a Python entity lists each
operation's name, input, ``isSignal`` and request id, never the calling instance (the extension's
``EntityTriggerAttributeBindingProvider.EntityContextToString``; the SDK's ``DurableEntityContext`` keeps only name
and input). Anyone who can reach the
task hub's entity routes (the system key that ``statusQueryGetUri`` carries) can therefore send the budget any
operation with any holder id. So the HTTP starter, which holds the app settings, gives each collection a token:
an HMAC-SHA256 of the collection id under ``COLLECTOR_BUDGET_SECRET``, carried in the orchestration input and sent
with every budget operation; the entity recomputes it and refuses an operation whose token does not match the
collection it names. Made-up collections and releases of another collection's holders are refused; what it does
not stop (docs/design.md): a caller that read a running collection's input or history through the same system key
can act as that collection.
"""

from __future__ import annotations

import hashlib
import hmac

_PURPOSE = b"ual-collector/tenant-budget/v1\n"
TOKEN_CHARS = 32
"""Hex characters of a token (128 bits of the HMAC)."""


def collection_token(secret: str, collection_id: str) -> str:
    """The token of one collection under ``secret`` ("" when no secret is configured: nothing is authenticated)."""
    if not secret:
        return ""
    digest = hmac.new(secret.encode(), _PURPOSE + collection_id.encode(), hashlib.sha256).hexdigest()
    return digest[:TOKEN_CHARS]


def token_matches(secret: str, collection_id: str, token: str) -> bool:
    """Constant-time comparison with the collection's token; any token passes when no secret is configured."""
    return not secret or hmac.compare_digest(collection_token(secret, collection_id), token)
