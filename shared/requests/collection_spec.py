"""The fixed part of a collection's orchestration input: what to collect and how (``CollectionSpec``)."""

from __future__ import annotations

from dataclasses import dataclass

from shared.models import Chunk, JsonDict
from shared.requests.run_options import RunOptions
from shared.timeline.planning import ChunkPlan


@dataclass(frozen=True, slots=True)
class CollectionSpec:
    """The fixed part of the orchestration input: what to collect and how."""

    collection_id: str
    tenant_id: str
    source: str
    filters: JsonDict
    options: RunOptions
    plan: ChunkPlan | None = None
    explicit: tuple[Chunk, ...] = ()
    """Explicit windows (a retry-failed collection) instead of a regular plan."""
    parent_collection_id: str | None = None
    tenant_guid: str | None = None
    """The tenant's GUID, resolved at the edge when the request named a domain (``tenantGuid``; absent in inputs
    written before it existed). The tenant budget is keyed by it, so every spelling of a tenant shares one budget."""

    @property
    def budget_tenant(self) -> str:
        """The tenant as the budget entity's key names it: its GUID, or, for an input without one, the request's
        spelling (what that collection's lanes already hold their slots under, so a replay keeps them)."""
        return self.tenant_guid or self.tenant_id

    @property
    def planned(self) -> int:
        return self.plan.count if self.plan else len(self.explicit)

    def planned_chunk(self, index: int) -> Chunk:
        return self.plan.chunk(index) if self.plan else self.explicit[index]

    @property
    def ranges(self) -> list[Chunk]:
        """What the collection covers: its plan's [start, end), or a retry's explicit windows."""
        return [Chunk(self.plan.start, self.plan.end)] if self.plan else list(self.explicit)

    def retry_chunks(self, output: JsonDict) -> list[Chunk]:
        """Windows a retry-failed collection must cover: failed chunks plus, after a stop, those never started."""
        chunks = [Chunk.from_json(f["chunk"]) for f in output.get("failures") or []]
        remaining = output.get("remaining") or {}
        chunks += [Chunk.from_json(c) for c in remaining.get("requeued") or []]
        chunks += [self.planned_chunk(i) for i in range(int(remaining.get("cursor", self.planned)), self.planned)]
        return sorted((Chunk(c.start, c.end) for c in chunks), key=lambda c: c.start)

    def to_json(self) -> JsonDict:
        out: JsonDict = {
            "collectionId": self.collection_id,
            "tenantId": self.tenant_id,
            "source": self.source,
            "filters": self.filters,
            "options": self.options.to_json(),
            "plan": self.plan.to_json() if self.plan else None,
            "explicit": [c.to_json() for c in self.explicit],
            "parentCollectionId": self.parent_collection_id,
        }
        if self.tenant_guid is not None:
            out["tenantGuid"] = self.tenant_guid
        return out

    @classmethod
    def from_json(cls, data: JsonDict) -> CollectionSpec:
        plan = data.get("plan")
        return cls(
            collection_id=str(data["collectionId"]),
            tenant_id=str(data["tenantId"]),
            source=str(data["source"]),
            filters=dict(data.get("filters") or {}),
            options=RunOptions.from_json(data.get("options") or {}),
            plan=ChunkPlan.from_json(plan) if plan else None,
            explicit=tuple(Chunk.from_json(c) for c in data.get("explicit") or ()),
            parent_collection_id=data.get("parentCollectionId"),
            tenant_guid=data.get("tenantGuid"),
        )
