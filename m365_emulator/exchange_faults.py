"""The InvokeCommand answers that are failures in disguise, and rows out of order (``ExchangeSettings`` knobs).

* ``cancel_warning_rate`` (default 0.01): a 200 with no rows whose ``@adminapi.warnings`` say the task was cancelled
  (Microsoft-Extractor-Suite retries exactly such calls; CIPP reads ``@adminapi.warnings``). On a call's first page the
  session has advanced all the same: the block is lost, the least convenient reading.
* ``transient_400_rate`` (default 0.01): a 400 "Error executing cmdlet" whose details name one of the exceptions a
  public client retries behind a 400 (jflieben/M365Permissions ``ExchangeRestClient.cs``); nothing advanced.
* ``unsorted`` (default on): rows in a stable shuffled order, neither by time nor by ``ResultIndex`` (the docs say
  ``ReturnLargeSet`` results are unsorted); with ``unsorted_across_pages`` (default on) a call's whole block is
  shuffled before it is cut into HTTP pages, so no page holds a contiguous run of indexes (:class:`BlockCache` keeps
  the shuffled blocks so their later pages need not be rebuilt).
* ``false_answer_rate`` (default 0.3): the first call any session makes for a window answers "nothing" falsely: an
  empty list, or (``false_bogus_share``) one bogus row with ``ResultIndex`` -1 (Microsoft-Extractor-Suite #138: "the
  first attempt returns 0 results… re-running… returns results"; ANSSI-FR/DFIR-O365RC retries a result with
  ``ResultCount`` 0 or ``ResultIndex`` -1 as a server timeout). Later fresh sessions for the same window answer
  falsely at ``false_repeat_rate`` (default 0) (:class:`FalseAnswers`).

Draws are stable per (seed, what is drawn, the how-many-th time it is drawn), like the broken-page faults: the same run
draws the same faults, and a retry draws again.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections import Counter, OrderedDict
from typing import Any

from m365_emulator.config import ExchangeSettings
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


class FalseAnswers:
    """Which first calls answer "nothing" falsely: the first question about a window at ``false_answer_rate``, a
    question asked before at ``false_repeat_rate``; "bogus" (a row with ``ResultIndex`` -1) or "empty"."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asked: set[str] = set()
        self._draws = StableDraws()

    def draw(self, seed: int, key: str, settings: ExchangeSettings) -> str | None:
        with self._lock:
            again = key in self._asked
            self._asked.add(key)
        rate = settings.false_repeat_rate if again else settings.false_answer_rate
        if not self._draws.hit(seed, f"false|{'again' if again else 'first'}|{key}", rate):
            return None
        return "bogus" if self._draws.hit(seed, f"bogus|{key}", settings.false_bogus_share) else "empty"


def false_answer(context: str, bogus: dict[str, Any] | None) -> Reply:
    """A 200 that says "nothing": an empty list, or one bogus row (a record's row with ``ResultIndex`` -1)."""
    return Reply(200, {"@odata.context": context, "value": [bogus] if bogus is not None else []})


class BlockCache:
    """The shuffled rows of recent calls' blocks, by (tenant, session, first index, body hash), least recent out."""

    def __init__(self, size: int = 64) -> None:
        self._lock = threading.Lock()
        self._size = size
        self._blocks: OrderedDict[tuple[str, str, int, str], list[dict[str, Any]]] = OrderedDict()

    def get(self, key: tuple[str, str, int, str]) -> list[dict[str, Any]] | None:
        with self._lock:
            rows = self._blocks.get(key)
            if rows is not None:
                self._blocks.move_to_end(key)
            return rows

    def put(self, key: tuple[str, str, int, str], rows: list[dict[str, Any]]) -> None:
        with self._lock:
            self._blocks[key] = rows
            self._blocks.move_to_end(key)
            while len(self._blocks) > self._size:
                self._blocks.popitem(last=False)
