"""The InvokeCommand answers that are failures in disguise, and rows out of order (``ExchangeSettings`` knobs).

* ``cancel_warning_rate`` (default 0.01): a 200 with no rows whose ``@adminapi.warnings`` say the task was cancelled
  (Microsoft-Extractor-Suite retries exactly such calls; CIPP reads ``@adminapi.warnings``). On a call's first page the
  session has advanced all the same: the block is lost, the least convenient reading.
* ``transient_400_rate`` (default 0.01): a 400 "Error executing cmdlet" whose details name one of the exceptions a
  public client retries behind a 400 (jflieben/M365Permissions ``ExchangeRestClient.cs``); nothing advanced.
* ``unsorted`` (default on): the rows of each page in a stable shuffled order, neither by time nor by
  ``ResultIndex`` (the docs say ``ReturnLargeSet`` results are unsorted).

Draws are stable per (seed, what is drawn, the how-many-th time it is drawn), like the broken-page faults: the same run
draws the same faults, and a retry draws again.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections import Counter
from typing import Any

from m365_emulator.wire import Reply, Request, api_error

TRANSIENT_400_CODES = (
    "CmdletProxyNotAvailableFailure",
    "ServerBusyException",
    "TransientException",
    "BackendCommunicationException",
)
CANCEL_WARNING = "The task was canceled."


class StableDraws:
    """Seeded draws per key that differ from one attempt to the next (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts: Counter[str] = Counter()

    def hit(self, seed: int, key: str, rate: float) -> bool:
        if rate <= 0:
            return False
        with self._lock:
            attempt = self._attempts[key]
            self._attempts[key] += 1
        digest = hashlib.sha256(f"{seed}:{key}:{attempt}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < rate

    def pick(self, seed: int, key: str, choices: tuple[str, ...]) -> str:
        """One of ``choices``, a stable draw per (seed, key, the how-many-th pick for the key)."""
        with self._lock:
            attempt = self._attempts[f"pick|{key}"]
            self._attempts[f"pick|{key}"] += 1
        digest = hashlib.sha256(f"{seed}:{key}:{attempt}:pick".encode()).digest()
        return choices[digest[0] % len(choices)]


def transient_400(request: Request, code: str) -> Reply:
    """A cmdlet failure whose reason (a busy or unreachable backend) is only in the nested parts."""
    reply = api_error(400, "BadRequest", "Error executing cmdlet", request=request)
    error: dict[str, Any] = dict(reply.body["error"])
    text = f"Microsoft.Exchange.Management.{code}: the server could not process the command right now."
    error["details"] = [{"code": "Ex0", "target": "", "message": f"Ex0|Microsoft.Exchange.{code}|{text}"}]
    error["innererror"] = {"message": "Error executing cmdlet", "internalException": {"message": text}}
    return Reply(400, {"error": error}, (("X-ExceptionType", code),))


def cancel_warning(context: str) -> Reply:
    """A 200 with no rows and the warning that the cmdlet's task was cancelled."""
    return Reply(200, {"@odata.context": context, "value": [], "@adminapi.warnings": [CANCEL_WARNING]})


def shuffled(rows: list[dict[str, Any]], seed: int, key: str) -> list[dict[str, Any]]:
    """The page's rows in a stable order of no meaning (a re-read of the page gets the same order)."""
    out = list(rows)
    random.Random(f"{seed}:{key}:order").shuffle(out)
    return out
