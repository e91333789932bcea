"""Data of the sliding-window state machine: options, carried state, lanes and the steps it asks for.

Kept apart from the machine itself (``shared.window.machine``) so both stay small. Everything round-trips through JSON
because the orchestration input (and the ``continue_as_new`` payload) is JSON: lanes in flight are carried into the
next execution with their whole state (``Lane.to_json``), including fields this version does not know (``extra``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from shared.budget.slot import Slot
from shared.models import ActivityError, Chunk, ChunkSummary, JsonDict, iso, parse_iso
from shared.requests.run_options import RunOptions
from shared.window.sizing import ExchangeSizing

LEARNED_DURATIONS = 8
"""How many recent query running times the expectation is learned from (carried across continue-as-new)."""


@dataclass(slots=True)
class Failure:
    chunk: Chunk
    kind: str
    message: str
    attempts: int

    def to_json(self) -> JsonDict:
        return {"chunk": self.chunk.to_json(), "kind": self.kind, "message": self.message, "attempts": self.attempts}

    @classmethod
    def from_json(cls, data: JsonDict) -> Failure:
        return cls(Chunk.from_json(data["chunk"]), str(data["kind"]), str(data["message"]), int(data["attempts"]))


QUERY_DISPOSITIONS = ("deleted", "leftOnService", "deleteUnsupported", "deleteFailed")
"""What became of each Graph query: deleted (a 2xx said so), left on the service (deletion off), delete answered
404 (not supported), delete failed otherwise."""


def no_queries() -> dict[str, int]:
    return dict.fromkeys(QUERY_DISPOSITIONS, 0)


# Lane phases. Graph: SUBMIT -> POLL (a timer, then one activity that checks the query and exports it once it is
# done) [-> DELETE when deletion is on]. Exchange: COLLECT (one activity per InvokeCommand call). With a tenant
# budget, a lane begins in BUDGET (waiting for tenant budget: asking the entity for a slot) before either.
SUBMIT, POLL, EXPORT, DELETE, COLLECT = "submit", "poll", "export", "delete", "collect"
BUDGET = "waiting for tenant budget"

RENEW = -1
"""The pseudo-lane of the collection-wide lease renewal (its timer and its entity call), never a key of ``lanes``."""

# What a parked lane does first in the next execution: issue its step at once, or wait for its timer's due time.
PARKED_CALL, PARKED_TIMER = "call", "timer"

_LANE_KEYS = frozenset(
    {
        "id",
        "chunk",
        "phase",
        "stepFailures",
        "attempts",
        "queryId",
        "polls",
        "allowIncomplete",
        "submittedAt",
        "due",
        "parked",
        "cursor",
        "calls",
        "callSeconds",
        "ending",
        "holdsSlot",
        "budgetWaits",
        "slot",
        "startedAt",
        "resubmits",
        "throttled",
        "submission",
        "credited",
        "quotaUntil",
    }
)


@dataclass(slots=True)
class Lane:
    """One chunk in flight; it keeps its slot from its first step to its last, across continue-as-new.

    ``start`` and ``end`` of a lane are single places in ``CollectionWindow`` (``_start_lane`` and ``_end``).
    """

    id: int
    chunk: Chunk
    phase: str
    step_failures: int = 0
    attempts: int = 0
    query_id: str | None = None
    polls: int = 0
    allow_incomplete: bool = False
    submitted_at: datetime | None = None
    """When the lane learned its Graph query was submitted: its running time is measured from here."""
    due: datetime | None = None
    """When the lane's current timer fires (a poll or a retry back-off)."""
    parked: str | None = None
    """Set while the window switches executions: ``PARKED_CALL`` or ``PARKED_TIMER`` (with ``due``)."""
    cursor: JsonDict | None = None
    """Where an Exchange lane is in its search sessions (``activities.exchange_calls.ExchangeCursor``)."""
    calls: int = 0
    """Activity calls issued for this chunk so far (an Exchange call writes part number ``calls - 1``)."""
    ending: tuple[str, Any] | None = None
    """How the chunk ended, kept while its query is deleted: ("done", ChunkSummary JSON) | ("failed", Failure) |
    ("split", None)."""
    issued_at: datetime | None = None
    """When the lane's activity in flight was issued (not carried: no activity is in flight across executions)."""
    call_seconds: float | None = None
    """How long the lane's last activity took, from its issue to its result: what its next call is expected to take."""
    holds_slot: bool = False
    """The lane holds a tenant budget slot (granted, not yet released): renewed with the collection's others."""
    budget_waits: int = 0
    """Times the budget answered this lane "queued" (it waits for tenant budget while this is > 0 in BUDGET)."""
    slot: Slot | None = None
    """The tenant budget slot the lane uses or last used (its holder id, lease and grant), kept while the lane asks
    again so that a loss can be told from a renewal."""
    started_at: datetime | None = None
    """When the lane began (orchestration time): how long its chunk took, for the chunk.ended log event."""
    resubmits: int = 0
    """Graph: queries of this chunk given up on (failed, vanished, unfinished past the limit) and submitted again."""
    throttled: int = 0
    """Steps of this chunk answered 429 to the end of their HTTP retries: retried without spending an attempt."""
    submission: int = 0
    """Graph, daily quota kept: the collection's number of the query submission the lane asks a credit for (0: none
    asked), kept while it waits so that an ``acquire`` sent again takes the credit once."""
    credited: bool = False
    """The tenant budget granted the credit of ``submission``: the lane's next submit spends it."""
    quota_until: datetime | None = None
    """The lane waits for the tenant's daily Graph quota until then (its next ``acquire`` follows a timer)."""
    extra: JsonDict = field(default_factory=dict)
    """Per-lane state this version does not know (added by a newer one): carried verbatim across continue-as-new."""
    _texts: tuple[JsonDict, str] | None = field(default=None, repr=False, compare=False)

    def chunk_json(self) -> JsonDict:
        """The chunk as activity payloads carry it (computed once: the orchestrator replays this on every episode)."""
        if self._texts is None:
            self._texts = (self.chunk.to_json(), self.chunk.label())
        return self._texts[0]

    def label(self) -> str:
        self.chunk_json()
        assert self._texts is not None
        return self._texts[1]

    def to_json(self) -> JsonDict:
        ending: JsonDict | None = None
        if self.ending is not None:
            kind, value = self.ending
            encoded = value.to_json() if isinstance(value, Failure) else value
            ending = {"kind": kind, "value": encoded}
        return {
            **self.extra,
            "id": self.id,
            "chunk": self.chunk.to_json(),
            "phase": self.phase,
            "stepFailures": self.step_failures,
            "attempts": self.attempts,
            "queryId": self.query_id,
            "polls": self.polls,
            "allowIncomplete": self.allow_incomplete,
            "submittedAt": iso(self.submitted_at) if self.submitted_at else None,
            "due": iso(self.due) if self.due else None,
            "parked": self.parked,
            "cursor": self.cursor,
            "calls": self.calls,
            "callSeconds": self.call_seconds,
            "ending": ending,
            "holdsSlot": self.holds_slot,
            "budgetWaits": self.budget_waits,
            "slot": self.slot.to_json() if self.slot else None,
            "startedAt": iso(self.started_at) if self.started_at else None,
            "resubmits": self.resubmits,
            "throttled": self.throttled,
            "submission": self.submission,
            "credited": self.credited,
            "quotaUntil": iso(self.quota_until) if self.quota_until else None,
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> Lane:
        ending: tuple[str, Any] | None = None
        raw = data.get("ending")
        if raw:
            kind, value = str(raw["kind"]), raw.get("value")
            decoded: Any = value
            if kind == "failed" and value is not None:
                decoded = Failure.from_json(value)
            ending = (kind, decoded)
        return cls(
            id=int(data["id"]),
            chunk=Chunk.from_json(data["chunk"]),
            phase=str(data["phase"]),
            step_failures=int(data.get("stepFailures", 0)),
            attempts=int(data.get("attempts", 0)),
            query_id=data.get("queryId"),
            polls=int(data.get("polls", 0)),
            allow_incomplete=bool(data.get("allowIncomplete", False)),
            submitted_at=parse_iso(data["submittedAt"]) if data.get("submittedAt") else None,
            due=parse_iso(data["due"]) if data.get("due") else None,
            parked=data.get("parked"),
            cursor=dict(data["cursor"]) if data.get("cursor") else None,
            calls=int(data.get("calls", 0)),
            call_seconds=float(data["callSeconds"]) if data.get("callSeconds") is not None else None,
            ending=ending,
            holds_slot=bool(data.get("holdsSlot", False)),
            budget_waits=int(data.get("budgetWaits", 0)),
            slot=Slot.from_json(data["slot"]) if data.get("slot") else None,
            started_at=parse_iso(data["startedAt"]) if data.get("startedAt") else None,
            resubmits=int(data.get("resubmits", 0)),
            throttled=int(data.get("throttled", 0)),
            submission=int(data.get("submission", 0)),
            credited=bool(data.get("credited", False)),
            quota_until=parse_iso(data["quotaUntil"]) if data.get("quotaUntil") else None,
            extra={k: v for k, v in data.items() if k not in _LANE_KEYS},
        )


@dataclass(slots=True)
class Carried:
    """What survives ``continue_as_new``: a cursor, counters, failures, parked lanes and what polling learned."""

    cursor: int = 0
    requeued: list[Chunk] = field(default_factory=list)
    completed: int = 0
    failed: int = 0
    records: int = 0
    splits: int = 0
    incomplete: int = 0
    failures: list[Failure] = field(default_factory=list)
    incomplete_windows: list[Chunk] = field(default_factory=list)
    """Windows collected only as far as the source allowed (for the live page's grid and the output)."""
    doomed: ActivityError | None = None
    execution: int = 1
    next_lane: int = 0
    queries: dict[str, int] = field(default_factory=no_queries)
    """Graph queries by disposition (``QUERY_DISPOSITIONS``)."""
    lanes: list[Lane] = field(default_factory=list)
    """Lanes in flight when the previous execution ended, each parked with what it does next."""
    durations: list[float] = field(default_factory=list)
    """Running times (seconds) of this collection's most recent finished Graph queries, newest last."""
    renew_due: datetime | None = None
    """When the collection's held budget slots are renewed next (None: no renewal pending)."""
    budget_waits: int = 0
    """Times a lane of this collection was answered "queued" by the tenant budget."""
    budget_lost: int = 0
    """Slots taken away from a lane that still had work (a renewal found them gone, or the lane found its lease run
    out and was not granted the same slot again): the lane asked for a slot again before its next request."""
    exchange: ExchangeSizing = field(default_factory=ExchangeSizing)
    """Exchange: the tenant's density and sessions as learned, and what the calls cost (``shared.window.sizing``)."""
    incomplete_notes: list[JsonDict] = field(default_factory=list)
    """Per incomplete window, why (``{"window": label, "reasons": [...]}``), for the output."""
    budget_seen_at: datetime | None = None
    """When the latest answer of the tenant budget arrived (orchestration time), and how many lanes of any
    collection it said were waiting: a lane's slot goes to the collection's next chunk without asking only while
    this is recent and nobody waits."""
    budget_waiting: int = 0
    spares: list[Slot] = field(default_factory=list)
    """Slots of lanes that ended and that no chunk took yet: settled when the window fills (handed on, folded into
    an ``acquire``, or released); while the window switches executions they are kept (and renewed) for the next
    execution's chunks instead of going back to the budget and being asked for again."""
    submissions: int = 0
    """Graph query submissions this collection asked credits for (the number of the latest: each is unique)."""
    quota_waits: int = 0
    """Times a lane was told to wait for the tenant's daily Graph quota."""
    budget_quota: JsonDict | None = None
    """The tenant's daily Graph quota as the budget's latest answer said it (allowed, used, left, until)."""

    def to_json(self) -> JsonDict:
        return {
            "exchange": self.exchange.to_json(),
            "incompleteNotes": [dict(n) for n in self.incomplete_notes],
            "cursor": self.cursor,
            "requeued": [c.to_json() for c in self.requeued],
            "completed": self.completed,
            "failed": self.failed,
            "records": self.records,
            "splits": self.splits,
            "incomplete": self.incomplete,
            "failures": [f.to_json() for f in self.failures],
            "incompleteWindows": [c.to_json() for c in self.incomplete_windows],
            "doomed": self.doomed.to_json() if self.doomed else None,
            "execution": self.execution,
            "nextLane": self.next_lane,
            "queries": dict(self.queries),
            "lanes": [lane.to_json() for lane in self.lanes],
            "durations": list(self.durations),
            "renewDue": iso(self.renew_due) if self.renew_due else None,
            "budgetWaits": self.budget_waits,
            "budgetLost": self.budget_lost,
            "budgetSeenAt": iso(self.budget_seen_at) if self.budget_seen_at else None,
            "budgetWaiting": self.budget_waiting,
            "spareSlots": [slot.to_json() for slot in self.spares],
            "submissions": self.submissions,
            "quotaWaits": self.quota_waits,
            "budgetQuota": dict(self.budget_quota) if self.budget_quota else None,
        }

    @classmethod
    def from_json(cls, data: JsonDict | None) -> Carried:
        if not data:
            return cls()
        doomed = data.get("doomed")
        return cls(
            cursor=int(data["cursor"]),
            requeued=[Chunk.from_json(c) for c in data.get("requeued", [])],
            completed=int(data["completed"]),
            failed=int(data["failed"]),
            records=int(data["records"]),
            splits=int(data["splits"]),
            incomplete=int(data.get("incomplete", 0)),
            failures=[Failure.from_json(f) for f in data.get("failures", [])],
            incomplete_windows=[Chunk.from_json(c) for c in data.get("incompleteWindows", [])],
            doomed=ActivityError.from_json(doomed) if doomed else None,
            execution=int(data.get("execution", 1)),
            next_lane=int(data.get("nextLane", 0)),
            queries={**no_queries(), **{k: int(v) for k, v in (data.get("queries") or {}).items()}},
            lanes=[Lane.from_json(lane) for lane in data.get("lanes") or []],
            durations=[float(d) for d in data.get("durations") or []],
            renew_due=parse_iso(data["renewDue"]) if data.get("renewDue") else None,
            budget_waits=int(data.get("budgetWaits", 0)),
            budget_lost=int(data.get("budgetLost", 0)),
            exchange=ExchangeSizing.from_json(data.get("exchange")),
            incomplete_notes=[dict(n) for n in data.get("incompleteNotes") or ()],
            budget_seen_at=parse_iso(data["budgetSeenAt"]) if data.get("budgetSeenAt") else None,
            budget_waiting=int(data.get("budgetWaiting", 0)),
            spares=[Slot.from_json(slot) for slot in data.get("spareSlots") or []],
            submissions=int(data.get("submissions", 0)),
            quota_waits=int(data.get("quotaWaits", 0)),
            budget_quota=dict(data["budgetQuota"]) if data.get("budgetQuota") else None,
        )

    def learn_duration(self, seconds: float) -> None:
        self.durations = [*self.durations, max(0.0, seconds)][-LEARNED_DURATIONS:]

    @property
    def expected_duration(self) -> float | None:
        """The shortest recent running time: a first check a little before it is rarely late for any query."""
        return min(self.durations) if self.durations else None


@dataclass(frozen=True, slots=True)
class CallActivity:
    lane: int
    name: str
    input: JsonDict


@dataclass(frozen=True, slots=True)
class CallEntity:
    """An operation on the collection's tenant budget entity whose answer the lane (or ``RENEW``) waits for."""

    lane: int
    operation: str
    input: JsonDict


@dataclass(frozen=True, slots=True)
class SignalEntity:
    """A one-way operation on the tenant budget entity (a release): nothing waits for it."""

    operation: str
    input: JsonDict


@dataclass(frozen=True, slots=True)
class Cancel:
    """The lane's timer is cancelled (its next step follows at once): a queued lane asks again when a slot of its own
    collection came back, instead of at its next poll."""

    lane: int


@dataclass(frozen=True, slots=True)
class Wait:
    """A durable timer for ``lane`` that fires at ``until``."""

    lane: int
    until: datetime

    def after(self, now: datetime) -> float:
        return max(0.0, (self.until - now).total_seconds())


Step = CallActivity | CallEntity | SignalEntity | Cancel | Wait


def later(now: datetime, seconds: float) -> datetime:
    return now + timedelta(seconds=max(0.0, seconds))


__all__ = [
    "BUDGET",
    "COLLECT",
    "DELETE",
    "EXPORT",
    "PARKED_CALL",
    "PARKED_TIMER",
    "POLL",
    "QUERY_DISPOSITIONS",
    "RENEW",
    "SUBMIT",
    "CallActivity",
    "CallEntity",
    "Cancel",
    "Carried",
    "ChunkSummary",
    "Failure",
    "Lane",
    "RunOptions",
    "SignalEntity",
    "Slot",
    "Step",
    "Wait",
    "later",
    "no_queries",
]
