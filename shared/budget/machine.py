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
* **The collector's own rules, whoever asks** (the entity routes accept any operation from anyone holding the task
  hub's system key). Leases and waits are clamped to the settings (``Limits``); a collection has at most one queue
  entry (a second lane of it is answered "refused"), and the queue holds at most ``MAX_WAITERS`` collections, so
  the state stays small whatever is sent; a renewal never takes a lapsed slot back (its holder must queue again:
  someone else may be entitled to it), and is counted as ``lost``. Which collection may act on which holder is
  checked before (``orchestrators.budget_entity``, with ``shared.budget.token``).
* **A run that ended acquires nothing.** ``release_collection`` with ``close`` (sent when a run finalizes, and by
  ``POST .../cancel``) releases the run's holders and remembers its run id: every later ``acquire`` or renewal
  carrying a token of that run is refused (``refused: "closed"``), so a token read from a finished, cancelled or
  cancelled-after-termination run's history holds nothing. The last ``CLOSED_KEPT`` runs are remembered.
* **The daily Graph quota.** An ``acquire`` that carries a submission number (``submit``) also takes a credit of the
  tenant's Graph query submissions over a rolling 24 hours (``shared.budget.quota``), once per number. When the
  collector's allowance (``Limits.quota``: the tenant's quota less the reserve left to other tools) is spent, it is
  refused (``quotaUntil``: when the oldest submission leaves the window) instead of granted or queued: its slot and its
  queue place are given back, since it may wait for hours. Every answer says what is left (``quota``). An ``acquire``
  may ask for several credits at once (``credits``: it gets as many as are left, at least one, once per number), and
  a closing ``release_collection`` gives back those its run did not spend (``refund``, once: a run closed before
  gives nothing back).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from shared.budget.quota import SubmissionLog
from shared.budget.token import run_of
from shared.budget.wire import MAX_LEASE_SECONDS, BudgetRequest, collection_of
from shared.models import JsonDict, iso, parse_iso

WAITER_GRACE_SECONDS = 60.0
"""Slack on top of a waiter's own poll interval: durable timers fire late when a worker is busy or idle-polling."""
MAX_WAITERS = 100
"""Collections that may wait in one budget's queue at once (one entry each); beyond it a lane is answered
"refused" and asks again after its poll, outside the queue."""
TAKEN_KEPT = 20
"""Reclaimed holders remembered for counting losses (bounded: the state stays small whatever happens)."""
CLOSED_KEPT = 512
"""Ended runs remembered (the oldest is forgotten first): about 8 KB of state at most."""
RUN_MARK_CHARS = 16
"""Characters of a run id remembered (64 random bits: no two runs of one budget share them by chance)."""
REFUSED_CLOSED = "the run this token belongs to has ended (finalized or cancelled)"
REFUSED_COLLECTION_WAITS = "a lane of this collection already waits"
REFUSED_QUEUE_FULL = f"the queue is full ({MAX_WAITERS} collections wait)"


