"""A feed chunk as a chain of short activities: each reads one listing piece of one content type (at most
``MAX_BLOBS`` blobs), written as one part of the chunk's object (``activities.chunk_parts``: records kept once by id
across parts, trimmed to the window and the request's filters); the last commits the parts with each content type's
evidence.

* **The first call** fixes the chunk's publication window (``shared.sources.feed.calls.publication_window``: from the
  window's start to its end plus the collection's lag, at most a few minutes ago, inside the feed's 7 days) and makes
  sure every content type is subscribed: a subscription it has to start lists no earlier content, so that content type
  is not read and its evidence says why (the window is incomplete: search reads it).
* **Every call** lists its piece (all listing pages: the adapter follows ``NextPageUri``), sorts the blobs by
  publication and id, skips those earlier calls read, fetches the rest up to the cap and keeps each record once
  (the feed repeats records across blobs by design). A blob that expired is counted and named, never fatal.
* **A call run twice** (its worker died after the work) finds its part's record and returns the recorded outcome.
* **Throttling**: the adapter retries the feed's ``AF429`` (a 403) with its back-off; one that outlasts it comes back
  as the window's "throttled (429)", which waits without spending an attempt.

Every result carries ``feed``: what this call did (``Tally``), which the window adds up for the collection.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from datetime import datetime

from activities.chunk_parts import ChunkParts, PartRecord, part_key
from activities.feed_cache import FeedCache
from shared.audit.error_body import THROTTLED
from shared.audit.feed_errors import FeedContentExpiredError
from shared.audit.feed_paging import LOOKBACK
from shared.audit.ports import ActivityFeedApi, AuditRecord, RecordPage, TimeWindow
from shared.budget.slot_deadline import SlotDeadline
from shared.errors import TransientApiError
from shared.models import ActivityResult, iso, parse_iso
from shared.sources.feed.calls import (
    MAX_BLOBS,
    FeedCursor,
    FeedRead,
    FeedReadResult,
    Tally,
    moment_text,
    publication_window,
    tally_of,
)

THROTTLING_CODE = "AF429"


def feed_read(
    api: ActivityFeedApi,
    parts: ChunkParts,
    read: FeedRead,
    now: Callable[[], datetime],
    cache: FeedCache | None = None,
) -> ActivityResult:
    """One call of the lane's chunk: where the next goes on (``cursor``), or the ``summary`` once committed;
    ``cache``: the tenant's content cache (``activities.feed_cache``), None to fetch every blob listed."""
    base = read.call
    cursor = FeedCursor.from_json(read.cursor) if read.cursor is not None else None
    before = cursor.total if cursor is not None else Tally()
    key = part_key(read.number)
    record = parts.load(key)
    earlier = cursor.parts if cursor is not None else []
    if record is None and (done := parts.committed([*earlier, key])) is not None:
        # It was the last call, and it committed: what it did is the summary's evidence less what came before.
        spent = tally_of(done.evidence, calls=before.calls + 1).minus(before)
        return ActivityResult.success(FeedReadResult(summary=done.to_json(), stats=spent.to_json()).to_json())
    if record is None:
        deadline = SlotDeadline.of(base.slot_json)
        deadline.check("the read")  # the lane's budget slot must still be held
        try:
            with deadline.guarding(every_request=True):  # ...and still be, right before each request
                if cursor is None:
                    cursor = _first(api, read, now())
                    if cache is not None:
                        cache.prune(now())
                record = _read(api, parts, key, cursor.skip_started(), cache)
        except TransientApiError as exc:
            raise _throttled(exc) from None
    after = FeedCursor.from_json(record.outcome)
    spent = after.total.minus(before)
    if not after.done:
        return ActivityResult.success(FeedReadResult(cursor=after.to_json(), stats=spent.to_json()).to_json())
    summary = parts.commit(after.parts, attempt=base.attempt, incomplete=after.incomplete, evidence=after.evidence())
    return ActivityResult.success(FeedReadResult(summary=summary.to_json(), stats=spent.to_json()).to_json())


