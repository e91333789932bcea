"""An exact set of record ids that takes a page of new ids in a few C-level passes: 16 bytes a GUID, in hashed buckets.

A lower-case GUID id (``shared.records.id_set.guid_key``) is kept as its 16-byte number, appended to one of many
small ``bytes`` buckets chosen by the hash of those bytes; a bucket is searched with ``bytes.find`` (a match counts
only at a multiple of 16). Any other id is kept as its text in a ``set``. Membership is exact either way.

A page of ids (:meth:`IdBuckets.add_many`) is checked over the whole page at once: every text turned into its 16 bytes
(``page_bytes``), every bucket chosen and searched by ``map`` over the page, and only when no id of the page is a
member yet and none repeats in it (the usual case) does a plain loop append each id to its bucket. Anything else goes
id by id, with the same result.

Memory: 16 bytes an id plus each bucket's ``bytes`` header and list slot, shared by 4 to 16 ids (the table grows
four-fold past 16 ids a bucket): about 20 to 30 bytes an id (``bench/record_path.py`` measures it with
``tracemalloc``), against about 42 for ``IdSet`` and 127 for a ``set`` of id strings. An ``IdBuckets`` may also take
over an existing ``set`` of id strings as it is (``frozen``), without re-adding them: a reader that kept its first
ids in a ``set`` moves on without paying for them twice.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from itertools import repeat
from operator import and_

from shared.records.id_set import guid_key, page_bytes

_SPLIT = re.compile(rb".{16}", re.DOTALL).findall
"""16-byte keys one after the other → a list of them."""
_GROW_AT = 16
"""Ids per bucket on average past which the table grows."""
_GROWTH = 4


def _key(record_id: str) -> bytes | None:
    key = guid_key(record_id)
    return None if key is None else key.to_bytes(16, "big")


class IdBuckets:
    """An exact set of id strings (see the module docstring). Not thread-safe: one reader owns it."""

    def __init__(self, frozen: set[str] | None = None, *, bits: int = 12) -> None:
        self._frozen: set[str] = frozen if frozen is not None else set()
        """Ids taken over as they were (never added to or removed from here)."""
        self._buckets: list[bytes] = [b""] * (1 << bits)
        self._mask = (1 << bits) - 1
        self._guids = 0
        self._texts: set[str] = set()

    def __len__(self) -> int:
        return len(self._frozen) + self._guids + len(self._texts)

    def __contains__(self, record_id: object) -> bool:
        if not isinstance(record_id, str):
            return False
        if record_id in self._frozen:
            return True
        key = _key(record_id)
        return record_id in self._texts if key is None else self._has(key)

    def _has(self, key: bytes) -> bool:
        bucket = self._buckets[hash(key) & self._mask]
        at = bucket.find(key)
        while at >= 0:
            if not at % 16:
                return True
            at = bucket.find(key, at + 1)  # straddled two keys: look further
        return False

    def add(self, record_id: str) -> bool:
        """Adds the id; True when it was not a member yet."""
        if record_id in self._frozen:
            return False
        key = _key(record_id)
        if key is None:
            if record_id in self._texts:
                return False
            self._texts.add(record_id)
            return True
        return self._add_key(key)

    def _add_key(self, key: bytes) -> bool:
        if self._has(key):
            return False
        self._buckets[hash(key) & self._mask] += key
        self._guids += 1
        if self._guids > _GROW_AT * len(self._buckets):
            self._grow()
        return True

    def add_many(self, ids: Sequence[str]) -> list[bool]:
        """Adds a page of ids; for each, True when it was not a member yet (a repeat within the page is not new)."""
        raw = page_bytes(ids)
        if raw is None or (self._frozen and not self._frozen.isdisjoint(ids)):
            return [self.add(record_id) for record_id in ids]
        keys: list[bytes] = _SPLIT(raw)
        buckets = self._buckets
        places = list(map(and_, map(hash, keys), repeat(self._mask)))
        if not keys or len(set(keys)) != len(keys) or max(map(bytes.find, map(buckets.__getitem__, places), keys)) >= 0:
            return [self._add_key(key) for key in keys]  # a member already, or straddled, or repeated: one by one
        for place, key in zip(places, keys):
            buckets[place] += key
        self._guids += len(keys)
        if self._guids > _GROW_AT * len(buckets):
            self._grow()
        return [True] * len(keys)

    def _grow(self) -> None:
        """Four times the buckets; each old bucket is emptied as its keys move, so the keys are held about once."""
        old = self._buckets
        size = len(old) * _GROWTH
        while self._guids > _GROW_AT * size // _GROWTH:
            size *= _GROWTH
        mask = size - 1
        buckets = [b""] * size
        for place, bucket in enumerate(old):
            if bucket:
                old[place] = b""
                for key in _SPLIT(bucket):
                    buckets[hash(key) & mask] += key
        self._buckets, self._mask = buckets, mask

    def update(self, ids: Iterable[str]) -> None:
        for record_id in ids:
            self.add(record_id)

    def memory_bytes(self) -> int:
        """Bytes held: the bucket list and buckets, the other ids' set and texts, and the frozen set and its texts."""
        size = sys.getsizeof(self._buckets) + sum(map(sys.getsizeof, filter(None, self._buckets)))
        for texts in (self._texts, self._frozen):
            size += sys.getsizeof(texts) + sum(map(sys.getsizeof, texts))
        return size
