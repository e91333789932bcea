"""The Exchange chunk activity's input and result, typed (their JSON keys are the wire format of running task hubs).

An Exchange chunk is one activity per ``Search-UnifiedAuditLog`` call (``ExchangeCall`` -> ``ExchangeCalled``): the lane
carries its cursor from one call to the next until a call commits the chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.models import JsonDict
from shared.window.calls import ChunkCall, CursorResult


@dataclass(frozen=True, slots=True)
class ExchangeCall:
    """One call of the lane's chunk."""

    call: ChunkCall
    cursor: JsonDict | None = None
    """Where the lane is in its sessions (``shared.audit.exchange_session.ExchangeCursor``; None: its first call)."""
    number: int = 0
    """The lane's call number: the part this call writes (every call its own, retries included)."""
    split_on_full: bool = False
    """The service was seen not to continue its sessions: a full call splits the window at once."""
    expected_records: float | None = None
    """What the densest record type of the window is expected to hold (None: nothing learned): when an empty first
    answer is surprising."""

    def to_json(self) -> JsonDict:
        return {
            **self.call.to_json(),
            "cursor": self.cursor,
            "call": self.number,
            "splitOnFull": self.split_on_full,
            "expectedRecords": self.expected_records,
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> ExchangeCall:
        expected = data.get("expectedRecords")
        cursor = data.get("cursor")
        return cls(
            ChunkCall.from_json(data),
            dict(cursor) if isinstance(cursor, dict) else None,
            int(data.get("call", 0)),
            bool(data.get("splitOnFull", False)),
            float(expected) if isinstance(expected, int | float) and not isinstance(expected, bool) else None,
        )


class ExchangeCalled(CursorResult):
    """What a call did: where the next call goes on (``cursor``), or the committed chunk (``summary``: its
    ``ChunkSummary`` JSON); ``stats``: what its calls cost and showed (``ExchangeCursor.stats``), which the window
    learns the tenant's density from."""

    __slots__ = ()
    STATS_KEY = "exchange"
