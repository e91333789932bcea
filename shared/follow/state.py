"""What a follower is (``FollowSpec``, fixed when it starts) and what it carries from cycle to cycle (``FollowState``).

A follower keeps one tenant's audit log (one source, one set of filters) flowing into its output: every ``every``
it collects the windows of ``interval`` that have closed at least ``delay`` ago, and reads each window again once
its late-arrival band (``AUDIT_LATENCY``) has passed. Its output is one collection prefix per day,
``<tenant>/<followId>-<yyyymmdd>/``, each with the manifest of a collection over that day (``day_collection_id``).

Both are plain JSON in the orchestration input, carried through ``continue_as_new`` after every cycle, so a
follower's history holds one cycle and its state stays bounded: the windows still provisional (a day and a half of
them at most), the windows still failed, and a few counters.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from shared.models import Chunk, JsonDict, iso, parse_iso
from shared.requests.run_options import RunOptions

DAY = timedelta(days=1)
FOLLOW_PREFIX = "follow-"
"""Follower ids, and so their day collections, start with this; a collection request may not take such an id."""


def follow_id(tenant_id: str, source: str, filters: JsonDict) -> str:
    """One follower per (tenant, source, filters): its id is a digest of them (filters in a canonical form). The
    follows API passes the tenant's GUID, so every spelling of one tenant names one follower."""
    canonical = {key: sorted(value) if isinstance(value, list) else value for key, value in filters.items()}
    key = json.dumps([tenant_id, source, canonical], sort_keys=True, separators=(",", ":"))
    return f"{FOLLOW_PREFIX}{source}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def day_collection_id(follow: str, day: date) -> str:
    """The collection (output prefix and manifest) that holds a follower's windows of one UTC day."""
    return f"{follow}-{day:%Y%m%d}"


def day_of(moment: datetime) -> date:
    return moment.astimezone(UTC).date()


