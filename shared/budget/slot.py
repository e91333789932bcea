"""A tenant budget slot as a collection's window knows it (a lane's, or one kept for the next chunk)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from shared.models import JsonDict, iso, parse_iso


@dataclass(slots=True)
class Slot:
    """A tenant budget slot as the window knows it: whose holder id it is leased under (``<collection>/<holder>``),
    until when (the entity's clock, from its latest answer), which grant, whether the Graph export may run past the
    lease it carries (the window saw the lease renewed after a call stopped at its deadline), and since when the
    lane has it."""

    holder: int
    lease_until: datetime | None = None
    grant: int | None = None
    pages_free: bool = False
    since: datetime | None = None
    """When the lane took the slot (orchestration time): how long its chunk kept it."""

    def to_json(self) -> JsonDict:
        return {
            "holder": self.holder,
            "leaseUntil": iso(self.lease_until) if self.lease_until else None,
            "grant": self.grant,
            "pagesFree": self.pages_free,
            "since": iso(self.since) if self.since else None,
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> Slot:
        until, grant, since = data.get("leaseUntil"), data.get("grant"), data.get("since")
        return cls(
            int(data["holder"]),
            parse_iso(until) if until else None,
            int(grant) if grant is not None else None,
            bool(data.get("pagesFree", False)),
            parse_iso(since) if since else None,
        )
