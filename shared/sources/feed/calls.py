"""The feed's chunk activity, typed: its input (``FeedRead``), its result (``FeedReadResult``), the cursor a lane
carries from one call to the next (``FeedCursor``) and the evidence each content type leaves in the chunk's summary.

A feed chunk is read call by call: the first call fixes the chunk's publication window and makes sure each content
type is subscribed; every call then reads one listing piece of one content type (at most ``MAX_BLOBS`` blobs), written
as one part of the chunk's object; the last call commits the parts.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from shared.models import JsonDict, iso, parse_iso
from shared.window.calls import ChunkCall, CursorResult

ACTIVITY = "feed_read_activity"
"""The activity function's name (``activities.feed``)."""

CONTENT_TYPES = ("Audit.AzureActiveDirectory", "Audit.Exchange", "Audit.SharePoint", "Audit.General")
"""The content types a feed collection reads: every audit workload (``Audit.General`` is every workload without a type
of its own). ``DLP.All`` is not read: its events carry sensitive data only with ``ActivityFeed.ReadDlp``, and the
audit log's DLP records are not what a collection of the audit log asks for."""
PIECE = timedelta(hours=12)
"""The publication span one call lists (the adapter lists at most 12 hours at once)."""
MAX_BLOBS = 200
"""Blobs one call fetches at most; a piece with more is read over several calls."""
LISTING_MARGIN = timedelta(minutes=5)
"""The newest publications a read leaves to a later one: a blob may be listed a little after its ``contentCreated``."""
BEHIND_MARGIN = timedelta(hours=2)
"""How far behind its publication end the feed's newest record may be before a read calls the feed behind: the feed
publishes typically 60 to 90 minutes after a record happened (``shared.sources.feed.source.CANNOT_PROVE``)."""
LOOKBACK_MARGIN = timedelta(minutes=5)
"""How far inside the feed's 7 days a listing starts at the earliest (a listing sent a moment later is still inside)."""


