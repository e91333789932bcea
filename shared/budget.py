"""A tenant's audit-API budget as a pure state machine: at most B slots per (tenant, source), shared by collections.

K caps one collection; the limits that matter belong to the tenant (Exchange allows a few concurrent sessions per
identity, Graph a bounded number of unfinished queries), so every collection of a tenant takes a slot from one
budget before a lane starts server-side work. The budget lives in a Durable Entity (``orchestrators.budget_entity``);
this module is its logic, with the clock passed in so it can be tested step by step.

Rules:

* **Leases.** A grant lasts ``lease_seconds`` unless renewed. A holder that stops renewing (its collection was
  terminated, or crashed and did not come back in time) loses the slot at the first operation after the expiry.
* **FIFO across collections.** A holder that cannot be served joins a queue. The first ``free`` holders of the queue
  are entitled to the ``free`` slots; nobody behind them, and no newcomer, takes a slot they are entitled to.
  An entity cannot call anyone back, so queued holders ask again (after a durable timer); a queue entry lapses
  when its holder does not ask again within ``waiter_ttl``, so a dead waiter blocks the head only that long.
* **Idempotent by holder id.** Operations are keyed by a stable holder id (``<collection>/<lane>``), never by a
  request id: an orchestration that crashes between sending a request and its checkpoint sends it again with a new
  request id, and the entity runs it twice. Acquiring what one holds renews it; releasing twice releases once.
* **Monotonic clock.** The entity reads wall time at each operation; a batch that runs on a worker whose clock is
  behind never moves the budget's time backwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from shared.budget_wire import BudgetRequest, collection_of
from shared.models import JsonDict, iso, parse_iso

WAITER_GRACE_SECONDS = 60.0
"""Slack on top of a waiter's own poll interval: durable timers fire late when a worker is busy or idle-polling."""


def waiter_ttl(lease_seconds: float, wait_seconds: float) -> float:
    """How long a queue entry survives without its holder asking again: three polls, or one poll plus a minute of
    slack, whichever is longer, but never beyond a lease (so a terminated waiter is gone within the lease expiry)."""
    return min(lease_seconds, max(3 * wait_seconds, wait_seconds + WAITER_GRACE_SECONDS))


@dataclass(slots=True)
class Lease:
    holder: str
    since: datetime
    until: datetime
    grant: int
    """The grant's sequence number (1, 2, ...): the order in which the budget handed out slots."""


@dataclass(slots=True)
class Waiter:
    holder: str
    since: datetime
    until: datetime


@dataclass(slots=True)
class BudgetState:
    """Everything the entity persists. Counters are for operators and tests; only leases and waiters decide."""

    leases: dict[str, Lease] = field(default_factory=dict)
    waiters: list[Waiter] = field(default_factory=list)
    clock: datetime | None = None
    granted: int = 0
    released: int = 0
    reclaimed: int = 0
    lapsed_waiters: int = 0
    peak: int = 0

    def to_json(self) -> JsonDict:
        return {
            "leases": [
                {"holder": x.holder, "since": iso(x.since), "until": iso(x.until), "grant": x.grant}
                for x in self.leases.values()
            ],
            "waiters": [{"holder": w.holder, "since": iso(w.since), "until": iso(w.until)} for w in self.waiters],
            "clock": iso(self.clock) if self.clock else None,
            "granted": self.granted,
            "released": self.released,
            "reclaimed": self.reclaimed,
            "lapsedWaiters": self.lapsed_waiters,
            "peak": self.peak,
        }

    @classmethod
    def from_json(cls, data: JsonDict | None) -> BudgetState:
        if not data:
            return cls()
        leases = [
            Lease(str(x["holder"]), parse_iso(x["since"]), parse_iso(x["until"]), int(x["grant"]))
            for x in data.get("leases", [])
        ]
        clock = data.get("clock")
        return cls(
            leases={x.holder: x for x in leases},
            waiters=[
                Waiter(str(w["holder"]), parse_iso(w["since"]), parse_iso(w["until"])) for w in data.get("waiters", [])
            ],
            clock=parse_iso(clock) if clock else None,
            granted=int(data.get("granted", 0)),
            released=int(data.get("released", 0)),
            reclaimed=int(data.get("reclaimed", 0)),
            lapsed_waiters=int(data.get("lapsedWaiters", 0)),
            peak=int(data.get("peak", 0)),
        )


