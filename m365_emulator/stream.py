"""Filters and the time-ordered record stream every API view is cut from."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime

from m365_emulator.config import TenantSpec
from m365_emulator.ingestion import Visibility
from m365_emulator.synth import HOUR, Cursor, SynthRecord, hour_count, hour_records


def _folded(values: Iterable[str] | None) -> frozenset[str]:
    return frozenset(v.strip().casefold() for v in values or () if v and v.strip())


@dataclass(frozen=True)
class RecordFilter:
    """The union of Graph's and Exchange's filters. Empty sets mean "no filter"; sets are OR-ed inside."""

    record_types: frozenset[str] = frozenset()  # casefolded; Graph camelCase and Exchange PascalCase fold alike
    operations: frozenset[str] = frozenset()
    user_ids: frozenset[str] = frozenset()
    ip_addresses: frozenset[str] = frozenset()
    object_ids: frozenset[str] = frozenset()
    administrative_unit_ids: frozenset[str] = frozenset()
    keyword: str = ""
    services: frozenset[str] = frozenset()
    workloads: frozenset[str] = frozenset()
    """Casefolded services the caller may read at all (a per-workload Graph permission); empty: every service.
    Never leaked: it is what the service may show, not what was asked for."""
    leak_rate: float = 0.0
    """Share of the records the other filters exclude that are returned anyway (a stable draw per record id and
    ``leak_seed``): a service that does not apply its filters exactly (``GraphSettings.filter_leak_rate``)."""
    leak_seed: int = 0
    visibility: Visibility | None = None
    """Only records searchable at ``visibility.as_of`` (late records: ``m365_emulator.ingestion``); None: all."""

    @classmethod
    def build(
        cls,
        *,
        record_types: Iterable[str] | None = None,
        operations: Iterable[str] | None = None,
        user_ids: Iterable[str] | None = None,
        ip_addresses: Iterable[str] | None = None,
        object_ids: Iterable[str] | None = None,
        administrative_unit_ids: Iterable[str] | None = None,
        keyword: str | None = None,
        services: Iterable[str] | None = None,
    ) -> RecordFilter:
        return cls(
            record_types=_folded(record_types),
            operations=_folded(operations),
            user_ids=_folded(user_ids),
            ip_addresses=_folded(ip_addresses),
            object_ids=_folded(object_ids),
            administrative_unit_ids=_folded(administrative_unit_ids),
            keyword=(keyword or "").strip().casefold(),
            services=_folded(services),
        )

    @property
    def empty(self) -> bool:
        return self == RecordFilter()

    def leaking(self, rate: float, seed: int) -> RecordFilter:
        """This filter on a service that also returns ``rate`` of what it excludes (no leak without a filter)."""
        asked = replace(self, workloads=frozenset())
        return self if rate <= 0 or asked.empty else replace(self, leak_rate=rate, leak_seed=seed)

    def within(self, workloads: Iterable[str]) -> RecordFilter:
        """This filter for a caller that may read only these services (casefolded; empty: all)."""
        return replace(self, workloads=_folded(workloads))

    def matches(self, record: SynthRecord) -> bool:
        if self.workloads and record.service.casefold() not in self.workloads:
            return False
        if self.visibility is not None and not self.visibility.visible(record):
            return False  # not ingested yet: never returned, asked for or leaked
        if self._selects(record):
            return True
        return self.leak_rate > 0 and self._leaks(record.id)

    def _leaks(self, record_id: str) -> bool:
        digest = hashlib.sha256(f"{self.leak_seed}:{record_id}:leak".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < self.leak_rate

    def _selects(self, record: SynthRecord) -> bool:
        if self.record_types and record.template.graph_type.casefold() not in self.record_types:
            return False
        if self.operations and record.template.operation.casefold() not in self.operations:
            return False
        if self.user_ids and record.user.upn.casefold() not in self.user_ids:
            return False
        if self.ip_addresses and record.client_ip.casefold() not in self.ip_addresses:
            return False
        if self.object_ids and record.object_id.casefold() not in self.object_ids:
            return False
        if self.services and record.service.casefold() not in self.services:
            return False
        if self.administrative_unit_ids and not (
            self.administrative_unit_ids & {u.casefold() for u in record.user.admin_units}
        ):
            return False
        return not self.keyword or self.keyword in record.audit_text().casefold()


def iter_matching(
    spec: TenantSpec, start: float, end: float, flt: RecordFilter, cursor: Cursor | None = None
) -> Iterator[tuple[SynthRecord, Cursor]]:
    """Matching records with ``start <= time < end`` in (time, id) order, each with the cursor just after it.

    Args:
        cursor: resume point returned with an earlier record (records before it are skipped).
    """
    hour, index = cursor if cursor is not None else (math.floor(start / HOUR), 0)
    while hour * HOUR < end:
        records = hour_records(spec, hour)
        for position in range(index, len(records)):
            record = records[position]
            if record.epoch < start:
                continue
            if record.epoch >= end:
                return
            if flt.matches(record):
                yield record, (hour, position + 1)
        hour, index = hour + 1, 0


def count_matching(spec: TenantSpec, start: float, end: float, flt: RecordFilter) -> int:
    """How many records ``iter_matching`` yields, without building whole hours when no filter applies."""
    if not flt.empty:
        return sum(1 for _ in iter_matching(spec, start, end, flt))
    retention = spec.retention_start.timestamp() if spec.retention_start is not None else -math.inf
    total = 0
    hour = math.floor(start / HOUR)
    while hour * HOUR < end:
        lo, hi = hour * HOUR, (hour + 1) * HOUR
        if lo >= start and hi <= end and lo >= retention:
            total += hour_count(spec, hour)  # a whole hour inside the window: no need to build it
        else:
            total += sum(1 for r in hour_records(spec, hour) if start <= r.epoch < end)
        hour += 1
    return total


def epoch(moment: datetime) -> float:
    if moment.tzinfo is None:
        raise ValueError("datetimes must be timezone-aware")
    return moment.timestamp()