@dataclass(frozen=True, slots=True)
class Limits:
    """What the app's settings allow (the entity reads them at each operation; they are not replayed):
    ``capacity`` slots (0 = no limit), leases no longer than ``lease_seconds``, polls no longer than
    ``wait_seconds``."""

    capacity: int
    lease_seconds: float = MAX_LEASE_SECONDS
    wait_seconds: float = MAX_LEASE_SECONDS
    quota: int = 0
    """Graph query submissions the collector may make per rolling 24 hours in the tenant (0: none are counted)."""


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
    credited: int = 0
    """The submission number whose quota credit was taken with this lease (0: none): an ``acquire`` re-sent with the
    same number takes no second credit."""
    credits: int = 1
    """How many credits that submission number took (an ``acquire`` may ask for a few at once)."""


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
    lost: int = 0
    """Slots taken away from a holder that still worked: a renewal found its lease reclaimed (run out unrenewed)."""
    taken: list[str] = field(default_factory=list)
    """Holders whose lease was reclaimed, newest last (at most ``TAKEN_KEPT``): a renewal that names one counts a
    loss once (a renewal re-sent after a crash does not count it again)."""
    closed: list[str] = field(default_factory=list)
    """Runs that ended (the first ``RUN_MARK_CHARS`` of their id), newest last, at most ``CLOSED_KEPT``."""
    submissions: SubmissionLog = field(default_factory=SubmissionLog)
    """Graph query submissions credited in the last 24 hours (per minute: at most 1,440 entries)."""
    quota_refused: int = 0
    """Submissions refused because the daily allowance was spent (each asked again later)."""

    def to_json(self) -> JsonDict:
        return {
            "leases": [_lease_json(x) for x in self.leases.values()],
            "waiters": [{"holder": w.holder, "since": iso(w.since), "until": iso(w.until)} for w in self.waiters],
            "clock": iso(self.clock) if self.clock else None,
            "granted": self.granted,
            "released": self.released,
            "reclaimed": self.reclaimed,
            "lapsedWaiters": self.lapsed_waiters,
            "peak": self.peak,
            "lost": self.lost,
            "taken": list(self.taken),
            "closed": list(self.closed),
            "submissions": self.submissions.to_json(),
            "quotaRefused": self.quota_refused,
        }

    @classmethod
    def from_json(cls, data: JsonDict | None) -> BudgetState:
        if not data:
            return cls()
        leases = [_lease_of(x) for x in data.get("leases", [])]
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
            lost=int(data.get("lost", 0)),
            taken=[str(h) for h in data.get("taken") or []][-TAKEN_KEPT:],
            closed=[str(r) for r in data.get("closed") or []][-CLOSED_KEPT:],
            submissions=SubmissionLog.from_json(data.get("submissions")),
            quota_refused=int(data.get("quotaRefused", 0)),
        )


