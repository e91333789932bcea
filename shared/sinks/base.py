"""The output port: where chunk objects, sidecars and the manifest go.

Objects are written whole or not at all (a failed stream leaves no object and no partial one), and writing the
same name again replaces it, so an activity that runs twice produces the same output once.

An object can also be written in parts, by several activities: each stages part ``key`` of the object (staging the
same key again replaces it), and one commit makes the object the concatenation of the listed parts, in order. Staged
parts are invisible until then, so a reader sees the old object or the whole new one, never a part.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

_NAME = re.compile(r"^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*$")
_PART_KEY = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


@dataclass(frozen=True, slots=True)
class StoredObject:
    name: str
    sha256: str
    bytes: int


class ChunkSink(Protocol):
    """Where the collector writes; implementations: blob, local folder, memory."""

    def write_stream(self, name: str, parts: Iterable[bytes]) -> StoredObject:
        """Write (replace) ``name`` from ``parts``; an exception from ``parts`` leaves no object behind."""
        ...

    def read_bytes(self, name: str) -> bytes | None:
        """The object's content, or None when it does not exist."""
        ...

    def list_names(self, prefix: str) -> list[str]:
        """Names starting with ``prefix``, sorted."""
        ...

    def location(self, name: str) -> str:
        """Where a person finds the object (URL or path); never carries credentials."""
        ...

    def delete(self, name: str) -> None:
        """Remove the object; a missing one is not an error."""
        ...

    def stage_part(self, name: str, key: str, data: bytes) -> None:
        """Stage part ``key`` of ``name`` (replacing a part staged under the same key); invisible until committed."""
        ...

    def commit_parts(self, name: str, keys: Sequence[str]) -> StoredObject:
        """Replace ``name`` with the staged parts ``keys`` joined in that order; SHA-256 and size of the result.

        The parts stay staged (a commit run again commits the same object) until ``discard_parts``.
        """
        ...

    def discard_parts(self, name: str, keys: Sequence[str]) -> None:
        """Forget staged parts of ``name`` (after its commit, or when the chunk was split instead)."""
        ...


def check_object_name(name: str) -> str:
    """Reject names that could escape the sink's root: absolute, ``..``, empty segments, odd characters."""
    if len(name) > 1024 or not _NAME.fullmatch(name) or any(part in (".", "..") for part in name.split("/")):
        raise ValueError(f"unsafe object name {name!r}")
    return name


class HashingCounter:
    """Pass-through over byte parts that hashes and counts them while they stream."""

    def __init__(self, parts: Iterable[bytes]) -> None:
        self._parts = parts
        self._hash = hashlib.sha256()
        self.bytes = 0

    def __iter__(self) -> Iterator[bytes]:
        for part in self._parts:
            if part:
                self._hash.update(part)
                self.bytes += len(part)
                yield part

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()


def check_part_key(key: str) -> str:
    """Part keys become file and block names: short, fixed alphabet."""
    if not _PART_KEY.fullmatch(key):
        raise ValueError(f"unsafe part key {key!r}")
    return key


def write_bytes(sink: ChunkSink, name: str, data: bytes) -> StoredObject:
    """Write a small object in one piece."""
    return sink.write_stream(name, [data])
