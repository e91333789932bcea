"""Data of the sliding-window state machine: options, carried state, lanes and the steps it asks for.

Kept apart from the machine itself (``shared.window.machine``) so both stay small. Everything round-trips through JSON
because the orchestration input (and the ``continue_as_new`` payload) is JSON: lanes in flight are carried into the
next execution with their whole state (``Lane.to_json``), including fields this version does not know (``extra``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from shared.budget.slot import Slot
from shared.models import ActivityError, Chunk, ChunkSummary, JsonDict, iso, parse_iso
from shared.requests.run_options import RunOptions


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


# Lane phases every source shares: a lane with a tenant budget begins in BUDGET (waiting for tenant budget: asking the
# entity for a slot) before its source's first phase. A source names its own phases (``shared.sources``: Graph
# submit -> poll [-> delete], Exchange collect); the grid and the lanes table show them as they are named.
BUDGET = "waiting for tenant budget"

RENEW = -1
"""The pseudo-lane of the collection-wide lease renewal (its timer and its entity call), never a key of ``lanes``."""

# What a parked lane does first in the next execution: issue its step at once, or wait for its timer's due time.
PARKED_CALL, PARKED_TIMER = "call", "timer"


@dataclass(frozen=True, slots=True)
class _Codec:
    """How one lane field is written to and read from its JSON key (``None`` stays ``None`` where allowed)."""

    key: str
    write: Callable[[Any], Any]
    read: Callable[[JsonDict, str], Any]


def _raw(data: JsonDict, key: str) -> Any:
    return data.get(key)


def _number(kind: Callable[[Any], Any], default: Any) -> Callable[[JsonDict, str], Any]:
    return lambda data, key: kind(data.get(key, default))


def _optional(kind: Callable[[Any], Any]) -> Callable[[JsonDict, str], Any]:
    """``kind(value)`` when the JSON holds a value that is not empty, else None."""
    return lambda data, key: kind(data[key]) if data.get(key) else None


def _moment(value: datetime | None) -> str | None:
    return iso(value) if value else None


def _same(value: Any) -> Any:
    return value


def _optional_float(data: JsonDict, key: str) -> float | None:
    value = data.get(key)
    return float(value) if value is not None else None


def _slot_json(slot: Slot | None) -> JsonDict | None:
    return slot.to_json() if slot else None


def _ending_json(ending: tuple[str, Any] | None) -> JsonDict | None:
    if ending is None:
        return None
    kind, value = ending
    return {"kind": kind, "value": value.to_json() if isinstance(value, Failure) else value}


def _ending_of(data: JsonDict, key: str) -> tuple[str, Any] | None:
    raw = data.get(key)
    if not raw:
        return None
    kind, value = str(raw["kind"]), raw.get("value")
    return kind, Failure.from_json(value) if kind == "failed" and value is not None else value


def _json(key: str, write: Callable[[Any], Any], read: Callable[[JsonDict, str], Any]) -> dict[str, _Codec]:
    """A lane field's JSON form, declared with the field (``field(metadata=_json(...))``)."""
    return {"codec": _Codec(key, write, read)}


