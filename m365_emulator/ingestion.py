"""Late records: when each record becomes searchable, and what a query or session created at a moment can see.

The unified audit log is not searchable at once. Microsoft's audit search page said a record can take "up to 30
minutes or up to 24 hours" to be returned, the Management Activity API documents availability as "typically 60 to 90
minutes" with no committed delivery time, and public tools re-query closed windows hours later for what arrived since
(sources in the README, "Pessimistic defaults"). So each record gets an ingestion delay, a stable draw per record
id: most delays lie in [``typical_min_seconds``, ``typical_max_seconds``] and a share ``late_fraction`` lies beyond,
up to ``max_seconds``. A record created at t is searchable from t + delay on the emulator's clock; a Graph query sees
what was searchable when it was created, an Exchange session what was searchable at its first call.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Protocol


class Ingested(Protocol):
    """What ingestion reads of a record (``m365_emulator.synth.SynthRecord`` is one): its id and when it happened."""

    @property
    def id(self) -> str: ...

    @property
    def epoch(self) -> int: ...


@dataclass
class IngestionSettings:
    """How late records become searchable (``config.ingestion``; live like the other sections)."""

    typical_min_seconds: float = 3600.0
    typical_max_seconds: float = 5400.0
    """Most records are searchable 60 to 90 minutes after they happened."""
    late_fraction: float = 0.1
    """The share of records that take longer: their delay lies in (``typical_max_seconds``, ``max_seconds``]."""
    max_seconds: float = 86400.0
    """The longest delay (a day)."""

    def __post_init__(self) -> None:
        if not 0 <= self.typical_min_seconds <= self.typical_max_seconds <= max(self.max_seconds, 0):
            raise ValueError("need 0 <= typical_min_seconds <= typical_max_seconds <= max_seconds")
        if not 0 <= self.late_fraction <= 1:
            raise ValueError("late_fraction must be within [0, 1]")

    @classmethod
    def immediate(cls) -> IngestionSettings:
        """The friendly service: every record is searchable the moment it happens."""
        return cls(0.0, 0.0, 0.0, 0.0)

    def delay_seconds(self, record: Ingested) -> float:
        """This record's ingestion delay: a stable function of its id and these settings."""
        return self.snapshot(0.0).delay_seconds(record)

    def snapshot(self, as_of: float) -> Visibility:
        """What a query or session created at ``as_of`` (epoch seconds) can see, fixed from then on."""
        return Visibility(
            self.typical_min_seconds, self.typical_max_seconds, self.late_fraction, self.max_seconds, as_of
        )


@dataclass(frozen=True)
class Visibility:
    """The records searchable at ``as_of``: those created at least their ingestion delay before it."""

    typical_min_seconds: float
    typical_max_seconds: float
    late_fraction: float
    max_seconds: float
    as_of: float

    def delay_seconds(self, record: Ingested) -> float:
        late, where = _draws(record.id)
        if late < self.late_fraction:
            return self.typical_max_seconds + where * (self.max_seconds - self.typical_max_seconds)
        return self.typical_min_seconds + where * (self.typical_max_seconds - self.typical_min_seconds)

    def visible(self, record: Ingested) -> bool:
        if record.epoch + self.max_seconds <= self.as_of:
            return True  # older than any delay: no draw needed
        return record.epoch + self.delay_seconds(record) <= self.as_of


_CACHE: dict[str, tuple[float, float]] = {}
_CACHE_LIMIT = 200_000


def _draws(record_id: str) -> tuple[float, float]:
    """Two uniform numbers in [0, 1) from the record id (whether it is late, and where in its band)."""
    found = _CACHE.get(record_id)
    if found is None:
        digest = hashlib.sha256(f"ingestion:{record_id}".encode()).digest()
        found = (int.from_bytes(digest[:8], "big") / 2**64, int.from_bytes(digest[8:16], "big") / 2**64)
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        _CACHE[record_id] = found
    return found
