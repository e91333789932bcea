"""Fan-out/fan-in whose activities write blobs to Azurite through azure-storage-blob."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from azure.storage.blob import BlobServiceClient

from tests.host.conftest import ServedApp, start, wait_for_status


@pytest.mark.azurite
def test_fan_out_fan_in_writes_every_blob(azurite_connection_string: str, serve_app: Callable[..., ServedApp]) -> None:
    container = f"fanout-{uuid.uuid4().hex[:12]}"
    service = BlobServiceClient.from_connection_string(azurite_connection_string)
    service.create_container(container)
    served = serve_app("basic", store="memory", env={"HOST_TEST_BLOB_CONNECTION": azurite_connection_string})
    links = start(served.base_url, "fan_out", {"count": 12, "container": container})
    final = wait_for_status(links["statusQueryGetUri"], timeout=120)
    assert final["runtimeStatus"] == "Completed", final
    blobs = sorted(blob.name for blob in service.get_container_client(container).list_blobs())
    assert final["output"] == blobs == [f"item-{i:03d}.txt" for i in range(12)]
    body = service.get_blob_client(container, "item-007.txt").download_blob().readall()
    assert body == b"payload 7"
