"""A local-folder sink (the embedded default): temp file in the target folder, then an atomic rename."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from shared.errors import SinkError
from shared.sinks.base import HashingCounter, StoredObject, check_object_name


class LocalFolderSink:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, name: str) -> Path:
        path = (self.root / check_object_name(name)).resolve()
        if self.root not in path.parents:  # belt and braces on top of the name check
            raise ValueError(f"object name {name!r} escapes the output folder")
        return path

    def write_stream(self, name: str, parts: Iterable[bytes]) -> StoredObject:
        path = self._path(name)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        except OSError as exc:
            raise SinkError(f"cannot write {name}: {exc.strerror}") from exc
        counter = HashingCounter(parts)
        try:
            with os.fdopen(fd, "wb") as handle:
                for part in counter:
                    handle.write(part)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)  # atomic: readers see the old object or the whole new one
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if isinstance(exc, OSError):
                raise SinkError(f"cannot write {name}: {exc.strerror}") from exc
            raise
        return StoredObject(name, counter.sha256, counter.bytes)

    def read_bytes(self, name: str) -> bytes | None:
        try:
            return self._path(name).read_bytes()
        except FileNotFoundError:
            return None

    def list_names(self, prefix: str) -> list[str]:
        found: list[str] = []
        for path in self.root.rglob("*"):
            if path.is_file() and not path.name.startswith(".tmp-"):
                name = path.relative_to(self.root).as_posix()
                if name.startswith(prefix):
                    found.append(name)
        return sorted(found)

    def location(self, name: str) -> str:
        return str(self._path(name))
