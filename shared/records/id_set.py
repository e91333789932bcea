"""A compact, exact set of record ids: 16 bytes a slot for GUIDs, a plain set for anything else.

Audit record ids are GUIDs written in lower case (``8-4-4-4-12`` hex digits): that text and a 128-bit number map one
to one, so such an id is kept as two 64-bit halves in an open-addressing table: linear probing from a multiplicative
hash of Python's hash of the number (ids that differ in any bits spread out), at most 3/4 full, doubled when fuller,
so 21 to 43 bytes per id instead of ~120 for a set of ``str``. Every other id (upper case, braces, not a GUID at all)
is kept as its text in a ``set``. Membership is exact either way: two ids are the same member exactly when their
texts are equal.

``to_bytes``/``from_bytes`` give the members as 16 bytes per GUID (plus the other ids, length-prefixed), so a writer
that produces one object in several parts can carry the set from part to part.

A page of ids goes in at once (:meth:`IdSet.add_many`): when every id of the page is a lower-case GUID (the usual
case), their texts are checked and turned into numbers in a few C-level operations over the whole page
(:func:`page_keys`), and only the table probe runs per id.
"""

from __future__ import annotations

import re
import struct
import sys
from array import array
from collections.abc import Iterator, Sequence

_GUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").fullmatch
_LOW = (1 << 64) - 1
_MIX = 0x9E3779B97F4A7C15  # 2**64 / golden ratio: the high bits of hash * _MIX depend on every bit of the hash
_FIRST_BITS = 12
_MAGIC = b"IDS1"


def guid_key(record_id: str) -> int | None:
    """The 128-bit number of a lower-case GUID text; None for any other text."""
    if len(record_id) == 36 and _GUID(record_id) is not None:
        return int(record_id.replace("-", ""), 16)
    return None


def page_bytes(ids: Sequence[str]) -> bytes | None:
    """Every id's 128-bit number (``guid_key``) as 16 big-endian bytes, one after the other, when every id is a
    lower-case GUID text; None when any is not (the caller then goes id by id).

    Checked over the whole page at once, exactly as ``guid_key`` checks one id: each text 36 characters long, dashes
    at places 8, 13, 18 and 23 and nowhere else, lower-case hex digits everywhere else.
    """
    count = len(ids)
    if not count:
        return b""
    if min(map(len, ids)) != 36 or max(map(len, ids)) != 36:
        return None
    joined = "".join(ids)
    if joined.count("-") != 4 * count or any(joined[at::36].count("-") != count for at in (8, 13, 18, 23)):
        return None
    digits = joined.replace("-", "")
    if digits.lower() != digits:
        return None
    try:
        raw = bytes.fromhex(digits)  # refuses anything but hex digits and whitespace
    except ValueError:
        return None
    if len(raw) != 16 * count:  # whitespace was skipped
        return None
    return raw


def page_keys(ids: Sequence[str]) -> tuple[array[int], array[int]] | None:
    """The high and low 64-bit halves of every id's 128-bit number (``guid_key``), when every id is a lower-case GUID
    text (:func:`page_bytes`); None when any is not."""
    raw = page_bytes(ids)
    if raw is None:
        return None
    words = array("Q")
    words.frombytes(raw)
    if sys.byteorder == "little":
        words.byteswap()  # each half big-endian, as ``int(..., 16)`` reads the text
    return words[0::2], words[1::2]


def guid_text(key: int) -> str:
    digits = f"{key:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


