"""An in-memory sink for unit tests (same contract as the real ones)."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from shared.sinks.base import HashingCounter, StoredObject, check_object_name


class MemorySink:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.writes = 0
        self._lock = threading.Lock()

    def write_stream(self, name: str, parts: Iterable[bytes]) -> StoredObject:
        check_object_name(name)
        counter = HashingCounter(parts)
        data = b"".join(counter)  # an exception here leaves ``objects`` untouched
        with self._lock:
            self.objects[name] = data
            self.writes += 1
        return StoredObject(name, counter.sha256, counter.bytes)

    def read_bytes(self, name: str) -> bytes | None:
        with self._lock:
            return self.objects.get(check_object_name(name))

    def list_names(self, prefix: str) -> list[str]:
        with self._lock:
            return sorted(n for n in self.objects if n.startswith(prefix))

    def location(self, name: str) -> str:
        return f"memory://{check_object_name(name)}"