class Budget:
    """The budget of one (tenant, source). ``capacity`` comes with each operation (the app's setting; 0 = no limit),
    so a changed setting applies from the next operation: lowering it grants nothing until enough slots return."""

    def __init__(self, state: BudgetState | None = None) -> None:
        self.state = state or BudgetState()

    def handle(self, request: BudgetRequest, now: datetime, capacity: int) -> JsonDict:
        now = self._advance(now)
        if request.op == "acquire":
            return self._acquire(request, now, capacity)
        if request.op == "renew":
            return self._renew(request, now, capacity)
        if request.op == "renew_collection":
            lost = [
                holder
                for holder in request.holders
                if not self._renew(replace(request, op="renew", holder=holder), now, capacity)["granted"]
            ]
            return {"renewed": len(request.holders) - len(lost), "lost": lost, **self._counts(capacity)}
        if request.op == "release":
            released = self._release(request.holder)
            return {"released": released, **self._counts(capacity)}
        if request.op == "release_collection":
            holders = [*self.state.leases, *(w.holder for w in self.state.waiters)]
            mine = [h for h in holders if collection_of(h) == request.collection]
            count = sum(self._release(h) for h in mine)
            return {"released": count, **self._counts(capacity)}
        return self.snapshot(capacity)

    # --- queries ---------------------------------------------------------------------------------------------
    def free(self, capacity: int) -> int:
        """Slots not leased (a large number when there is no limit; never negative after the capacity shrank)."""
        if capacity <= 0:
            return len(self.state.leases) + len(self.state.waiters) + 1
        return max(0, capacity - len(self.state.leases))

    def position(self, holder: str) -> int | None:
        """0-based place in the queue, or None."""
        return next((i for i, w in enumerate(self.state.waiters) if w.holder == holder), None)

    def snapshot(self, capacity: int) -> JsonDict:
        return {**self.state.to_json(), "capacity": capacity}

    # --- transitions -----------------------------------------------------------------------------------------
    def _advance(self, now: datetime) -> datetime:
        """Move the budget's clock (never backwards) and drop expired leases and lapsed queue entries."""
        if self.state.clock is not None and now < self.state.clock:
            now = self.state.clock
        self.state.clock = now
        for holder in [h for h, lease in self.state.leases.items() if lease.until <= now]:
            del self.state.leases[holder]
            self.state.reclaimed += 1
        kept = [w for w in self.state.waiters if w.until > now]
        self.state.lapsed_waiters += len(self.state.waiters) - len(kept)
        self.state.waiters = kept
        return now

    def _acquire(self, request: BudgetRequest, now: datetime, capacity: int) -> JsonDict:
        lease = self.state.leases.get(request.holder)
        if lease is not None:  # already held: a repeated acquire (or one re-sent after a crash) renews
            lease.until = now + timedelta(seconds=request.lease_seconds)
            return self._granted(lease, capacity)
        index = self.position(request.holder)
        queued = index is not None
        if index is None:
            index = len(self.state.waiters)
        if index < self.free(capacity):  # entitled: nobody queued ahead of it is left without a slot
            if queued:
                del self.state.waiters[index]
            return self._granted(self._grant(request, now), capacity)
        if not queued:
            self.state.waiters.append(Waiter(request.holder, now, now))
        self.state.waiters[index].until = now + timedelta(
            seconds=waiter_ttl(request.lease_seconds, request.wait_seconds)
        )
        return {"granted": False, "holder": request.holder, "position": index + 1, **self._counts(capacity)}

    def _renew(self, request: BudgetRequest, now: datetime, capacity: int) -> JsonDict:
        lease = self.state.leases.get(request.holder)
        if lease is None and self.position(request.holder) is not None:
            return self._acquire(request, now, capacity)  # it was queued after all: renewing is asking again
        if lease is None:
            # The lease lapsed (its holder could not renew in time). Take a slot back only if that overtakes no one.
            if len(self.state.waiters) >= self.free(capacity):
                return {"granted": False, "holder": request.holder, "position": None, **self._counts(capacity)}
            lease = self._grant(request, now)
        lease.until = now + timedelta(seconds=request.lease_seconds)
        return self._granted(lease, capacity)

    def _grant(self, request: BudgetRequest, now: datetime) -> Lease:
        self.state.granted += 1
        lease = Lease(request.holder, now, now + timedelta(seconds=request.lease_seconds), self.state.granted)
        self.state.leases[request.holder] = lease
        self.state.peak = max(self.state.peak, len(self.state.leases))
        return lease

    def _release(self, holder: str) -> bool:
        """Give back a slot or a queue place; True when a slot was held."""
        index = self.position(holder)
        if index is not None:
            del self.state.waiters[index]
        if self.state.leases.pop(holder, None) is None:
            return False
        self.state.released += 1
        return True

    def _granted(self, lease: Lease, capacity: int) -> JsonDict:
        return {
            "granted": True,
            "holder": lease.holder,
            "grant": lease.grant,
            "leaseUntil": iso(lease.until),
            "position": None,
            **self._counts(capacity),
        }

    def _counts(self, capacity: int) -> JsonDict:
        return {"held": len(self.state.leases), "waiting": len(self.state.waiters), "capacity": capacity}
