"""The audit vocabulary's plain values: a half-open time window, the filters a request names, records."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeAlias

AuditRecord: TypeAlias = dict[str, Any]
"""One audit record in the common model (Graph's ``auditLogRecord`` shape, ``auditData`` an object)."""


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A half-open UTC interval [start, end)."""

    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None:
            raise ValueError("TimeWindow bounds must be timezone-aware")
        if self.end <= self.start:
            raise ValueError(f"TimeWindow end {self.end.isoformat()} must be after start {self.start.isoformat()}")

    def contains(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


@dataclass(frozen=True, slots=True)
class AuditFilters:
    """Every filter the audit APIs accept. Empty means "no filter"."""

    record_types: tuple[str, ...] = ()
    operations: tuple[str, ...] = ()
    user_principal_names: tuple[str, ...] = ()
    ip_addresses: tuple[str, ...] = ()
    object_ids: tuple[str, ...] = ()
    administrative_unit_ids: tuple[str, ...] = ()
    keyword: str | None = None
    service: str | None = None


@dataclass(frozen=True, slots=True)
class MalformedRecord:
    """A record the source returned that could not be parsed; quarantined, never silently dropped.

    ``record_id`` and ``created`` are what could still be read (a broken payload usually leaves the record's id and
    time intact): they place the record in its window and de-duplicate it like a good record. ``None`` when unreadable.
    """

    raw: str
    reason: str
    record_id: str | None = None
    created: datetime | None = None


def is_tenant_guid(tenant: str) -> bool:
    """``72f988bf-86f1-41af-91ab-2d7cd011db47``: a directory (tenant) id in its 36-character form."""
    value = tenant.strip()
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return len(value) == 36


@dataclass(slots=True)
class RecordPage:
    """One page of records as an adapter read it, with the records it could not read."""

    records: list[AuditRecord]
    malformed: list[MalformedRecord] = field(default_factory=list)
    times: list[datetime] | None = None
    """Each record's ``createdDateTime`` as parsed by the normaliser (same order as ``records``), so the writer
    trims without parsing it again; None when the page was built some other way (the writer parses)."""