class IdSet:
    """An exact set of id strings (see the module docstring). Not thread-safe: one writer owns it."""

    def __init__(self) -> None:
        self._capacity = 1 << _FIRST_BITS
        self._shift = 64 - _FIRST_BITS
        self._high = array("Q", [0]) * self._capacity
        self._low = array("Q", [0]) * self._capacity
        self._guids = 0
        self._zero = False  # the all-zero GUID: (0, 0) marks an empty slot, so it is kept apart
        self._texts: set[str] = set()
        self._removed: set[int] = set()
        """GUIDs taken out again (rare: a record that turned out unwritable); their slots stay occupied."""

    def __len__(self) -> int:
        return self._guids - len(self._removed) + int(self._zero) + len(self._texts)

    def __contains__(self, record_id: object) -> bool:
        if not isinstance(record_id, str):
            return False
        key = guid_key(record_id)
        if key is None:
            return record_id in self._texts
        return self.has_key(key)

    def add(self, record_id: str) -> bool:
        """Adds the id; True when it was not a member yet."""
        key = int(record_id.replace("-", ""), 16) if len(record_id) == 36 and _GUID(record_id) is not None else None
        if key is None:
            if record_id in self._texts:
                return False
            self._texts.add(record_id)
            return True
        return self.add_key(key)

    def has_key(self, key: int) -> bool:
        """Whether the GUID with the 128-bit number ``key`` (``guid_key``) is a member."""
        if key == 0:
            return self._zero
        return self._find(key) >= 0 and key not in self._removed

    def add_key(self, key: int) -> bool:
        """Adds the GUID with the 128-bit number ``key`` (``guid_key``); True when it was not a member yet."""
        if key == 0:
            new = not self._zero
            self._zero = True
            return new
        if self._removed and key in self._removed:
            self._removed.discard(key)
            return True
        high, low = key >> 64, key & _LOW
        highs, lows, mask = self._high, self._low, self._capacity - 1
        slot = (hash(key) * _MIX & _LOW) >> self._shift
        while True:
            found = highs[slot]
            if found == high and lows[slot] == low:
                return False
            if found == 0 and lows[slot] == 0:
                highs[slot], lows[slot] = high, low
                self._guids += 1
                if self._guids * 4 > self._capacity * 3:
                    self._grow()
                return True
            slot = (slot + 1) & mask

    def add_many(self, ids: Sequence[str]) -> list[bool]:
        """Adds a page of ids; for each, True when it was not a member yet (a repeat within the page is not new)."""
        keys = page_keys(ids) if not self._removed else None
        if keys is None:
            return [self.add(record_id) for record_id in ids]
        return self._add_halves(*keys)

    def contains_many(self, ids: Sequence[str]) -> list[bool]:
        """For each id of a page, whether it is a member."""
        keys = page_keys(ids) if not self._removed else None
        if keys is None:
            return [record_id in self for record_id in ids]
        found: list[bool] = []
        highs, lows, mask, shift = self._high, self._low, self._capacity - 1, self._shift
        for high, low in zip(*keys):
            if not high and not low:  # the all-zero GUID is kept apart: (0, 0) marks an empty slot
                found.append(self._zero)
                continue
            slot = (hash(high << 64 | low) * _MIX & _LOW) >> shift
            while True:
                at = highs[slot]
                if at == high and lows[slot] == low:
                    found.append(True)
                    break
                if at == 0 and lows[slot] == 0:
                    found.append(False)
                    break
                slot = (slot + 1) & mask
        return found

    def _add_halves(self, page_highs: array[int], page_lows: array[int]) -> list[bool]:
        """``add_key`` for each (high, low) pair, in one loop (no member removed)."""
        added: list[bool] = []
        append = added.append
        highs, lows, mask, shift = self._high, self._low, self._capacity - 1, self._shift
        limit = self._capacity * 3 // 4
        for high, low in zip(page_highs, page_lows):
            if not high and not low:
                append(not self._zero)
                self._zero = True
                continue
            slot = (hash(high << 64 | low) * _MIX & _LOW) >> shift
            while True:
                at = highs[slot]
                if at == high and lows[slot] == low:
                    append(False)
                    break
                if at == 0 and lows[slot] == 0:
                    highs[slot], lows[slot] = high, low
                    self._guids += 1
                    append(True)
                    if self._guids > limit:
                        self._grow()
                        highs, lows, mask, shift = self._high, self._low, self._capacity - 1, self._shift
                        limit = self._capacity * 3 // 4
                    break
                slot = (slot + 1) & mask
        return added

    def discard(self, record_id: str) -> None:
        key = guid_key(record_id)
        if key is None:
            self._texts.discard(record_id)
        elif key == 0:
            self._zero = False
        elif self._find(key) >= 0:
            self._removed.add(key)

    def _find(self, key: int) -> int:
        high, low = key >> 64, key & _LOW
        highs, lows, mask = self._high, self._low, self._capacity - 1
        slot = (hash(key) * _MIX & _LOW) >> self._shift
        while True:
            found = highs[slot]
            if found == high and lows[slot] == low:
                return slot
            if found == 0 and lows[slot] == 0:
                return -1
            slot = (slot + 1) & mask

    def _grow(self) -> None:
        old_high, old_low = self._high, self._low
        self._capacity *= 2
        self._shift -= 1
        shift = self._shift
        self._high = highs = array("Q", [0]) * self._capacity
        self._low = lows = array("Q", [0]) * self._capacity
        mask = self._capacity - 1
        for high, low in zip(old_high, old_low):
            if high or low:
                slot = (hash(high << 64 | low) * _MIX & _LOW) >> shift
                while highs[slot] or lows[slot]:
                    slot = (slot + 1) & mask
                highs[slot], lows[slot] = high, low

    def update(self, other: IdSet) -> None:
        """Adds every member of ``other`` (GUIDs as numbers: no text is made or parsed)."""
        for key in other.guids():
            self.add_key(key)
        self._texts |= other._texts

    def copy(self) -> IdSet:
        """An independent set with the same members (the GUID table is copied as it is, not re-inserted)."""
        twin = IdSet.__new__(IdSet)
        twin._capacity, twin._shift, twin._guids, twin._zero = self._capacity, self._shift, self._guids, self._zero
        twin._high, twin._low = array("Q", self._high), array("Q", self._low)
        twin._texts, twin._removed = set(self._texts), set(self._removed)
        return twin

    def guids(self) -> Iterator[int]:
        """The GUID members as 128-bit numbers (table order)."""
        if self._zero:
            yield 0
        for high, low in zip(self._high, self._low):
            if high or low:
                key = high << 64 | low
                if key not in self._removed:
                    yield key

    def __iter__(self) -> Iterator[str]:
        yield from (guid_text(key) for key in self.guids())
        yield from self._texts

    def memory_bytes(self) -> int:
        """Bytes held by the GUID table (the other ids' set and strings are not counted)."""
        return self._high.itemsize * (len(self._high) + len(self._low))

    def to_bytes(self) -> bytes:
        """``IDS1``, the GUID count, 16 bytes per GUID (big-endian), then each other id as a length and UTF-8."""
        guids = list(self.guids())
        parts = [_MAGIC, struct.pack(">Q", len(guids))]
        parts.extend(key.to_bytes(16, "big") for key in guids)
        for text in sorted(self._texts):
            data = text.encode("utf-8", "surrogatepass")
            parts.append(struct.pack(">I", len(data)))
            parts.append(data)
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes) -> IdSet:
        """The set ``to_bytes`` wrote.

        Raises:
            ValueError: the data is not what ``to_bytes`` writes.
        """
        if data[:4] != _MAGIC or len(data) < 12:
            raise ValueError("not an id set")
        (count,) = struct.unpack_from(">Q", data, 4)
        end = 12 + 16 * count
        if len(data) < end:
            raise ValueError("id set is truncated")
        ids = cls()
        for start in range(12, end, 16):
            ids.add_key(int.from_bytes(data[start : start + 16], "big"))
        position = end
        while position < len(data):
            if position + 4 > len(data):
                raise ValueError("id set is truncated")
            (size,) = struct.unpack_from(">I", data, position)
            text = data[position + 4 : position + 4 + size]
            if len(text) != size:
                raise ValueError("id set is truncated")
            ids.add(text.decode("utf-8", "surrogatepass"))
            position += 4 + size
        return ids
