"""The feed's content cache: each content blob fetched from the Management Activity API once, however many windows list
it.

A feed window lists the blobs published from its start to its end plus the collection's lag, so a blob is listed by
every window whose publication range covers it (a follower's 4-hour windows read each blob about 7 times in steady
state, about 13 times catching up with the default 48-hour lag), and each listing used to fetch it again against the
tenant's 2,000 feed requests a minute, which the tenant's SIEM connectors share. A blob never changes once published
(its ``contentId`` names it), so its records, as the adapter normalised them, are kept in the collector's own store
(the output sink: Blob Storage in Azure, a folder locally) the first time one window fetches it; every later window
still lists the feed itself (its evidence is its own listing, as before) and reads a blob it lists from the cache.

Names: ``_feed-cache/{tenant}/{YYYYMMDD of contentCreated}/{content type}/{sha256 of contentId}.json``: every component
validated or hashed (a contentId holds ``$`` and is the service's text), the leading underscore keeps it apart from
every tenant's folder (``shared.names.tenant_component`` never starts with one).

Pruning: a listing reaches at most 7 days back (``LOOKBACK``), so an entry created before that is never read again; the
first call of a chunk prunes the tenant's days older than the look-back plus a day of slack, at most once a day (a
marker object remembers the day), so it works the same locally and in Azure without a lifecycle policy.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from shared import names
from shared.audit.feed_paging import LOOKBACK
from shared.audit.ports import FeedContent, RecordPage
from shared.sinks.base import ChunkSink, check_object_name, write_bytes
from shared.values import MalformedRecord

logger = logging.getLogger(__name__)

ROOT = "_feed-cache"
KEEP = LOOKBACK + timedelta(days=1)
"""Entries whose blob was created longer ago than this are pruned (no listing reaches them any more)."""
MARKER = "pruned"
FORMAT = 1

_GUARD = threading.Lock()
_FETCHING: dict[str, tuple[threading.Lock, int]] = {}
"""Blobs a lane of this worker is fetching now (name -> its lock, how many wait on it): concurrent lanes whose windows
overlap reach the same blobs (a lane reading from the cache catches up with one fetching), and the second waits for
the first's entry instead of fetching the blob again. Lanes on other workers may still fetch a blob twice."""


class FeedCache:
    """The cached blobs of one tenant in ``sink``."""

    def __init__(self, sink: ChunkSink, tenant_id: str) -> None:
        self._sink = sink
        self._prefix = f"{ROOT}/{names.tenant_component(tenant_id)}/"

    def name(self, content: FeedContent) -> str:
        digest = hashlib.sha256(content.content_id.encode("utf-8")).hexdigest()
        return check_object_name(f"{self._prefix}{content.created:%Y%m%d}/{content.content_type}/{digest}.json")

    def get(self, content: FeedContent) -> RecordPage | None:
        """The blob's records as first fetched, or None (not cached, or an entry this code cannot read)."""
        data = self._sink.read_bytes(self.name(content))
        if data is None:
            return None
        try:
            return _page_from(json.loads(data), content.content_id)
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("feed cache entry of %s unreadable (%s): fetched again", content.content_id, exc)
            return None

    def read(self, content: FeedContent, fetch: Callable[[FeedContent], RecordPage]) -> tuple[RecordPage, bool]:
        """The blob's records and whether they came from the cache: else ``fetch`` gets them (its errors raised, the
        blob not cached), and they are cached. One fetch at a time per blob in this worker."""
        with self._fetching(self.name(content)):
            page = self.get(content)
            if page is not None:
                return page, True
            page = fetch(content)
            self.put(content, page)
            return page, False

    @staticmethod
    @contextmanager
    def _fetching(name: str) -> Iterator[None]:
        with _GUARD:
            lock, waiting = _FETCHING.get(name) or (threading.Lock(), 0)
            _FETCHING[name] = (lock, waiting + 1)
        try:
            with lock:
                yield
        finally:
            with _GUARD:
                lock, waiting = _FETCHING[name]
                if waiting <= 1:
                    del _FETCHING[name]
                else:
                    _FETCHING[name] = (lock, waiting - 1)

    def put(self, content: FeedContent, page: RecordPage) -> None:
        body = {"format": FORMAT, "contentId": content.content_id, **_page_json(page)}
        write_bytes(self._sink, self.name(content), json.dumps(body, separators=(",", ":")).encode("utf-8"))

    def prune(self, now: datetime) -> int:
        """Delete the entries of days older than ``KEEP``, once a day; how many it deleted."""
        today = f"{now:%Y%m%d}"
        marker = check_object_name(self._prefix + MARKER)
        if (self._sink.read_bytes(marker) or b"").decode("utf-8", "replace") == today:
            return 0
        oldest = f"{now - KEEP:%Y%m%d}"
        deleted = 0
        for name in self._sink.list_names(self._prefix):
            day = name[len(self._prefix) :].split("/", 1)[0]
            if len(day) == 8 and day.isdigit() and day < oldest:
                self._sink.delete(name)
                deleted += 1
        write_bytes(self._sink, marker, today.encode("utf-8"))
        if deleted:
            logger.info("feed cache: pruned %d blob(s) created before %s", deleted, oldest)
        return deleted


def _page_json(page: RecordPage) -> dict[str, object]:
    return {
        "records": page.records,
        "malformed": [
            {
                "raw": m.raw,
                "reason": m.reason,
                "id": m.record_id,
                "created": m.created.isoformat() if m.created else None,
            }
            for m in page.malformed
        ],
        "times": [t.isoformat() for t in page.times] if page.times is not None else None,
    }


def _page_from(body: dict[str, object], content_id: str) -> RecordPage:
    if body.get("format") != FORMAT or body.get("contentId") != content_id:
        raise ValueError("another format or another blob")
    records = body["records"]
    malformed = body["malformed"]
    times = body["times"]
    if not isinstance(records, list) or not isinstance(malformed, list):
        raise TypeError("records and malformed must be arrays")
    return RecordPage(
        [dict(r) for r in records],
        [
            MalformedRecord(
                str(m["raw"]),
                str(m["reason"]),
                m["id"],
                datetime.fromisoformat(m["created"]) if m["created"] else None,
            )
            for m in malformed
        ],
        [datetime.fromisoformat(t) for t in times] if isinstance(times, list) else None,
    )
