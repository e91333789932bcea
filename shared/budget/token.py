"""The per-run token that ties tenant budget operations to the collection run that sends them.

An entity operation cannot know its sender: the out-of-proc batch the extension hands a Python entity lists each
operation's name, input, ``isSignal`` and request id, never the calling instance (the extension's
``EntityTriggerAttributeBindingProvider.EntityContextToString``; the SDK's ``DurableEntityContext`` keeps only name
and input). Anyone who can reach the task hub's entity routes (the system key that ``statusQueryGetUri`` carries) can
therefore send the budget any operation with any holder id. So every operation carries a token: the run's id (a
random nonce the starter, or the orchestration handing on a settle or follower pass, puts in the input) followed by
an HMAC-SHA256 of the collection id and that run id under ``COLLECTOR_BUDGET_SECRET``. The entity recomputes it and
refuses an operation whose token does not match the collection it names, or whose run has ended (``closed``).

The token is never stored in an orchestration input (``statusQueryGetUri?showInput=true`` would show it): the
admission activity derives it when an execution starts (``shared.requests.admission``), the cancel route and the
doctor derive theirs from the settings. What it does not stop (docs/design.md, "Who may start and spend"): a caller
who reads a running collection's history through the same system key can act as that run until it ends.
"""

from __future__ import annotations

import hashlib
import hmac
import re

_PURPOSE = b"ual-collector/tenant-budget/v1\n"
TOKEN_CHARS = 32
"""Hex characters of a token's HMAC (128 bits)."""
RUN_CHARS = 32
"""Hex characters of a run id (a uuid4 without dashes)."""
_RUN = re.compile(r"^[0-9a-f]{32}$")


def is_run_id(value: str) -> bool:
    return bool(_RUN.fullmatch(value))


def collection_token(secret: str, collection_id: str, run: str = "") -> str:
    """The token of one run of a collection under ``secret`` ("" when no secret is configured: nothing is
    authenticated). ``run`` "" (the doctor's holders): a token of the collection id alone, which no run closes."""
    if not secret:
        return ""
    message = _PURPOSE + collection_id.encode() + (b"\n" + run.encode() if run else b"")
    return run + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()[:TOKEN_CHARS]


def run_of(token: str) -> str:
    """The run id a token names ("" for a token of the collection id alone)."""
    return token[:-TOKEN_CHARS] if len(token) > TOKEN_CHARS else ""


def token_matches(secret: str, collection_id: str, token: str) -> bool:
    """Constant-time comparison with the token of the run it names; any token passes when no secret is configured."""
    if not secret:
        return True
    run = run_of(token)
    if run and not is_run_id(run):
        return False
    return hmac.compare_digest(collection_token(secret, collection_id, run), token)
