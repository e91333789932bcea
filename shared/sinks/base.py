"""The output port: where chunk objects, sidecars and the manifest go.

Objects are written whole or not at all (a failed stream leaves no object and no partial one), and writing the
same name again replaces it, so an activity that runs twice produces the same output once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

_NAME = re.compile(r"^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*$")


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


def write_bytes(sink: ChunkSink, name: str, data: bytes) -> StoredObject:
    """Write a small object in one piece."""
    return sink.write_stream(name, [data])
