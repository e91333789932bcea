"""Counters the tests read (``emu.stats``) and the fault injector driven by ``emu.faults``."""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from m365_emulator.config import FaultConfig

Key = tuple[str, str]
"""(tenant_id, api) with api in {"graph", "exchange"}."""


@dataclass(frozen=True)
class QueryEvent:
    """One step of a Graph query's life, or the start/end of an Exchange call, as the server saw it.

    ``moment`` is ``time.monotonic()``; Exchange calls log "created" when they start and "deleted" when they end;
    Graph queries log "created", "used" (a status poll or a records page) and "deleted" (a DELETE that removed it).
    ``call`` says which request it was: Graph "create", "status", "records", "delete"; Exchange "start", "end".
    """

    moment: float
    tenant_id: str
    kind: str  # "created" | "used" | "deleted"
    query_id: str
    api: str = "graph"
    call: str = ""


@dataclass
class Stats:
    """Live counters; every mapping is keyed by (tenant_id, api) unless said otherwise.

    Attributes:
        peak_concurrency: the most Graph queries unfinished at once / Exchange requests in flight at once.
        current_concurrency: the same figure now.
        requests: API calls received (after authentication).
        throttled_429: every 429 served (injected or over the concurrency limit).
        concurrency_429: 429s served because the tenant was over its concurrency limit.
        injected_5xx: 503/504 answers injected by faults.
        transient_403: transient 403 answers injected by faults.
        auth_failures: 401s served by the APIs.
        queries_created / queries_deleted: keyed by tenant_id (a DELETE answered 404 deletes nothing).
        deletes_refused: Graph DELETEs answered 404 because deletion is not supported (keyed by tenant_id).
        broken_pages: pages served as broken JSON.
        anchors: every X-AnchorMailbox value InvokeCommand received, with how often.
        high_completeness_calls: InvokeCommand calls with ``HighCompleteness`` set.
        cmdlet_calls: InvokeCommand cmdlet calls (a call's first request; its nextLink pages are not counted).
        cancel_warnings / transient_400s: InvokeCommand answers injected as a 200 with a cancel warning / a 400
            naming a transient exception.
        false_answers: InvokeCommand first calls answered falsely with no rows or a bogus row (``ResultIndex`` -1).
        unknown_errors / gateway_errors: Graph calls answered 400 ``UnknownError`` / a 502 or 504 HTML page.
        short_reads: Graph queries whose first read of ``/records`` ended early (keyed by tenant_id).
        query_faults: Graph queries created that will never succeed, keyed by ``(tenant_id, outcome)``: "failed",
            "vanished", "stuck" or "cancelled" (drawn at ``fail_rate``/``vanish_rate``/``stuck_rate`` or set by a fault
            knob). A client that resubmits what it gives up on creates one more query for each (``faulted``).
        tokens_issued: successful token responses (whole emulator).
        query_events: Graph query and Exchange call events in order, for in-flight timelines (``live_timeline``).
        query_finishes: Graph query id -> the ``time.monotonic()`` moment its status turns terminal (succeeded,
            failed or cancelled; absent for a query that never finishes), for measuring how late clients notice.
    """

    peak_concurrency: Counter[Key] = field(default_factory=Counter)
    current_concurrency: Counter[Key] = field(default_factory=Counter)
    requests: Counter[Key] = field(default_factory=Counter)
    throttled_429: Counter[Key] = field(default_factory=Counter)
    concurrency_429: Counter[Key] = field(default_factory=Counter)
    injected_5xx: Counter[Key] = field(default_factory=Counter)
    transient_403: Counter[Key] = field(default_factory=Counter)
    auth_failures: Counter[Key] = field(default_factory=Counter)
    queries_created: Counter[str] = field(default_factory=Counter)
    queries_deleted: Counter[str] = field(default_factory=Counter)
    deletes_refused: Counter[str] = field(default_factory=Counter)
    broken_pages: Counter[Key] = field(default_factory=Counter)
    anchors: Counter[str] = field(default_factory=Counter)
    high_completeness_calls: Counter[Key] = field(default_factory=Counter)
    cmdlet_calls: Counter[Key] = field(default_factory=Counter)
    cancel_warnings: Counter[Key] = field(default_factory=Counter)
    transient_400s: Counter[Key] = field(default_factory=Counter)
    false_answers: Counter[Key] = field(default_factory=Counter)
    unknown_errors: Counter[Key] = field(default_factory=Counter)
    gateway_errors: Counter[Key] = field(default_factory=Counter)
    short_reads: Counter[str] = field(default_factory=Counter)
    query_faults: Counter[tuple[str, str]] = field(default_factory=Counter)
    tokens_issued: int = 0
    query_events: list[QueryEvent] = field(default_factory=list)
    query_finishes: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def bump(self, counter: Counter[Any], key: object, amount: int = 1) -> None:
        with self.lock:
            counter[key] += amount

    def log_query(self, tenant_id: str, kind: str, query_id: str, api: str = "graph", call: str = "") -> None:
        with self.lock:
            self.query_events.append(QueryEvent(time.monotonic(), tenant_id, kind, query_id, api, call))

    def log_finish(self, query_id: str, moment: float) -> None:
        with self.lock:
            self.query_finishes[query_id] = moment

    def live_timeline(self, tenant_id: str, api: str = "graph") -> list[tuple[float, int]]:
        """(moment, items in flight) at each start/end, in time order.

        An item lives from its first "created" to its last event of any kind. Graph items are queries: a collector
        lane uses its query from create to its last records page (or its delete, when it deletes), so this counts
        chunks in flight as the server sees them. Exchange items are search windows (StartDate/EndDate): a chunk's
        count probe and session calls make one item.
        """
        with self.lock:
            events = [e for e in self.query_events if e.tenant_id == tenant_id and e.api == api]
        first: dict[str, float] = {}
        last: dict[str, float] = {}
        for event in events:
            if event.kind == "created":
                first.setdefault(event.query_id, event.moment)
            last[event.query_id] = event.moment
        steps = sorted(
            [(moment, 0, 1) for moment in first.values()]
            + [(moment, 1, -1) for key, moment in last.items() if key in first and moment > first[key]]
        )  # at the same moment a start counts before an end (a handover never reads as a dip)
        timeline: list[tuple[float, int]] = []
        live = 0
        for moment, _, delta in steps:
            live += delta
            timeline.append((moment, live))
        return timeline

    def faulted(self, tenant_id: str) -> int:
        """Graph queries of ``tenant_id`` created to fail, vanish, stay running or be cancelled (``query_faults``)."""
        with self.lock:
            return sum(count for (tenant, _), count in self.query_faults.items() if tenant == tenant_id)

    def set_concurrency(self, key: Key, value: int) -> None:
        with self.lock:
            self.current_concurrency[key] = value
            self.peak_concurrency[key] = max(self.peak_concurrency[key], value)