class Budget:
    """The budget of one (tenant, source). ``limits`` come with each operation (the app's settings), so a changed
    setting applies from the next operation: a lowered capacity grants nothing until enough slots return."""

    def __init__(self, state: BudgetState | None = None) -> None:
        self.state = state or BudgetState()

    def handle(self, request: BudgetRequest, now: datetime, limits: Limits | int) -> JsonDict:
        limits = limits if isinstance(limits, Limits) else Limits(limits)
        answer = self._handle(_clamped(request, limits), self._advance(now), limits)
        if limits.quota > 0:
            answer["quota"] = self.state.submissions.view(self.state.clock or now, limits.quota)
        return answer

    def _handle(self, request: BudgetRequest, now: datetime, limits: Limits) -> JsonDict:
        capacity = limits.capacity
        if request.op in ("acquire", "renew", "renew_collection") and self.is_closed(request.token):
            return self._closed(request, capacity)
        if request.op == "acquire":
            if request.release:  # the slot of a lane that just ended, given back first (one call, not two)
                self._release(request.release)
            if request.submit and limits.quota > 0:
                return self._acquire_submission(request, now, limits.quota, capacity)
            return self._acquire(request, now, capacity)
        if request.op == "renew":
            return self._renew(request, now, capacity)
        if request.op == "renew_collection":
            lost = [
                holder
                for holder in request.holders
                if not self._renew(replace(request, op="renew", holder=holder), now, capacity)["granted"]
            ]
            until = iso(now + timedelta(seconds=request.lease_seconds))
            renewed = len(request.holders) - len(lost)
            return {"renewed": renewed, "lost": lost, "leaseUntil": until, **self._counts(capacity)}
        if request.op == "release":
            released = self._release(request.holder)
            return {"released": released, **self._counts(capacity)}
        if request.op == "release_collection":
            holders = [*self.state.leases, *(w.holder for w in self.state.waiters)]
            mine = [h for h in holders if collection_of(h) == request.collection]
            count = sum(self._release(h) for h in mine)
            answer: JsonDict = {"released": count}
            if request.close:
                if request.refund and not self.is_closed(request.token):
                    answer["refunded"] = self.state.submissions.refund(request.refund)
                self._close(request.token)
            return {**answer, **self._counts(capacity)}
        return self.snapshot(capacity)

    # --- queries ---------------------------------------------------------------------------------------------
    def free(self, capacity: int) -> int:
        """Slots not leased (never negative after the capacity shrank)."""
        return max(0, capacity - len(self.state.leases))

    def position(self, holder: str) -> int | None:
        """0-based place in the queue, or None."""
        return next((i for i, w in enumerate(self.state.waiters) if w.holder == holder), None)

    def snapshot(self, capacity: int) -> JsonDict:
        return {**self.state.to_json(), "capacity": capacity}

    def is_closed(self, token: str) -> bool:
        """The token names a run that has ended."""
        run = run_of(token)
        return bool(run) and run[:RUN_MARK_CHARS] in self.state.closed

    # --- transitions -----------------------------------------------------------------------------------------
    def _close(self, token: str) -> None:
        run = run_of(token)[:RUN_MARK_CHARS]
        if run and run not in self.state.closed:
            self.state.closed = [*self.state.closed, run][-CLOSED_KEPT:]

    def _closed(self, request: BudgetRequest, capacity: int) -> JsonDict:
        """The answer to an operation of an ended run: nothing granted, nothing renewed, nothing counted."""
        if request.op == "renew_collection":
            until = iso(self.state.clock) if self.state.clock else None
            return {"renewed": 0, "lost": list(request.holders), "leaseUntil": until, "refused": REFUSED_CLOSED,
                    **self._counts(capacity)}  # fmt: skip
        return {"granted": False, "holder": request.holder, "position": None, "refused": REFUSED_CLOSED,
                **self._counts(capacity)}  # fmt: skip

    def _advance(self, now: datetime) -> datetime:
        """Move the budget's clock (never backwards) and drop expired leases and lapsed queue entries."""
        if self.state.clock is not None and now < self.state.clock:
            now = self.state.clock
        self.state.clock = now
        for holder in [h for h, lease in self.state.leases.items() if lease.until <= now]:
            del self.state.leases[holder]
            self.state.reclaimed += 1
            self.state.taken = [*(h for h in self.state.taken if h != holder), holder][-TAKEN_KEPT:]
        kept = [w for w in self.state.waiters if w.until > now]
        self.state.lapsed_waiters += len(self.state.waiters) - len(kept)
        self.state.waiters = kept
        self.state.submissions.prune(now)
        return now

    def _acquire(self, request: BudgetRequest, now: datetime, capacity: int) -> JsonDict:
        if capacity <= 0:  # no limit: nothing to keep (so nothing piles up in the state either)
            until = now + timedelta(seconds=request.lease_seconds)
            return {"granted": True, "holder": request.holder, "grant": 0, "leaseUntil": iso(until), "position": None,
                    **self._counts(capacity)}  # fmt: skip
        lease = self.state.leases.get(request.holder)
        if lease is not None:  # already held: a repeated acquire (or one re-sent after a crash) renews
            lease.until = now + timedelta(seconds=request.lease_seconds)
            return self._granted(lease, capacity)
        self._count_loss(request.holder)  # its lease was reclaimed while it still had work: it asks again
        index = self.position(request.holder)
        queued = index is not None
        if index is None:
            index = len(self.state.waiters)
        if index < self.free(capacity):  # entitled: nobody queued ahead of it is left without a slot
            if queued:
                del self.state.waiters[index]
            return self._granted(self._grant(request, now), capacity)
        if not queued:
            refused = self._refusal(request.holder)
            if refused is not None:
                return {"granted": False, "holder": request.holder, "position": None, "refused": refused,
                        **self._counts(capacity)}  # fmt: skip
            self.state.waiters.append(Waiter(request.holder, now, now))
        self.state.waiters[index].until = now + timedelta(
            seconds=waiter_ttl(request.lease_seconds, request.wait_seconds)
        )
        return {"granted": False, "holder": request.holder, "position": index + 1, **self._counts(capacity)}

    def _acquire_submission(self, request: BudgetRequest, now: datetime, quota: int, capacity: int) -> JsonDict:
        """``acquire`` for a Graph query submission: a slot and a credit of the daily quota, or neither. Refused while
        the allowance is spent (its slot and queue place given back: it may wait for hours, and waits for the quota,
        not for a slot); the credit is taken when the slot is granted, once per submission number."""
        held = self.state.leases.get(request.holder)
        if held is not None and held.credited == request.submit:  # its credit was taken: a re-sent acquire
            return {**self._acquire(request, now, capacity), "credit": request.submit, "credits": held.credits}
        until = self.state.submissions.free_at(now, quota)
        if until is not None:
            self._release(request.holder)
            self.state.quota_refused += 1
            return {"granted": False, "holder": request.holder, "position": None, "quotaUntil": iso(until),
                    **self._counts(capacity)}  # fmt: skip
        answer = self._acquire(request, now, capacity)
        if answer["granted"]:
            taken = max(1, min(request.credits, quota - self.state.submissions.used(now)))
            for _ in range(taken):
                self.state.submissions.take(now)
            answer["credit"] = request.submit
            answer["credits"] = taken
            lease = self.state.leases.get(request.holder)
            if lease is not None:
                lease.credited, lease.credits = request.submit, taken
        return answer

    def _refusal(self, holder: str) -> str | None:
        """Why a holder may not join the queue: one entry per collection, at most ``MAX_WAITERS`` entries."""
        collection = collection_of(holder)
        if any(collection_of(w.holder) == collection for w in self.state.waiters):
            return REFUSED_COLLECTION_WAITS
        if len(self.state.waiters) >= MAX_WAITERS:
            return REFUSED_QUEUE_FULL
        return None

    def _renew(self, request: BudgetRequest, now: datetime, capacity: int) -> JsonDict:
        """Keep a held slot. A slot that is gone (its lease ran out unrenewed, or it was released) is never taken
        back here, even when free: the holder must ask again like anyone else, and the loss is counted."""
        if capacity <= 0:
            return self._acquire(request, now, capacity)
        if self.state.leases.get(request.holder) is None and self.position(request.holder) is not None:
            return self._acquire(request, now, capacity)  # it was queued after all: renewing is asking again
        lease = self.state.leases.get(request.holder)
        if lease is None:
            self._count_loss(request.holder)
            return {"granted": False, "holder": request.holder, "position": None, **self._counts(capacity)}
        lease.until = now + timedelta(seconds=request.lease_seconds)
        return self._granted(lease, capacity)

    def _count_loss(self, holder: str) -> None:
        if holder in self.state.taken:
            self.state.taken.remove(holder)
            self.state.lost += 1

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


def _lease_of(data: JsonDict) -> Lease:
    holder, grant, credited = str(data["holder"]), int(data["grant"]), int(data.get("credited") or 0)
    credits = int(data.get("credits") or 1)
    return Lease(holder, parse_iso(data["since"]), parse_iso(data["until"]), grant, credited, credits)


def _lease_json(lease: Lease) -> JsonDict:
    data: JsonDict = {"holder": lease.holder, "since": iso(lease.since), "until": iso(lease.until)}
    data["grant"] = lease.grant
    if lease.credited:
        data["credited"] = lease.credited
    if lease.credits != 1:
        data["credits"] = lease.credits
    return data


def _clamped(request: BudgetRequest, limits: Limits) -> BudgetRequest:
    """The request's lease and wait, no longer than the settings allow (what a request says is only a wish)."""
    lease = min(request.lease_seconds, limits.lease_seconds)
    wait = min(request.wait_seconds, limits.wait_seconds, lease)
    if (lease, wait) == (request.lease_seconds, request.wait_seconds):
        return request
    return replace(request, lease_seconds=lease, wait_seconds=wait)
