"""The Graph chunk activities' inputs and results, typed (their JSON keys are the wire format of running task hubs).

A Graph chunk is submit (``GraphSubmit`` -> ``GraphSubmitted``), then checks of its query that export it once it is
done (a ``ChunkCall`` -> ``GraphChecked``), and, when deletion is on, a DELETE (a ``ChunkCall`` -> ``GraphDeleted``).
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.models import JsonDict
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

    def to_json(self) -> JsonDict:
        out: JsonDict = {"outcome": self.outcome, "rawStatus": self.raw_status}
        if self.limit_exceeded is not None:
            out.update(limitExceeded=self.limit_exceeded, approximateCount=self.approximate_count)
        if self.summary is not None:
            out.update(summary=self.summary, reads=self.reads)
        return out

    @classmethod
    def from_json(cls, data: JsonDict) -> GraphChecked:
        limit, count, reads = data.get("limitExceeded"), data.get("approximateCount"), data.get("reads")
        summary = data.get("summary")
        return cls(
            outcome=str(data.get("outcome")),
            raw_status=str(data.get("rawStatus", "failed")),
            limit_exceeded=bool(limit) if limit is not None else None,
            approximate_count=int(count) if count is not None else None,
            summary=dict(summary) if isinstance(summary, dict) else None,
            reads=int(reads) if reads is not None else None,
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