def day_start(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class FeedUse:
    """How a follower reads the feed (the Management Activity API), fixed when it starts: it reads every window the
    feed can cover there, and the rest by its search source (``FollowSpec.source``)."""

    source: str
    """The feed source's name (``shared.sources.registry.follow_feed``)."""
    options: RunOptions
    """The feed passes' options (its lag, its content types, its tenant budget)."""
    reach: timedelta
    """How far back the feed lists content (7 days less a margin): an older window is read by search."""
    since: datetime | None
    """When the follower's start found a subscription not enabled and started it: the feed lists nothing published
    before, so a window that began earlier is read by search (None: every subscription was enabled already)."""
    why: str
    """Why the follower reads the feed (what its start found)."""
    reconcile_every: timedelta | None = None
    """How often one window the feed read for the last time is read again by search (None: never)."""
    reconcile_source: str = ""
    reconcile_options: RunOptions | None = None

    def to_json(self) -> JsonDict:
        return {
            "source": self.source,
            "options": self.options.to_json(),
            "reachSeconds": self.reach.total_seconds(),
            "since": iso(self.since) if self.since else None,
            "why": self.why,
            "reconcileEverySeconds": self.reconcile_every.total_seconds() if self.reconcile_every else None,
            "reconcileSource": self.reconcile_source,
            "reconcileOptions": self.reconcile_options.to_json() if self.reconcile_options else None,
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> FeedUse:
        since, every, options = data.get("since"), data.get("reconcileEverySeconds"), data.get("reconcileOptions")
        return cls(
            source=str(data["source"]),
            options=RunOptions.from_json(data.get("options") or {}),
            reach=timedelta(seconds=float(data["reachSeconds"])),
            since=parse_iso(since) if isinstance(since, str) else None,
            why=str(data.get("why") or ""),
            reconcile_every=timedelta(seconds=float(every)) if every else None,
            reconcile_source=str(data.get("reconcileSource") or ""),
            reconcile_options=RunOptions.from_json(options) if isinstance(options, dict) else None,
        )


@dataclass(frozen=True, slots=True)
class FollowSpec:
    """What to follow and how; fixed when the follower starts."""

    follow_id: str
    tenant_id: str
    source: str
    filters: JsonDict
    options: RunOptions
    """The options of every collection pass (K, polling, retries, the tenant budget)."""
    start: datetime
    """Where coverage begins (aligned to ``interval`` within its day)."""
    interval: timedelta
    """The size of a window; it divides a day, so no window crosses midnight."""
    every: timedelta
    """How often the follower wakes."""
    delay: timedelta
    """A window is read first once it closed this long ago (the service's usual delay)."""
    tenant_guid: str | None = None
    """The tenant's GUID (resolved by the follows API): its passes' budget is keyed by it, as a collection's is."""
    feed: FeedUse | None = None
    """The feed it reads where it can (None: it reads every window by search, ``reads_why`` says why)."""
    reads_why: str = ""

    def options_of(self, source: str) -> RunOptions:
        """The options of a pass of ``source`` (its search source's, the feed's, or the reconcile's)."""
        if self.feed is not None and source == self.feed.source:
            return self.feed.options
        if self.feed is not None and source == self.feed.reconcile_source and self.feed.reconcile_options:
            return self.feed.reconcile_options
        return self.options

    def reads(self) -> JsonDict:
        """Which source it reads its windows from and why (its status's ``reads``)."""
        if self.feed is None:
            return {"source": self.source, "search": self.source, "why": self.reads_why or "feed not asked"}
        every = self.feed.reconcile_every
        return {
            "source": self.feed.source,
            "search": self.source,
            "why": self.feed.why,
            "feedSince": iso(self.feed.since) if self.feed.since else None,
            "feedReachDays": self.feed.reach.total_seconds() / 86400,
            "reconcile": {"everyHours": every.total_seconds() / 3600, "source": self.feed.reconcile_source}
            if every
            else None,
        }

    def to_json(self) -> JsonDict:
        guid = {"tenantGuid": self.tenant_guid} if self.tenant_guid else {}
        feed = {"feed": self.feed.to_json()} if self.feed is not None else {}
        why = {"readsWhy": self.reads_why} if self.reads_why else {}
        return {
            **guid,
            **feed,
            **why,
            "followId": self.follow_id,
            "tenantId": self.tenant_id,
            "source": self.source,
            "filters": self.filters,
            "options": self.options.to_json(),
            "start": iso(self.start),
            "intervalSeconds": self.interval.total_seconds(),
            "everySeconds": self.every.total_seconds(),
            "delaySeconds": self.delay.total_seconds(),
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> FollowSpec:
        return cls(
            follow_id=str(data["followId"]),
            tenant_id=str(data["tenantId"]),
            source=str(data["source"]),
            filters=dict(data.get("filters") or {}),
            options=RunOptions.from_json(data.get("options") or {}),
            start=parse_iso(data["start"]),
            interval=timedelta(seconds=float(data["intervalSeconds"])),
            every=timedelta(seconds=float(data["everySeconds"])),
            delay=timedelta(seconds=float(data["delaySeconds"])),
            tenant_guid=data.get("tenantGuid"),
            feed=FeedUse.from_json(data["feed"]) if isinstance(data.get("feed"), dict) else None,
            reads_why=str(data.get("readsWhy") or ""),
        )


@dataclass(slots=True)
class WindowFailure:
    """A window no pass has collected yet: retried on a back-off, never dropped (a gap would be silent)."""

    chunk: Chunk
    kind: str
    message: str
    attempts: int
    retry_at: datetime

    def to_json(self) -> JsonDict:
        return {
            "chunk": self.chunk.to_json(),
            "kind": self.kind,
            "message": self.message,
            "attempts": self.attempts,
            "retryAt": iso(self.retry_at),
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> WindowFailure:
        return cls(
            Chunk.from_json(data["chunk"]),
            str(data["kind"]),
            str(data["message"]),
            int(data["attempts"]),
            parse_iso(data["retryAt"]),
        )

    def manifest_json(self) -> JsonDict:
        """As a collection's manifest lists a failure."""
        return {"chunk": self.chunk.to_json(), "kind": self.kind, "message": self.message, "attempts": self.attempts}


@dataclass(slots=True)
class FollowState:
    """What a follower carries from one cycle to the next (continue-as-new input)."""

    covered_until: datetime
    """Every window before this was collected at least once or is listed in ``failures``."""
    provisional: list[Chunk] = field(default_factory=list)
    """Windows (as written: a split window's halves) whose every read so far came before their band passed."""
    failures: list[WindowFailure] = field(default_factory=list)
    paused: JsonDict | None = None
    """Why the service refused the last pass (auditing off, a permission removed), and since when."""
    last_error: JsonDict | None = None
    passes: int = 0
    """Collection passes started so far (each pass's instance id carries its number)."""
    cycles: int = 0
    next_wake: datetime | None = None
    stopped: bool = False
    backfill: list[Chunk] = field(default_factory=list)
    """Windows the feed read but could not prove whole (a subscription it started, content expired, the look-back
    cut): read by search from then on, until their day is final."""
    sampled: dict[str, list[Chunk]] = field(default_factory=dict)
    """Per day (ISO date) not final yet, the windows the reconcile read again by search after the feed's last read."""
    backfill_due: list[Chunk] = field(default_factory=list)
    """Of ``backfill``, the windows search has not read yet (the next cycle does)."""
    reconciled_at: datetime | None = None
    """When the reconcile last sampled a window."""
    reconciles: int = 0

    def to_json(self) -> JsonDict:
        extra: JsonDict = {}
        if self.backfill or self.sampled or self.reconciles:
            extra = {
                "backfill": [c.to_json() for c in self.backfill],
                "backfillDue": [c.to_json() for c in self.backfill_due],
                "sampled": {day: [c.to_json() for c in chunks] for day, chunks in self.sampled.items()},
                "reconciledAt": iso(self.reconciled_at) if self.reconciled_at else None,
                "reconciles": self.reconciles,
            }
        return {
            **extra,
            "coveredUntil": iso(self.covered_until),
            "provisional": [c.to_json() for c in self.provisional],
            "failures": [f.to_json() for f in self.failures],
            "paused": self.paused,
            "lastError": self.last_error,
            "passes": self.passes,
            "cycles": self.cycles,
            "nextWake": iso(self.next_wake) if self.next_wake else None,
            "stopped": self.stopped,
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> FollowState:
        wake = data.get("nextWake")
        return cls(
            covered_until=parse_iso(data["coveredUntil"]),
            provisional=[Chunk.from_json(c) for c in data.get("provisional") or ()],
            failures=[WindowFailure.from_json(f) for f in data.get("failures") or ()],
            paused=data.get("paused"),
            last_error=data.get("lastError"),
            passes=int(data.get("passes", 0)),
            cycles=int(data.get("cycles", 0)),
            next_wake=parse_iso(wake) if isinstance(wake, str) else None,
            stopped=bool(data.get("stopped", False)),
            backfill=[Chunk.from_json(c) for c in data.get("backfill") or ()],
            backfill_due=[Chunk.from_json(c) for c in data.get("backfillDue") or ()],
            sampled={str(d): [Chunk.from_json(c) for c in cs] for d, cs in (data.get("sampled") or {}).items()},
            reconciled_at=parse_iso(data["reconciledAt"]) if isinstance(data.get("reconciledAt"), str) else None,
            reconciles=int(data.get("reconciles", 0)),
        )
