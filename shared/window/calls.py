"""What every chunk activity is given, typed: ``ChunkCall``, the part of each call's input that is the same for every
source (a source's own input wraps it: ``shared.sources.<source>.calls``).

The JSON keys are the wire format of activity inputs recorded in running task hubs: they stay as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Self

from shared.models import Chunk, JsonDict, filters_from_json
from shared.values import AuditFilters


@dataclass(frozen=True, slots=True)
class ChunkCall:
    """One call of a lane: which collection, tenant and window, with which filters and options, and the lane's budget
    slot's deadline (``shared.budget.slot_deadline``) when a budget is kept."""

    collection_id: str
    tenant_id: str
    chunk_json: JsonDict
    """The window as ``Chunk.to_json`` writes it (the lane computes it once: the orchestrator replays every call)."""
    filters_json: JsonDict
    query_id: str | None = None
    """Graph: the chunk's query, once submitted (``None`` in every other source's calls)."""
    allow_incomplete: bool = False
    """The window cannot be split any further: what cannot be proved complete is reported incomplete, not split."""
    max_records: int = 0
    attempt: int = 1
    high_completeness: bool = False
    slot_deadline: str | None = None
    slot_pages: bool | None = None

    @property
    def chunk(self) -> Chunk:
        return Chunk.from_json(self.chunk_json)

    @property
    def filters(self) -> AuditFilters:
        return filters_from_json(self.filters_json)

    def to_json(self) -> JsonDict:
        out: JsonDict = {
            "collectionId": self.collection_id,
            "tenantId": self.tenant_id,
            "chunk": self.chunk_json,
            "filters": self.filters_json,
            "queryId": self.query_id,
            "allowIncomplete": self.allow_incomplete,
            "maxRecords": self.max_records,
            "attempt": self.attempt,
            "highCompleteness": self.high_completeness,
        }
        if self.slot_deadline is not None:
            out["slotDeadline"] = self.slot_deadline
            out["slotPages"] = self.slot_pages
        return out

    @classmethod
    def from_json(cls, data: JsonDict) -> ChunkCall:
        deadline = data.get("slotDeadline")
        return cls(
            collection_id=str(data["collectionId"]),
            tenant_id=str(data["tenantId"]),
            chunk_json=dict(data["chunk"]),
            filters_json=dict(data.get("filters") or {}),
            query_id=_text(data.get("queryId")),
            allow_incomplete=bool(data.get("allowIncomplete", False)),
            max_records=int(data.get("maxRecords") or 0),
            attempt=int(data.get("attempt", 1)),
            high_completeness=bool(data.get("highCompleteness", False)),
            slot_deadline=str(deadline) if deadline else None,
            slot_pages=bool(data.get("slotPages", True)) if deadline else None,
        )

    @property
    def slot_json(self) -> JsonDict:
        """The slot's part of the input, as ``shared.budget.slot_deadline.SlotDeadline.of`` reads it."""
        if self.slot_deadline is None:
            return {}
        return {"slotDeadline": self.slot_deadline, "slotPages": self.slot_pages}


@dataclass(frozen=True, slots=True)
class CursorResult:
    """What a call of a source that reads a chunk in several calls answers: where the next call goes on (``cursor``)
    or the committed chunk (``summary``: its ``ChunkSummary`` JSON), and what the call did (``stats``), carried under
    the source's own key (``STATS_KEY``: the wire format of results recorded in running task hubs)."""

    STATS_KEY: ClassVar[str] = "stats"

    cursor: JsonDict | None = None
    summary: JsonDict | None = None
    stats: JsonDict | None = None

    def to_json(self) -> JsonDict:
        out: JsonDict = {"summary": self.summary} if self.summary is not None else {"cursor": self.cursor}
        if self.stats is not None:
            out[self.STATS_KEY] = self.stats
        return out

    @classmethod
    def from_json(cls, data: JsonDict) -> Self:
        summary, cursor, stats = data.get("summary"), data.get("cursor"), data.get(cls.STATS_KEY)
        return cls(
            dict(cursor) if isinstance(cursor, dict) else None,
            dict(summary) if isinstance(summary, dict) else None,
            dict(stats) if isinstance(stats, dict) else None,
        )


def _text(value: Any) -> str | None:
    return str(value) if value is not None else None
