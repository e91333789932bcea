"""The Azurite fixture really serves Blob Storage: a blob round-trips through azure-storage-blob."""

from __future__ import annotations

import uuid

import pytest
from azure.storage.blob import BlobServiceClient

pytestmark = pytest.mark.azurite


def test_blob_round_trip_through_azurite(azurite_connection_string: str) -> None:
    service = BlobServiceClient.from_connection_string(azurite_connection_string)
    container = service.get_container_client(f"t{uuid.uuid4().hex[:12]}")
    container.create_container()
    container.upload_blob("a/b.jsonl", b'{"id": 1}\n', overwrite=True)
    assert container.download_blob("a/b.jsonl").readall() == b'{"id": 1}\n'
    assert [b.name for b in container.list_blobs()] == ["a/b.jsonl"]
