"""The orchestration dispatcher's ``ExecutionCache`` per instance (``durable_local.replay.execution_cache``).

An entry is what the instance's last episode on *this* worker left, together with the history ETag its checkpoint
received and the number of events that history holds. The next episode gets it only when the history it loaded
carries that very ETag (every history write makes a new one, ``tracking_rules.new_etag``) and that many events:
the history is then exactly what this worker wrote, so the cached texts are those of its events. Anything else
(another worker wrote since, continue-as-new by someone else, a purge and a new start, a history loaded before the
checkpoint) is a miss, and the episode encodes everything as if there were no cache.

An entry is taken out before the episode runs and put back only after its checkpoint succeeded, so an episode that
fails, is abandoned, loses its session or dies half-way leaves none behind; a worker killed (or restarted) starts
empty, since the cache lives only in its memory. Entries are per instance id and never shared between workers. The
least recently used entries go when the texts of all of them exceed ``max_chars``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from durable_local.replay.execution_cache import ExecutionCache

DEFAULT_MAX_CHARS = 16 * 1024 * 1024
"""Characters of cached history text kept per worker (the JSON size of the histories it caches; their events, kept
to check the next history against, take a few times that)."""


@dataclass(frozen=True, slots=True)
class _Entry:
    etag: str
    history_length: int
    cache: ExecutionCache


class EpisodeCaches:
    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        self._max_chars = max_chars
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._chars = 0

    def take(
        self, instance_id: str, *, etag: str | None, execution_id: str | None, history_length: int
    ) -> ExecutionCache | None:
        """The instance's cache if its loaded history is the one this worker's last checkpoint wrote; the entry is
        removed either way (``keep`` puts the next one back after a successful checkpoint)."""
        with self._lock:
            entry = self._entries.pop(instance_id, None)
            if entry is None:
                return None
            self._chars -= entry.cache.chars
        if etag is None or entry.etag != etag or entry.history_length != history_length:
            return None
        if execution_id is None or entry.cache.execution_id != execution_id:
            return None
        return entry.cache

    def keep(self, instance_id: str, *, etag: str | None, history_length: int, cache: ExecutionCache) -> None:
        """Keep ``cache`` for the instance's next episode, valid while its history carries ``etag``."""
        if etag is None or cache.instance_id != instance_id or cache.chars > self._max_chars:
            return
        with self._lock:
            old = self._entries.pop(instance_id, None)
            if old is not None:
                self._chars -= old.cache.chars
            self._entries[instance_id] = _Entry(etag, history_length, cache)
            self._chars += cache.chars
            while self._chars > self._max_chars and self._entries:
                _, evicted = self._entries.popitem(last=False)
                self._chars -= evicted.cache.chars

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
