"""A local-folder sink (the embedded default): temp file in the target folder, then an atomic rename.

Parts of an object are staged as files under ``<root>/.parts/<object name>/<key>`` (outside every collection's
folder, so nothing lists them) and joined into the object by the commit, through the same temp file and rename.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from shared.errors import SinkError
from shared.sinks.base import HashingCounter, StoredObject, check_object_name, check_part_key

STAGING = ".parts"
_READ = 1 << 20


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
                if name.startswith(STAGING + "/"):
                    continue  # staged parts are not objects
                if name.startswith(prefix):
                    found.append(name)
        return sorted(found)

    def location(self, name: str) -> str:
        return str(self._path(name))

    def delete(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(name).unlink()

    def _part(self, name: str, key: str) -> Path:
        return self.root / STAGING / check_object_name(name) / check_part_key(key)

    def stage_part(self, name: str, key: str, data: bytes) -> None:
        path = self._part(name, key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            raise SinkError(f"cannot stage part {key} of {name}: {exc.strerror}") from exc

    def commit_parts(self, name: str, keys: Sequence[str]) -> StoredObject:
        paths = [self._part(name, key) for key in keys]
        missing = [key for key, path in zip(keys, paths, strict=True) if not path.is_file()]
        if missing:
            raise SinkError(f"commit of {name} failed: parts {missing} are not staged")
        return self.write_stream(name, _read_all(paths))

    def discard_parts(self, name: str, keys: Sequence[str]) -> None:
        for key in keys:
            with contextlib.suppress(FileNotFoundError):
                self._part(name, key).unlink()
        folder = self.root / STAGING / check_object_name(name)
        with contextlib.suppress(OSError):
            if folder.is_dir() and not any(folder.iterdir()):
                shutil.rmtree(folder)


def _read_all(paths: Sequence[Path]) -> Iterator[bytes]:
    for path in paths:
        with path.open("rb") as handle:
            while block := handle.read(_READ):
                yield block
