"""Hold the emulator's audit work in flight until the test lets it go, one item at a time.

A window that "keeps K in flight" is then shown by events, not by wall-clock means: with every item held, the
collector's lanes can only be busy at the service or between two steps of their own; after each release the window
must bring the number in flight back to K (while chunks are left to start) before anything else can finish. How long
the engine takes to get there does not matter, so a loaded machine slows the test down but cannot fail it.

* Graph: the emulator's query clock (``GraphApi.clock``) stands still, so a query stays running until the test moves
  the clock to the moment it completes (``Stats.query_finishes``: its creation + delay + its jitter draw). Queries
  finish one at a time, in the order of their draws, not in the order they were created.
* Exchange: each InvokeCommand call waits, where the emulator would sleep its latency, until the test releases it;
  the test picks which one (a seeded draw, so not the oldest first: a window that can only wake on its oldest call,
  as under the extension's sequential-await shim, stops refilling).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from m365_emulator import Emulator

HOLD_LIMIT_SECONDS = 600.0
"""A held Exchange call goes on by itself after this long (a test that died must not leave the emulator's threads
waiting forever); set ``AUDIT_HTTP_TIMEOUT_SECONDS`` above the test's length so the client never gives up first."""


@dataclass
class _Call:
    window: str
    released: threading.Event = field(default_factory=threading.Event)
    held_for: int = 0
    """Releases of other calls while this one was held."""


class HeldWork:
    """Installs itself on a running emulator for one tenant and source (``graph`` or ``exchange``)."""

    def __init__(self, emulator: Emulator, tenant_id: str, source: str, *, seed: int = 0) -> None:
        self.emulator = emulator
        self.tenant_id = tenant_id
        self.source = source
        self.releases = 0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._calls: list[_Call] = []
        self._holding = True
        self._now = time.monotonic()  # queries created before keep the status they had
        self._first_event = len(emulator.stats.query_events)
        if source == "graph":
            emulator.graph.clock = lambda: self._now
        elif source == "exchange":
            emulator.exchange._wait_latency = self._hold  # type: ignore[method-assign]  # instead of its sleep
        else:
            raise ValueError(source)

    # -- what the emulator sees --------------------------------------------------------------------------------
    def in_flight(self) -> int:
        """Graph: queries running at the service. Exchange: calls being answered."""
        if self.source == "graph":
            return self.emulator.graph.active_count(self.tenant_id)
        with self._lock:
            return len(self._calls)

    def started(self) -> int:
        """Chunks started at the service since this was installed: Graph queries created, or Exchange search windows
        called."""
        with self.emulator.stats.lock:
            events = self.emulator.stats.query_events[self._first_event :]
        events = [e for e in events if e.tenant_id == self.tenant_id]
        return len({e.query_id for e in events if e.api == self.source and e.kind == "created"})

    def wait_for(self, check: Callable[[], bool], describe: Callable[[], str], *, limit_seconds: float = 120) -> None:
        """Waits for ``check`` (a bound on a hung run, not a speed assertion)."""
        deadline = time.monotonic() + limit_seconds
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(describe())
            time.sleep(0.02)

    def hold_at(self, k: int, chunks: int, context: Callable[[], str] = str) -> list[int]:
        """Releases one item at a time; while chunks are left to start, each release must be followed by ``k`` in
        flight again, whatever the machine's load (failing after a long bound on a hung run: ``wait_for``). Then
        lets everything go (the tail: fewer than ``k`` chunks are left). ``chunks``: how many start in all;
        ``context`` adds to a failure (e.g. the host's log tail). Returns the number in flight before each
        release."""
        seen: list[int] = []
        try:
            while self.started() < chunks:
                self.wait_for(
                    lambda: self.in_flight() == k,
                    lambda: (
                        f"{self.in_flight()} of {k} in flight after {self.releases} releases, with "
                        f"{chunks - self.started()} of {chunks} chunks left to start\n{context()}"
                    ),
                )
                seen.append(self.in_flight())
                self.release_one()
        finally:
            self.release_all()
        return seen

    # -- letting one go ----------------------------------------------------------------------------------------
    def release_one(self) -> str:
        """Lets one held item finish; returns what it was (a query id or a call's window)."""
        self.releases += 1
        if self.source == "graph":
            return self._finish_next_query()
        with self._lock:
            calls = list(self._calls)
            assert calls, "nothing held"
            # A seeded draw; a call passed over 2K times goes next (so none waits through the whole run).
            starved = [c for c in calls if c.held_for >= 2 * max(len(calls), 1)]
            chosen = starved[0] if starved else self._rng.choice(calls)
            self._calls.remove(chosen)
            for other in self._calls:
                other.held_for += 1
        chosen.released.set()
        return chosen.window

    def release_all(self) -> None:
        """Stops holding: Graph queries complete at once, Exchange calls are answered at once, now and later."""
        if self.source == "graph":
            with self._lock:
                if self._holding:  # from now on the clock runs again, from where it stood
                    self._holding = False
                    offset = self._now - time.monotonic()
                    self.emulator.graph.clock = lambda: time.monotonic() + offset
                    self._now = float("inf")  # every query created while held has completed
            return
        with self._lock:
            calls, self._calls = self._calls, []
            self._holding = False
        for call in calls:
            call.released.set()

    def _finish_next_query(self) -> str:
        stats = self.emulator.stats
        with stats.lock:
            created = [e.query_id for e in stats.query_events if e.tenant_id == self.tenant_id and e.api == "graph"]
            pending = {q: stats.query_finishes[q] for q in created if stats.query_finishes.get(q, 0) > self._now}
        assert pending, "no query running"
        query, moment = min(pending.items(), key=lambda item: item[1])
        self._now = moment + 1e-6  # past its completion whatever the rounding of (created + delay) - created
        return query

    def _hold(self, request: object) -> None:
        from m365_emulator.exchange_api import _window_key

        call = _Call(_window_key(request))  # type: ignore[arg-type]
        with self._lock:
            if not self._holding:  # released for good
                return
            self._calls.append(call)
        call.released.wait(HOLD_LIMIT_SECONDS)
