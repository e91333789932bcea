"""A tenant's daily Graph query submissions, as the tenant budget keeps them: a rolling 24 hours, bounded state.

Microsoft Graph documents a per-tenant baseline of at least 200 audit log query submissions per rolling 24 hours,
shared with every other tool of the tenant (learn.microsoft.com/graph/throttling-limits, "Security audit log query
service limits"). The budget entity (``shared.budget.machine``) takes a credit from this log for every Graph query a
collection submits, and refuses one past the collector's allowance (the quota less a reserve left to other tools).

The log is pure: the entity passes its clock in. It keeps, per minute in which submissions were made, the time of
the newest of them (whole epoch seconds, rounded up) and how many: a submission therefore leaves the window at most a
minute later than it would by its own time (never earlier), and the state holds at most one entry per minute of the
day (1,440) and never more entries than submissions within the window, whatever the quota.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from shared.models import JsonDict, iso

DAY_SECONDS = 86_400
"""The rolling window the service counts submissions over."""
MINUTE = 60


def _epoch(moment: datetime) -> int:
    return math.ceil(moment.timestamp())


def _moment(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


@dataclass(slots=True)
class SubmissionLog:
    """Submissions of the last 24 hours, oldest first: ``[newest epoch second of its minute, count]`` per minute."""

    buckets: list[list[int]] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: object) -> SubmissionLog:
        rows = data if isinstance(data, list) else []
        return cls([[int(row[0]), int(row[1])] for row in rows if isinstance(row, list) and len(row) == 2])

    def to_json(self) -> list[list[int]]:
        return [list(bucket) for bucket in self.buckets]

    def prune(self, now: datetime) -> None:
        """Forget what left the window: a submission made at ``t`` counts until ``t`` + 24 h."""
        edge = _epoch(now) - DAY_SECONDS
        self.buckets = [bucket for bucket in self.buckets if bucket[0] > edge]

    def used(self, now: datetime) -> int:
        """Submissions within the 24 hours before ``now``."""
        self.prune(now)
        return sum(count for _, count in self.buckets)

    def take(self, now: datetime) -> None:
        """One submission at ``now``."""
        epoch = _epoch(now)
        if self.buckets and self.buckets[-1][0] // MINUTE == epoch // MINUTE:
            self.buckets[-1] = [max(epoch, self.buckets[-1][0]), self.buckets[-1][1] + 1]
        else:
            self.buckets.append([epoch, 1])

    def refund(self, count: int) -> int:
        """Give back ``count`` submissions taken and never made (a run's unspent credits), newest first; returns how
        many were given back (never more than the window holds)."""
        given = 0
        while count > given and self.buckets:
            take = min(count - given, self.buckets[-1][1])
            given += take
            if take == self.buckets[-1][1]:
                self.buckets.pop()
            else:
                self.buckets[-1] = [self.buckets[-1][0], self.buckets[-1][1] - take]
        return given

    def free_at(self, now: datetime, allowed: int) -> datetime | None:
        """When fewer than ``allowed`` submissions are left in the window (None: now already)."""
        used = self.used(now)
        if used < allowed:
            return None
        for epoch, count in self.buckets:
            used -= count
            if used < allowed:
                return _moment(epoch + DAY_SECONDS)
        return now  # not reached: every bucket gone leaves 0 < allowed

    def view(self, now: datetime, allowed: int) -> JsonDict:
        """What the budget says about the quota in its answers: the allowance, used and left now, and (when none is
        left) when the next submission may be made."""
        used = self.used(now)
        until = self.free_at(now, allowed)
        return {
            "allowed": allowed,
            "used": used,
            "left": max(0, allowed - used),
            "until": iso(until) if until is not None else None,
        }


def quota_view(state: object, now: datetime, allowed: int) -> JsonDict:
    """The quota as an entity state read from outside shows it (the plan report, the doctor): ``view`` over the
    state's ``submissions``."""
    data = state.get("submissions") if isinstance(state, dict) else None
    return SubmissionLog.from_json(data).view(now, allowed)


def wait_until(quota_until: datetime, now: datetime, margin_seconds: float, poll_seconds: float) -> datetime:
    """When a lane answered "no quota until ``quota_until``" asks again: a margin after it (the entity's clock and
    the orchestration's may differ), and never sooner than a poll from now (so a clock behind cannot make a loop)."""
    return max(quota_until + timedelta(seconds=margin_seconds), now + timedelta(seconds=poll_seconds))
