"""Azure Blob Storage sink: staged blocks (about 4 MiB each) then one block-list commit.

Memory stays flat however large a chunk is, and the commit is what makes the object visible: a failed stream
commits nothing, and a retry's commit replaces the whole blob (uncommitted blocks are discarded by the service).

An object written in parts stages each part as one block of the blob itself, with a block id derived from the part
key ("Put Block": a block staged again under the same id replaces the uncommitted one), and the commit lists the
parts' block ids in order ("Put Block List" with the latest version of each id: the uncommitted block if there is
one, else the committed one, so a commit run again after success commits the same blob). Staged blocks the commit
does not list are discarded by the service, and uncommitted blocks expire after a week
(<https://learn.microsoft.com/rest/api/storageservices/put-block-list>). The SHA-256 is computed over the committed
blob, read back once: a hash state cannot be carried from one activity to the next.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from shared.errors import SinkError
from shared.sinks.base import HashingCounter, StoredObject, check_object_name, check_part_key

logger = logging.getLogger(__name__)

BLOCK_SIZE = 4 * 1024 * 1024


def _block_id(index: int) -> str:
    # Every block id of a blob must have the same length; zero-padding keeps them equal and ordered.
    return base64.b64encode(f"block-{index:08d}".encode()).decode()


def _part_block_id(key: str) -> str:
    # Padded to one length (Put Block List refuses ids of different lengths within a blob).
    return base64.b64encode(f"part-{check_part_key(key):>32}".encode()).decode()


class BlobSink:
    """Writes objects as block blobs in one container (created once, on first use)."""

    def __init__(self, service: Any, container: str, *, block_size: int = BLOCK_SIZE) -> None:
        self._container = service.get_container_client(container)
        self._block_size = block_size
        self._ensured = False
        self._lock = threading.Lock()

    @classmethod
    def from_connection_string(cls, connection_string: str, container: str, **kwargs: Any) -> BlobSink:
        from azure.storage.blob import BlobServiceClient

        return cls(BlobServiceClient.from_connection_string(connection_string), container, **kwargs)

    @classmethod
    def from_account_url(cls, account_url: str, container: str, **kwargs: Any) -> BlobSink:
        """Managed identity (or any DefaultAzureCredential source) instead of a key."""
        from azure.identity import DefaultAzureCredential
        from azure.storage.blob import BlobServiceClient

        return cls(BlobServiceClient(account_url, credential=DefaultAzureCredential()), container, **kwargs)

    def _ensure_container(self) -> None:
        if self._ensured:
            return
        from azure.core.exceptions import ResourceExistsError

        with self._lock:
            if not self._ensured:
                with contextlib.suppress(ResourceExistsError):
                    self._container.create_container()
                self._ensured = True

    def write_stream(self, name: str, parts: Iterable[bytes]) -> StoredObject:
        from azure.core.exceptions import AzureError

        check_object_name(name)
        counter = HashingCounter(parts)
        try:
            self._ensure_container()
            blob = self._container.get_blob_client(name)
            block_ids: list[str] = []
            buffer = bytearray()
            for part in counter:
                buffer += part
                while len(buffer) >= self._block_size:
                    block_ids.append(_block_id(len(block_ids)))
                    blob.stage_block(block_ids[-1], bytes(buffer[: self._block_size]))
                    del buffer[: self._block_size]
            if buffer or not block_ids:
                block_ids.append(_block_id(len(block_ids)))
                blob.stage_block(block_ids[-1], bytes(buffer))
            blob.commit_block_list(block_ids)
        except AzureError as exc:
            # The SDK's message can quote the request URL; keep only the type and status for the log.
            raise SinkError(f"blob write {name} failed: {type(exc).__name__}") from exc
        return StoredObject(name, counter.sha256, counter.bytes)

    def read_bytes(self, name: str) -> bytes | None:
        from azure.core.exceptions import AzureError, ResourceNotFoundError

        try:
            data: bytes = self._container.get_blob_client(check_object_name(name)).download_blob().readall()
        except ResourceNotFoundError:
            return None
        except AzureError as exc:  # as in write_stream: the SDK message may quote the URL (and a SAS)
            raise SinkError(f"blob read {name} failed: {type(exc).__name__}") from exc
        return data

    def list_names(self, prefix: str) -> list[str]:
        from azure.core.exceptions import AzureError, ResourceNotFoundError

        try:
            return sorted(str(b.name) for b in self._container.list_blobs(name_starts_with=prefix))
        except ResourceNotFoundError:
            return []
        except AzureError as exc:
            raise SinkError(f"blob list {prefix} failed: {type(exc).__name__}") from exc

    def location(self, name: str) -> str:
        url = str(self._container.get_blob_client(check_object_name(name)).url)
        return url.split("?", 1)[0]  # never hand out a SAS token

    def delete(self, name: str) -> None:
        from azure.core.exceptions import AzureError, ResourceNotFoundError

        try:
            self._container.get_blob_client(check_object_name(name)).delete_blob()
        except ResourceNotFoundError:
            return
        except AzureError as exc:
            raise SinkError(f"blob delete {name} failed: {type(exc).__name__}") from exc

    def stage_part(self, name: str, key: str, data: bytes) -> None:
        from azure.core.exceptions import AzureError

        try:
            self._ensure_container()
            self._container.get_blob_client(check_object_name(name)).stage_block(_part_block_id(key), data)
        except AzureError as exc:
            raise SinkError(f"staging part {key} of {name} failed: {type(exc).__name__}") from exc

    def commit_parts(self, name: str, keys: Sequence[str]) -> StoredObject:
        from azure.core.exceptions import AzureError
        from azure.storage.blob import BlobBlock

        try:
            blob = self._container.get_blob_client(check_object_name(name))
            blob.commit_block_list([BlobBlock(block_id=_part_block_id(key)) for key in keys])
            digest = hashlib.sha256()
            size = 0
            for piece in blob.download_blob().chunks():
                digest.update(piece)
                size += len(piece)
        except AzureError as exc:
            raise SinkError(f"commit of {name} failed: {type(exc).__name__}") from exc
        return StoredObject(name, digest.hexdigest(), size)

    def discard_parts(self, name: str, keys: Sequence[str]) -> None:
        """Nothing to do: the commit dropped every uncommitted block, and unlisted ones expire with the service."""
        check_object_name(name)
