"""The tenant's daily Graph audit query submissions: at most ``GraphSettings.daily_submission_quota`` queries created
per tenant in any rolling 24 hours of the emulator's clock; a create beyond it is answered 429.

Microsoft Graph documents the limit (learn.microsoft.com/graph/throttling-limits, "Security audit log query service
limits": a per-tenant baseline of at least 200 query submissions per rolling 24 hours, shared by every app of the
tenant) but not the answer past it beyond Graph's general throttling contract: "429 Too Many Requests", with a
``Retry-After`` header that a client should honour when it is there and an exponential back-off when it is not. So by
default the emulator answers the least convenient plausible way: a 429 ``TooManyRequests`` with a generic message and
**no** ``Retry-After`` (a client cannot tell it from any other throttling, nor when the quota frees: the oldest
submission leaves the window a day after it was made). ``daily_quota_retry_after_seconds`` > 0 adds the header.

What counts is a query created (a create refused for another reason, such as the limit of queries running at once,
creates nothing and counts nothing); the real service's rule for refused or failed creates is not public. Counted on
the emulator's clock, so a test that moves the clock moves the window. ``peak`` and ``refused`` are the emulator's
own figures, for tests that check a client never exceeded the quota.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Callable

from m365_emulator.config import GraphSettings
from m365_emulator.wire import Reply, Request, api_error

WINDOW_SECONDS = 86_400.0
QUOTA_MESSAGE = "Too many requests. Please retry later."
"""What the service's message says is not public; Graph's generic throttling text names no limit."""


class DailySubmissionQuota:
    """Created queries per tenant over the last 24 hours of ``now`` (epoch seconds); creates run through ``gate``."""

    def __init__(self, settings: GraphSettings, now: Callable[[], float], created: Callable[[str], int]) -> None:
        self.settings = settings
        self._now = now
        self._created = created
        self._lock = threading.Lock()
        self._recent: dict[str, list[float]] = defaultdict(list)
        self.submitted: dict[str, list[float]] = defaultdict(list)
        """Every counted submission's time, per tenant (the emulator's record, for tests)."""
        self.peak: Counter[str] = Counter()
        """The most submissions of a tenant within 24 hours at any create."""
        self.refused: Counter[str] = Counter()
        """Creates answered 429 because the tenant's quota was spent."""

    def used(self, tenant_id: str) -> int:
        with self._lock:
            return len(self._pruned(tenant_id, self._now()))

    def most_in_any_day(self, tenant_id: str) -> int:
        """The most submissions of the tenant within any 24 hours so far (from the record)."""
        times = sorted(self.submitted[tenant_id])
        return max((sum(1 for t in times if start <= t < start + WINDOW_SECONDS) for start in times), default=0)

    def gate(self, tenant_id: str, request: Request, create: Callable[[], Reply]) -> Reply:
        """Refuse the create when the tenant's quota is spent, else run it and count it if it created a query."""
        limit = self.settings.daily_submission_quota
        if limit <= 0:
            return create()
        with self._lock:  # check, create and count as one step: parallel creates cannot overshoot the quota
            now = self._now()
            recent = self._pruned(tenant_id, now)
            if len(recent) >= limit:
                self.refused[tenant_id] += 1
                retry = self.settings.daily_quota_retry_after_seconds or None
                return api_error(429, "TooManyRequests", QUOTA_MESSAGE, retry_after=retry, request=request)
            before = self._created(tenant_id)
            reply = create()
            if self._created(tenant_id) > before:
                recent.append(now)
                self.submitted[tenant_id].append(now)
                self.peak[tenant_id] = max(self.peak[tenant_id], len(recent))
            return reply

    def _pruned(self, tenant_id: str, now: float) -> list[float]:
        recent = [t for t in self._recent[tenant_id] if t > now - WINDOW_SECONDS]
        self._recent[tenant_id] = recent
        return recent