@dataclass(frozen=True, slots=True)
class FeedRead:
    """One call of a lane's chunk: where it is (``cursor``: None for its first call), which part it writes, and the
    collection's feed options (``lag_seconds``, ``content_types``: ``RunOptions.source_options``)."""

    call: ChunkCall
    cursor: JsonDict | None
    number: int
    lag_seconds: float
    content_types: tuple[str, ...]

    def to_json(self) -> JsonDict:
        return {
            **self.call.to_json(),
            "cursor": self.cursor,
            "call": self.number,
            "feed": {"lagSeconds": self.lag_seconds, "contentTypes": list(self.content_types)},
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> FeedRead:
        cursor = data.get("cursor")
        options = data.get("feed") or {}
        return cls(
            ChunkCall.from_json(data),
            dict(cursor) if isinstance(cursor, dict) else None,
            int(data.get("call", 0)),
            float(options.get("lagSeconds", 0)),
            tuple(str(t) for t in options.get("contentTypes") or CONTENT_TYPES),
        )


class FeedReadResult(CursorResult):
    """Where the next call goes on (``cursor``), or the committed chunk (``summary``: its ``ChunkSummary`` JSON);
    ``stats``: what this call did (``Tally``), which the window adds up for the collection's status and manifest."""

    __slots__ = ()
    STATS_KEY = "feed"


@dataclass(slots=True)
class Tally:
    """What reads of the feed did: listing pieces read, blobs listed, fetched from the feed and read from the
    collector's content cache instead (an earlier window fetched them), records they held, records a blob repeated,
    blobs that had expired (with the first few ids), subscriptions the reads started."""

    calls: int = 0
    listed: int = 0
    fetched: int = 0
    records: int = 0
    repeats: int = 0
    expired: int = 0
    expired_ids: list[str] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    cached: int = 0
    newest: str = ""
    """When the newest record the reads fetched happened (ISO, "" for none): how far the feed has published."""

    def add(self, other: Tally) -> None:
        self.calls += other.calls
        self.listed += other.listed
        self.fetched += other.fetched
        self.records += other.records
        self.repeats += other.repeats
        self.expired += other.expired
        self.expired_ids = (self.expired_ids + [i for i in other.expired_ids if i not in self.expired_ids])[:5]
        self.started += [t for t in other.started if t not in self.started]
        self.cached += other.cached
        self.newest = max(self.newest, other.newest)

    def minus(self, before: Tally) -> Tally:
        """What was done since ``before`` (the counts; the lists as they are now)."""
        return Tally(
            self.calls - before.calls,
            self.listed - before.listed,
            self.fetched - before.fetched,
            self.records - before.records,
            self.repeats - before.repeats,
            self.expired - before.expired,
            list(self.expired_ids),
            [t for t in self.started if t not in before.started],
            self.cached - before.cached,
            self.newest,
        )

    def to_json(self) -> JsonDict:
        return {
            "calls": self.calls,
            "listed": self.listed,
            "fetched": self.fetched,
            "cached": self.cached,
            "records": self.records,
            "repeats": self.repeats,
            "expired": self.expired,
            "newest": self.newest,
            "expiredIds": list(self.expired_ids),
            "started": list(self.started),
        }

    @classmethod
    def from_json(cls, data: JsonDict | None) -> Tally:
        data = data or {}
        return cls(
            int(data.get("calls", 0)),
            int(data.get("listed", 0)),
            int(data.get("fetched", 0)),
            int(data.get("records", 0)),
            int(data.get("repeats", 0)),
            int(data.get("expired", 0)),
            [str(i) for i in data.get("expiredIds") or ()],
            [str(t) for t in data.get("started") or ()],
            int(data.get("cached", 0)),
            str(data.get("newest") or ""),
        )


@dataclass(slots=True)
class FeedCursor:
    """Where a lane is in its chunk's publication window: which content type (``index`` into ``types``), from which
    publication time (``position``) and how many blobs of that listing piece it read already (``skip``); the parts
    written so far, what each content type's reads did (``tallies``) and the facts of the first call (the window,
    subscriptions started by it, whether the feed's 7 days cut the window's start)."""

    published_from: datetime
    published_until: datetime
    types: tuple[str, ...]
    index: int = 0
    position: datetime | None = None
    skip: int = 0
    parts: list[str] = field(default_factory=list)
    tallies: dict[str, Tally] = field(default_factory=dict)
    started_at: dict[str, str] = field(default_factory=dict)
    """Content types whose subscription this chunk's first call started (content type -> when)."""
    cut_from: datetime | None = None
    """The window's start as asked, when the feed's 7 days made the read start later."""
    window_end: datetime | None = None
    """The chunk's end (None in a cursor written before it was carried: no check of the feed being behind)."""

    @property
    def done(self) -> bool:
        return self.index >= len(self.types)

    @property
    def total(self) -> Tally:
        total = Tally()
        for tally in self.tallies.values():
            total.add(tally)
        return total

    def piece(self) -> tuple[datetime, datetime]:
        """The publication span the next call lists."""
        start = self.position or self.published_from
        return start, min(start + PIECE, self.published_until)

    def advanced(self, read_all: bool, read: int, end: datetime) -> FeedCursor:
        """The cursor after a call that read ``read`` blobs of its piece (ending at ``end``): on to the next piece,
        or the next content type, or (``read_all`` false) on in the same piece."""
        if not read_all:
            return replace(self, skip=self.skip + read, parts=list(self.parts), tallies=dict(self.tallies))
        if end < self.published_until:
            return replace(self, position=end, skip=0, parts=list(self.parts), tallies=dict(self.tallies))
        return self.next_type()

    def next_type(self) -> FeedCursor:
        return replace(
            self, index=self.index + 1, position=None, skip=0, parts=list(self.parts), tallies=dict(self.tallies)
        )

    def skip_started(self) -> FeedCursor:
        """Past every content type whose subscription the first call started (the feed lists nothing before it)."""
        cursor = self
        while not cursor.done and cursor.types[cursor.index] in cursor.started_at:
            cursor = cursor.next_type()
        return cursor

    def evidence(self) -> list[JsonDict]:
        """Per content type, what the reads prove and what they cannot (the chunk summary's evidence)."""
        return [self._evidence(content_type) for content_type in self.types]

    def _evidence(self, content_type: str) -> JsonDict:
        tally = self.tallies.get(content_type, Tally())
        span = f"[{iso(self.published_from)}, {iso(self.published_until)})"
        reasons: list[str] = []
        started = self.started_at.get(content_type)
        if started is not None:
            reasons.append(
                f"the {content_type} subscription was not enabled and this read started it at {started}: the feed "
                "lists no content published before a subscription's start (read this window by search)"
            )
        if self.cut_from is not None:
            reasons.append(
                f"the feed lists content at most 7 days back: publications from {iso(self.cut_from)} to "
                f"{iso(self.published_from)} could not be listed (read this window by search)"
            )
        behind = self.behind()
        if behind is not None:
            reasons.append(behind)
        if tally.expired:
            reasons.append(
                f"{tally.expired} blob(s) had expired when fetched ({', '.join(tally.expired_ids)}): their records are "
                "no longer in the feed (read this window by search)"
            )
        entry: JsonDict = {
            "source": "feed",
            "contentType": content_type,
            "published": {"start": iso(self.published_from), "end": iso(self.published_until)},
            "listed": tally.listed,
            "fetched": tally.fetched,
            "cached": tally.cached,
            "records": tally.records,
            "repeats": tally.repeats,
            "expired": tally.expired,
            "newest": tally.newest or None,
            "subscriptionStarted": started,
            "complete": not reasons,
            "closedBy": "listing" if not reasons else "incomplete",
        }
        if reasons:
            entry["detail"] = "; ".join(reasons)
        else:
            entry["detail"] = (
                f"read every blob the feed listed as published in {span} (fetched, or from the collector's content "
                f"cache when an earlier read fetched it); records of this window published after "
                f"{iso(self.published_until)} are not in it (the feed publishes late: usually within hours, after "
                "an outage days later)"
            )
        return entry

    def behind(self) -> str | None:
        """Why the listing cannot show the feed has published past the window's end, or None when it can: the newest
        record of every content type read must have happened at or after the window's end, or, for a read within
        ``BEHIND_MARGIN`` of it, ``BEHIND_MARGIN`` before the publication end (where a feed on time is by then)."""
        if self.window_end is None or self.index < len(self.types):
            return None
        if any(self.started_at.get(t) for t in self.types) or self.cut_from is not None:
            return None  # incomplete for a reason of its own
        expected = min(self.window_end, self.published_until - BEHIND_MARGIN)
        newest = max((tally.newest for tally in self.tallies.values()), default="")
        if newest and parse_iso(newest) >= expected:
            return None
        shown = f"the newest record it had published happened at {newest}" if newest else "it had published no record"
        return (
            f"the feed is behind: by {iso(self.published_until)} {shown}, before {iso(expected)} (a feed on time "
            f"has published records up to the window's end {iso(self.window_end)}, or to {BEHIND_MARGIN} before "
            "the read): records of this window may not be published yet (read this window by search)"
        )

    @property
    def incomplete(self) -> bool:
        return any(not entry["complete"] for entry in self.evidence())

    def to_json(self) -> JsonDict:
        return {
            "publishedFrom": iso(self.published_from),
            "publishedUntil": iso(self.published_until),
            "types": list(self.types),
            "index": self.index,
            "position": iso(self.position) if self.position else None,
            "skip": self.skip,
            "parts": list(self.parts),
            "tallies": {t: tally.to_json() for t, tally in self.tallies.items()},
            "startedAt": dict(self.started_at),
            "cutFrom": iso(self.cut_from) if self.cut_from else None,
            "windowEnd": iso(self.window_end) if self.window_end else None,
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> FeedCursor:
        position, cut, window_end = data.get("position"), data.get("cutFrom"), data.get("windowEnd")
        return cls(
            published_from=parse_iso(data["publishedFrom"]),
            published_until=parse_iso(data["publishedUntil"]),
            types=tuple(str(t) for t in data.get("types") or ()),
            index=int(data.get("index", 0)),
            position=parse_iso(position) if position else None,
            skip=int(data.get("skip", 0)),
            parts=[str(p) for p in data.get("parts") or ()],
            tallies={str(t): Tally.from_json(v) for t, v in (data.get("tallies") or {}).items()},
            started_at={str(t): str(v) for t, v in (data.get("startedAt") or {}).items()},
            cut_from=parse_iso(cut) if cut else None,
            window_end=parse_iso(window_end) if window_end else None,
        )


def moment_text(moment: datetime) -> str:
    """A record's time as ``Tally.newest`` holds it: fixed width, so the later of two is the greater text."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def publication_window(
    chunk_start: datetime, chunk_end: datetime, lag_seconds: float, now: datetime, lookback: timedelta
) -> tuple[datetime, datetime, datetime | None]:
    """The publications a chunk's read lists: from the chunk's start (no record is published before it happened) to
    its end plus the lag the collection allows for late publication, at most ``now`` less ``LISTING_MARGIN``, in
    whole seconds; a start older than the feed keeps (``lookback``) is moved up, and the start asked is returned as
    the third value."""
    latest = (now - LISTING_MARGIN).astimezone(UTC).replace(microsecond=0)
    until = min(chunk_end + timedelta(seconds=lag_seconds), latest)
    oldest = now - lookback + LOOKBACK_MARGIN
    oldest = oldest.astimezone(UTC).replace(microsecond=0) + timedelta(seconds=1)
    start = chunk_start
    cut = None
    if start < oldest:
        start, cut = oldest, chunk_start
    return start, max(start, until), cut


def tally_of(evidence: list[JsonDict] | tuple[JsonDict, ...], calls: int) -> Tally:
    """What a chunk's reads did, as its committed summary's evidence says it (``calls``: how many to count)."""
    total = Tally(calls=calls)
    for entry in evidence:
        if entry.get("source") != "feed":
            continue
        total.listed += int(entry.get("listed", 0))
        total.fetched += int(entry.get("fetched", 0))
        total.cached += int(entry.get("cached", 0))
        total.records += int(entry.get("records", 0))
        total.repeats += int(entry.get("repeats", 0))
        total.expired += int(entry.get("expired", 0))
        total.newest = max(total.newest, str(entry.get("newest") or ""))
        if entry.get("subscriptionStarted"):
            total.started.append(str(entry.get("contentType")))
    return total
