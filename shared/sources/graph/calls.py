"""The Graph chunk activities' inputs and results, typed (their JSON keys are the wire format of running task hubs).

A Graph chunk is submit (``GraphSubmit`` -> ``GraphSubmitted``), then checks of its query that export it once it is
done (a ``ChunkCall``, or from window version 2 a ``GraphPoll`` that may wait for its checks, -> ``GraphChecked``),
and, when deletion is on, a DELETE (a ``ChunkCall`` -> ``GraphDeleted``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from shared.models import JsonDict, iso, parse_iso
from shared.window.calls import ChunkCall


@dataclass(frozen=True, slots=True)
class GraphSubmit:
    """Submit the chunk's audit query (or find the one an earlier run of this step submitted)."""

    call: ChunkCall
    resubmit: int = 0
    """How many queries of this chunk were given up on before: the new one gets a name of its own."""

    def to_json(self) -> JsonDict:
        out = self.call.to_json()
        if self.resubmit:
            out["resubmit"] = self.resubmit
        return out

    @classmethod
    def from_json(cls, data: JsonDict) -> GraphSubmit:
        return cls(ChunkCall.from_json(data), int(data.get("resubmit") or 0))


@dataclass(frozen=True, slots=True)
class GraphSubmitted:
    query_id: str

    def to_json(self) -> JsonDict:
        return {"queryId": self.query_id}

    @classmethod
    def from_json(cls, data: JsonDict) -> GraphSubmitted:
        return cls(str(data["queryId"]))


@dataclass(frozen=True, slots=True)
class GraphPoll:
    """Window version 2: check the chunk's query at ``not_before`` and go on checking it on the collection's schedule
    (``RunOptions.next_poll`` of the time it has run since ``submitted_at``) while the next check is due within
    ``wait_seconds`` of the activity's start; export it once it is done. A payload without ``waitSeconds`` (every
    input written before version 2) is one check at once."""

    call: ChunkCall
    not_before: datetime | None = None
    submitted_at: datetime | None = None
    wait_seconds: float = 0.0
    poll_fraction: float = 0.1
    poll_min_seconds: float = 10.0
    poll_max_seconds: float = 300.0
    wait_until: datetime | None = None
    """Waits no later than this either (the window switches executions once its activities in flight have ended)."""

    def to_json(self) -> JsonDict:
        out = self.call.to_json()
        if self.wait_seconds > 0:
            out["poll"] = {
                "notBefore": iso(self.not_before) if self.not_before else None,
                "submittedAt": iso(self.submitted_at) if self.submitted_at else None,
                "waitSeconds": self.wait_seconds,
                "fraction": self.poll_fraction,
                "minSeconds": self.poll_min_seconds,
                "maxSeconds": self.poll_max_seconds,
            }
            if self.wait_until is not None:
                out["poll"]["waitUntil"] = iso(self.wait_until)
        return out

    @classmethod
    def from_json(cls, data: JsonDict) -> GraphPoll:
        call = ChunkCall.from_json(data)
        poll = data.get("poll")
        if not isinstance(poll, dict):
            return cls(call)
        not_before, submitted, until = poll.get("notBefore"), poll.get("submittedAt"), poll.get("waitUntil")
        return cls(
            call,
            parse_iso(not_before) if not_before else None,
            parse_iso(submitted) if submitted else None,
            float(poll.get("waitSeconds") or 0.0),
            float(poll.get("fraction", 0.1)),
            float(poll.get("minSeconds", 10.0)),
            float(poll.get("maxSeconds", 300.0)),
            parse_iso(until) if until else None,
        )


@dataclass(frozen=True, slots=True)
class GraphChecked:
    """A status check of the chunk's query, and its export when it was done (``summary``: the chunk's ``ChunkSummary``
    JSON; ``outcome`` one of ``shared.sources.graph.query_rules``'s)."""

    outcome: str
    raw_status: str
    limit_exceeded: bool | None = None
    """``isRecordCountLimitExceeded`` as read (None: the query could not be read: it vanished)."""
    approximate_count: int | None = None
    summary: JsonDict | None = None
    reads: int | None = None
    checks: int | None = None
    """Window version 2: status checks this activity made (None: one, as before)."""
    checked_at: datetime | None = None
    """Window version 2: when the last of them was sent, by the activity's clock (None: not said)."""
    due_at: datetime | None = None
    """Window version 2: when the last of them was due by the schedule (it is sent at that moment or just after)."""

    def to_json(self) -> JsonDict:
        out: JsonDict = {"outcome": self.outcome, "rawStatus": self.raw_status}
        if self.limit_exceeded is not None:
            out.update(limitExceeded=self.limit_exceeded, approximateCount=self.approximate_count)
        if self.summary is not None:
            out.update(summary=self.summary, reads=self.reads)
        if self.checks is not None:
            out.update(checks=self.checks, checkedAt=iso(self.checked_at) if self.checked_at else None)
            out["dueAt"] = iso(self.due_at) if self.due_at else None
        return out

    @classmethod
    def from_json(cls, data: JsonDict) -> GraphChecked:
        limit, count, reads = data.get("limitExceeded"), data.get("approximateCount"), data.get("reads")
        summary, checks, checked_at = data.get("summary"), data.get("checks"), data.get("checkedAt")
        due_at = data.get("dueAt")
        return cls(
            outcome=str(data.get("outcome")),
            raw_status=str(data.get("rawStatus", "failed")),
            limit_exceeded=bool(limit) if limit is not None else None,
            approximate_count=int(count) if count is not None else None,
            summary=dict(summary) if isinstance(summary, dict) else None,
            reads=int(reads) if reads is not None else None,
            checks=int(checks) if checks is not None else None,
            checked_at=parse_iso(checked_at) if checked_at else None,
            due_at=parse_iso(due_at) if due_at else None,
        )


@dataclass(frozen=True, slots=True)
class GraphDeleted:
    """What the query's DELETE did: ``disposition`` one of ``shared.sources.graph.lanes.QUERY_DISPOSITIONS``."""

    deleted: bool
    disposition: str
    reason: str | None = None
    kind: str | None = None

    def to_json(self) -> JsonDict:
        out: JsonDict = {"deleted": self.deleted, "disposition": self.disposition}
        if self.kind is not None:
            out["kind"] = self.kind
        if self.reason is not None:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_json(cls, data: JsonDict) -> GraphDeleted:
        reason, kind = data.get("reason"), data.get("kind")
        return cls(
            bool(data.get("deleted", False)),
            str(data.get("disposition")),
            str(reason) if reason is not None else None,
            str(kind) if kind is not None else None,
        )