@dataclass(slots=True)
class Lane:
    """One chunk in flight; it keeps its slot from its first step to its last, across continue-as-new.

    ``start`` and ``end`` of a lane are single places in ``CollectionWindow`` (``_start_lane`` and ``_end``). Each
    field says its JSON key and form where it is declared (``field(metadata=_json(...))``): ``to_json`` and
    ``from_json`` follow the declarations, so a field is added in one place. Which source uses which field is said on
    it; a source's lanes (``shared.sources``) read and write the fields they use.
    """

    id: int = field(metadata=_json("id", _same, _number(int, None)))
    chunk: Chunk = field(metadata=_json("chunk", Chunk.to_json, lambda data, key: Chunk.from_json(data[key])))
    phase: str = field(metadata=_json("phase", _same, _number(str, None)))
    step_failures: int = field(default=0, metadata=_json("stepFailures", _same, _number(int, 0)))
    attempts: int = field(default=0, metadata=_json("attempts", _same, _number(int, 0)))
    query_id: str | None = field(default=None, metadata=_json("queryId", _same, _raw))
    """Graph: the chunk's audit query."""
    polls: int = field(default=0, metadata=_json("polls", _same, _number(int, 0)))
    allow_incomplete: bool = field(default=False, metadata=_json("allowIncomplete", _same, _number(bool, False)))
    submitted_at: datetime | None = field(default=None, metadata=_json("submittedAt", _moment, _optional(parse_iso)))
    """Graph: when the lane learned its query was submitted: its running time is measured from here."""
    due: datetime | None = field(default=None, metadata=_json("due", _moment, _optional(parse_iso)))
    """When the lane's current timer fires (a poll or a retry back-off)."""
    parked: str | None = field(default=None, metadata=_json("parked", _same, _raw))
    """Set while the window switches executions: ``PARKED_CALL`` or ``PARKED_TIMER`` (with ``due``)."""
    cursor: JsonDict | None = field(default=None, metadata=_json("cursor", _same, _optional(dict)))
    """Where a lane that reads its chunk call by call goes on (Exchange: ``activities.exchange_calls.ExchangeCursor``;
    the feed: where its listing and blobs are)."""
    calls: int = field(default=0, metadata=_json("calls", _same, _number(int, 0)))
    """Activity calls issued for this chunk so far (a call of a chunk read in parts writes part number
    ``calls - 1``)."""
    call_seconds: float | None = field(default=None, metadata=_json("callSeconds", _same, _optional_float))
    """How long the lane's last activity took, from its issue to its result: what its next call is expected to take."""
    ending: tuple[str, Any] | None = field(default=None, metadata=_json("ending", _ending_json, _ending_of))
    """How the chunk ended, kept while the source cleans up (a Graph query deleted): ("done", ChunkSummary JSON) |
    ("failed", Failure) | ("split", None)."""
    holds_slot: bool = field(default=False, metadata=_json("holdsSlot", _same, _number(bool, False)))
    """The lane holds a tenant budget slot (granted, not yet released): renewed with the collection's others."""
    budget_waits: int = field(default=0, metadata=_json("budgetWaits", _same, _number(int, 0)))
    """Times the budget answered this lane "queued" (it waits for tenant budget while this is > 0 in BUDGET)."""
    slot: Slot | None = field(default=None, metadata=_json("slot", _slot_json, _optional(Slot.from_json)))
    """The tenant budget slot the lane uses or last used (its holder id, lease and grant), kept while the lane asks
    again so that a loss can be told from a renewal."""
    started_at: datetime | None = field(default=None, metadata=_json("startedAt", _moment, _optional(parse_iso)))
    """When the lane began (orchestration time): how long its chunk took, for the chunk.ended log event."""
    resubmits: int = field(default=0, metadata=_json("resubmits", _same, _number(int, 0)))
    """Graph: queries of this chunk given up on (failed, vanished, unfinished past the limit) and submitted again."""
    throttled: int = field(default=0, metadata=_json("throttled", _same, _number(int, 0)))
    """Steps of this chunk answered 429 to the end of their HTTP retries: retried without spending an attempt."""
    submission: int = field(default=0, metadata=_json("submission", _same, _number(int, 0)))
    """Daily quota kept (Graph): the collection's number of the query submission the lane asks a credit for (0: none
    asked), kept while it waits so that an ``acquire`` sent again takes the credit once."""
    credited: bool = field(default=False, metadata=_json("credited", _same, _number(bool, False)))
    """The tenant budget granted the credit of ``submission``: the lane's next submit spends it."""
    quota_until: datetime | None = field(default=None, metadata=_json("quotaUntil", _moment, _optional(parse_iso)))
    """The lane waits for the tenant's daily Graph quota until then (its next ``acquire`` follows a timer)."""
    issued_at: datetime | None = field(default=None)
    """When the lane's activity in flight was issued (not carried: no activity is in flight across executions)."""
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
        out: JsonDict = dict(self.extra)
        for name, key, write, _ in _LANE_CODECS:
            value = getattr(self, name)
            out[key] = value if write is _same else write(value)
        return out

    @classmethod
    def from_json(cls, data: JsonDict) -> Lane:
        values = {name: read(data, key) for name, key, _, read in _LANE_CODECS}
        return cls(**values, extra={k: v for k, v in data.items() if k not in _LANE_KEYS})


_LANE_CODECS: tuple[tuple[str, str, Callable[[Any], Any], Callable[[JsonDict, str], Any]], ...] = tuple(
    (f.name, f.metadata["codec"].key, f.metadata["codec"].write, f.metadata["codec"].read)
    for f in dataclasses.fields(Lane)
    if "codec" in f.metadata
)
"""(field, JSON key, writer, reader) of every lane field that is carried, in declaration order."""
_LANE_KEYS = frozenset(key for _, key, _, _ in _LANE_CODECS)


SECTIONS_BEFORE_SOURCES: JsonDict = {
    "queries": {"deleted": 0, "leftOnService": 0, "deleteUnsupported": 0, "deleteFailed": 0},
    "durations": [],
    "exchange": {
        "samples": [],
        "continues": None,
        "calls": 0,
        "fullCalls": 0,
        "presplits": 0,
        "confirmations": 0,
        "falseAnswers": 0,
    },
}
"""The sections every carried state held, whatever its source, before each source kept its own state (Graph's query
dispositions and learned running times, Exchange's sizing), as a fresh collection wrote them. A fresh state still
starts with them: a replay of the switch an older version made computes the same state, and its seal still holds
(``shared.requests.admission``). A source reads and writes its own sections; the others stay as they are."""