def _first(api: ActivityFeedApi, read: FeedRead, now: datetime) -> FeedCursor:
    """The chunk's publication window, and its content types subscribed (those this starts are not read)."""
    chunk = read.call.chunk
    start, until, cut = publication_window(chunk.start, chunk.end, read.lag_seconds, now, LOOKBACK)
    current = {s.content_type: s for s in api.list_subscriptions()}
    missing = [t for t in read.content_types if t not in current or not current[t].enabled]
    if missing:
        api.ensure_subscriptions(read.content_types)  # raises FeedSubscriptionError when one cannot be started
    cursor = FeedCursor(start, until, read.content_types, cut_from=cut, window_end=chunk.end)
    cursor.started_at = {t: iso(now) for t in missing}
    cursor.tallies = {t: Tally(started=[t]) for t in missing}
    if start >= until:  # nothing was published in the window yet (it ended minutes ago): nothing to list
        cursor.index = len(cursor.types)
    return cursor


def _read(api: ActivityFeedApi, parts: ChunkParts, key: str, cursor: FeedCursor, cache: FeedCache | None) -> PartRecord:
    """Read the cursor's next piece into part ``key`` (an empty part when every content type is done): a listed blob
    from the cache when an earlier read fetched it, else from the feed (then cached)."""
    tally = Tally(calls=1)
    progress = {"read": 0, "all": True}
    content_type = cursor.types[cursor.index] if not cursor.done else ""
    start, end = cursor.piece() if not cursor.done else (cursor.published_until, cursor.published_until)

    def pages() -> Iterator[RecordPage]:
        if cursor.done or start >= end:
            return
        listed = sorted(api.list_content(content_type, TimeWindow(start, end)), key=lambda c: (c.created, c.content_id))
        if cursor.skip == 0:
            tally.listed += len(listed)
        todo = listed[cursor.skip : cursor.skip + MAX_BLOBS]
        progress["all"] = cursor.skip + len(todo) >= len(listed)
        seen: set[str] = set()
        for content in todo:
            try:
                page, hit = cache.read(content, api.fetch) if cache is not None else (api.fetch(content), False)
            except FeedContentExpiredError:
                tally.expired += 1
                tally.expired_ids.append(content.content_id)
                continue
            if hit:
                tally.cached += 1
            else:
                tally.fetched += 1
            yield _first_seen(page, seen, tally)
        progress["read"] = len(todo)

    def outcome(repeats: int) -> dict[str, object]:
        tally.repeats += repeats
        if cursor.done:  # nothing left to list (the call commits): its count goes to the last content type
            after = dataclasses.replace(cursor, parts=[*cursor.parts, key], tallies=dict(cursor.tallies))
            counted = cursor.types[-1] if cursor.types else ""
        else:
            after = cursor.advanced(bool(progress["all"]), int(progress["read"]), end)
            after.parts = [*cursor.parts, key]
            counted = content_type
        mine = Tally()
        mine.add(cursor.tallies.get(counted, Tally()))
        mine.add(tally)
        after.tallies = {**cursor.tallies, counted: mine}
        return after.to_json()

    return parts.write(key, pages(), cursor.parts, outcome)


def _first_seen(page: RecordPage, seen: set[str], tally: Tally) -> RecordPage:
    """The page's records this call has not seen (a blob repeats records of others: the feed does not de-duplicate)."""
    records: list[AuditRecord] = []
    times: list[datetime] | None = [] if page.times is not None else None
    for index, record in enumerate(page.records):
        record_id = str(record.get("id"))
        if record_id in seen:
            tally.repeats += 1
            continue
        seen.add(record_id)
        records.append(record)
        if times is not None and page.times is not None:
            times.append(page.times[index])
    tally.records += len(records)
    happened = page.times if page.times is not None else [_time_of(r) for r in page.records]
    newest = max((t for t in happened if t is not None), default=None)
    if newest is not None:
        tally.newest = max(tally.newest, moment_text(newest))
    return RecordPage(records, page.malformed, times)


def _time_of(record: AuditRecord) -> datetime | None:
    try:
        return parse_iso(str(record.get("createdDateTime")))
    except ValueError:
        return None


def _throttled(exc: TransientApiError) -> TransientApiError:
    """The feed's throttling (``AF429``, answered as a 403) outlasting the adapter's retries: the service is busy, so
    the window waits without spending an attempt, as for a 429."""
    if THROTTLING_CODE in str(exc) and not str(exc).startswith(THROTTLED):
        return TransientApiError(f"{THROTTLED}: {exc}", status=429, retry_after=exc.retry_after)
    return exc
