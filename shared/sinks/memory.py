"""An in-memory sink for unit tests (same contract as the real ones)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Sequence

from shared.errors import SinkError
from shared.sinks.base import HashingCounter, StoredObject, check_object_name, check_part_key


class MemorySink:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.parts: dict[tuple[str, str], bytes] = {}
        """Staged parts by (object name, part key)."""
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

    def delete(self, name: str) -> None:
        with self._lock:
            self.objects.pop(check_object_name(name), None)

    def stage_part(self, name: str, key: str, data: bytes) -> None:
        check_object_name(name)
        with self._lock:
            self.parts[(name, check_part_key(key))] = bytes(data)

    def commit_parts(self, name: str, keys: Sequence[str]) -> StoredObject:
        check_object_name(name)
        with self._lock:
            missing = [k for k in keys if (name, k) not in self.parts]
            if missing:
                raise SinkError(f"commit of {name} failed: parts {missing} are not staged")
            data = b"".join(self.parts[(name, k)] for k in keys)
            self.objects[name] = data
            self.writes += 1
        return StoredObject(name, hashlib.sha256(data).hexdigest(), len(data))

    def discard_parts(self, name: str, keys: Sequence[str]) -> None:
        with self._lock:
            for key in keys:
                self.parts.pop((name, key), None)