_CARRIED_KEYS = frozenset(
    {
        "incompleteNotes",
        "cursor",
        "requeued",
        "completed",
        "failed",
        "records",
        "splits",
        "incomplete",
        "failures",
        "incompleteWindows",
        "doomed",
        "execution",
        "nextLane",
        "lanes",
        "renewDue",
        "budgetWaits",
        "budgetLost",
        "budgetSeenAt",
        "budgetWaiting",
        "spareSlots",
        "submissions",
        "quotaWaits",
        "budgetQuota",
        "credits",
    }
)


def _fresh_sections() -> JsonDict:
    """``SECTIONS_BEFORE_SOURCES``, new objects (built, not deep-copied: a window is built on every replay)."""
    exchange = SECTIONS_BEFORE_SOURCES["exchange"]
    return {
        "queries": dict(SECTIONS_BEFORE_SOURCES["queries"]),
        "durations": [],
        "exchange": {**exchange, "samples": []},
    }


@dataclass(slots=True)
class Carried:
    """What survives ``continue_as_new``: a cursor, counters, failures, parked lanes, and each source's sections."""

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
    lanes: list[Lane] = field(default_factory=list)
    """Lanes in flight when the previous execution ended, each parked with what it does next."""
    renew_due: datetime | None = None
    """When the collection's held budget slots are renewed next (None: no renewal pending)."""
    budget_waits: int = 0
    """Times a lane of this collection was answered "queued" by the tenant budget."""
    budget_lost: int = 0
    """Slots taken away from a lane that still had work (a renewal found them gone, or the lane found its lease run
    out and was not granted the same slot again): the lane asked for a slot again before its next request."""
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
    """Query submissions this collection asked credits of the tenant's daily quota for (the number of the latest:
    each is unique)."""
    quota_waits: int = 0
    """Times a lane was told to wait for the tenant's daily Graph quota."""
    credits: int = 0
    """Submission credits of the tenant's daily quota the collection took and has not spent yet (``BudgetOptions.keep``:
    taken a few at once; the unspent ones go back when the run ends)."""
    budget_quota: JsonDict | None = None
    """The tenant's daily Graph quota as the budget's latest answer said it (allowed, used, left, until)."""
    sections: JsonDict = field(default_factory=_fresh_sections)
    """The sources' own state, by JSON key, as JSON (a source's lanes read theirs when the window is built and write
    it back before a switch): ``SECTIONS_BEFORE_SOURCES`` and whatever key a source adds. Keys this version does not
    know are kept here too, and carried verbatim."""

    def to_json(self) -> JsonDict:
        # Shallow: a source's lanes replace their sections whole (``save``), never change them in place.
        return {
            **self.sections,
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
            "lanes": [lane.to_json() for lane in self.lanes],
            "renewDue": iso(self.renew_due) if self.renew_due else None,
            "budgetWaits": self.budget_waits,
            "budgetLost": self.budget_lost,
            "budgetSeenAt": iso(self.budget_seen_at) if self.budget_seen_at else None,
            "budgetWaiting": self.budget_waiting,
            "spareSlots": [slot.to_json() for slot in self.spares],
            "submissions": self.submissions,
            "quotaWaits": self.quota_waits,
            "budgetQuota": dict(self.budget_quota) if self.budget_quota else None,
            **({"credits": self.credits} if self.credits else {}),
        }

    @classmethod
    def from_json(cls, data: JsonDict | None) -> Carried:
        if not data:
            return cls()
        doomed = data.get("doomed")
        sections = _fresh_sections()
        sections.update({k: v for k, v in data.items() if k not in _CARRIED_KEYS})
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
            lanes=[Lane.from_json(lane) for lane in data.get("lanes") or []],
            renew_due=parse_iso(data["renewDue"]) if data.get("renewDue") else None,
            budget_waits=int(data.get("budgetWaits", 0)),
            budget_lost=int(data.get("budgetLost", 0)),
            incomplete_notes=[dict(n) for n in data.get("incompleteNotes") or ()],
            budget_seen_at=parse_iso(data["budgetSeenAt"]) if data.get("budgetSeenAt") else None,
            budget_waiting=int(data.get("budgetWaiting", 0)),
            spares=[Slot.from_json(slot) for slot in data.get("spareSlots") or []],
            submissions=int(data.get("submissions", 0)),
            quota_waits=int(data.get("quotaWaits", 0)),
            budget_quota=dict(data["budgetQuota"]) if data.get("budgetQuota") else None,
            credits=int(data.get("credits", 0)),
            sections=sections,
        )


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
    "PARKED_CALL",
    "PARKED_TIMER",
    "RENEW",
    "SECTIONS_BEFORE_SOURCES",
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
]