@dataclass(frozen=True)
class InjectedFault:
    status: int
    retry_after: int | None
    kind: str  # "429" | "5xx" | "403"


class FaultInjector:
    """Draws faults from ``config`` with one seeded RNG (reseeded when ``config.seed`` changes)."""

    def __init__(self, config: FaultConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._seed = config.seed
        self._rng = random.Random(config.seed)

    def reset(self, config: FaultConfig) -> None:
        """Swap in a new configuration and restart its random sequence (same seed, same faults)."""
        with self._lock:
            self.config, self._seed, self._rng = config, config.seed, random.Random(config.seed)

    def draw(self, api: str) -> InjectedFault | None:
        cfg = self.config
        if api not in cfg.apis:
            return None
        with self._lock:
            if cfg.seed != self._seed:
                self._seed, self._rng = cfg.seed, random.Random(cfg.seed)
            if cfg.transient_403_count > 0:  # the knob counts down as the 403s are served
                cfg.transient_403_count -= 1
                return InjectedFault(403, None, "403")
            roll = self._rng.random()
            status_roll = self._rng.random()
        if roll < cfg.rate_429:
            return InjectedFault(429, cfg.retry_after_seconds, "429")
        if roll < cfg.rate_429 + cfg.rate_5xx:
            status = 503 if status_roll < 0.7 else 504
            retry = cfg.retry_after_seconds if cfg.retry_after_on_5xx and status == 503 else None
            return InjectedFault(status, retry, "5xx")
        return None

    def is_broken_page(self, page_key: str, read: int) -> bool:
        """Whether read number ``read`` (0 = the first) of the page ``page_key`` is served as broken JSON.

        A stable draw per (seed, page, read): the same run breaks the same pages, and a re-read draws again.
        """
        rate = self.config.broken_page_rate
        if rate <= 0:
            return False
        digest = hashlib.sha256(f"{self.config.seed}:{page_key}:{read}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < rate

    def is_malformed(self, record_id: str) -> bool:
        """Stable per record, so a retried page is corrupted the same way."""
        cfg = self.config
        if record_id in cfg.malformed_record_ids:
            return True
        if cfg.malformed_rate <= 0:
            return False
        digest = hashlib.sha256(f"{cfg.seed}:{record_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < cfg.malformed_rate


def corrupt_json(text: str) -> str:
    """Invalid JSON text that still looks like the start of the record (what broken UAL records look like)."""
    return text[: max(1, len(text) // 2)] + '\\u00"'


def broken_json(body: Any) -> bytes:
    """A JSON document with its closing brace missing (the failure msgraph-sdk-powershell #2677/#2855 report)."""
    return json.dumps(body).encode()[:-1]
