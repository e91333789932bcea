from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared.sinks.base import ChunkSink, write_bytes
from shared.sinks.local import LocalFolderSink
from shared.sinks.memory import MemorySink


def parts(n: int, size: int) -> Iterator[bytes]:
    for i in range(n):
        yield bytes([i % 251]) * size


def failing_parts() -> Iterator[bytes]:
    yield b"partial line\n"
    raise RuntimeError("source broke mid-stream")


def contract(sink: ChunkSink) -> None:
    data = b"".join(parts(5, 1000))
    stored = sink.write_stream("t/c/chunks/a.jsonl", parts(5, 1000))
    assert stored.sha256 == hashlib.sha256(data).hexdigest() and stored.bytes == len(data)
    assert sink.read_bytes("t/c/chunks/a.jsonl") == data
    # overwrite on retry replaces the whole object
    write_bytes(sink, "t/c/chunks/a.jsonl", b"second")
    assert sink.read_bytes("t/c/chunks/a.jsonl") == b"second"
    # a failed stream leaves the previous object untouched and no new one
    with pytest.raises(RuntimeError):
        sink.write_stream("t/c/chunks/a.jsonl", failing_parts())
    with pytest.raises(RuntimeError):
        sink.write_stream("t/c/chunks/b.jsonl", failing_parts())
    assert sink.read_bytes("t/c/chunks/a.jsonl") == b"second"
    assert sink.read_bytes("t/c/chunks/b.jsonl") is None
    write_bytes(sink, "t/c/manifest.json", b"{}")
    write_bytes(sink, "t/other/manifest.json", b"{}")
    assert sink.list_names("t/c/") == ["t/c/chunks/a.jsonl", "t/c/manifest.json"]
    empty = sink.write_stream("t/c/chunks/empty.jsonl", iter(()))
    assert empty.bytes == 0 and sink.read_bytes("t/c/chunks/empty.jsonl") == b""
    with pytest.raises(ValueError):
        write_bytes(sink, "../escape", b"x")


def test_memory_sink_contract() -> None:
    contract(MemorySink())


def test_local_folder_sink_contract_and_no_temp_leftovers(tmp_path: Path) -> None:
    sink = LocalFolderSink(tmp_path / "out")
    contract(sink)
    leftovers = [p.name for p in (tmp_path / "out").rglob(".tmp-*")]
    assert leftovers == []
    assert sink.location("t/c/manifest.json") == str(tmp_path / "out" / "t" / "c" / "manifest.json")


@pytest.mark.azurite
def test_blob_sink_contract_with_staged_blocks(azurite_connection_string: str) -> None:
    from azure.storage.blob import BlobServiceClient

    from shared.sinks.blob import BlobSink

    container = f"ual-{uuid.uuid4().hex[:12]}"
    sink = BlobSink.from_connection_string(azurite_connection_string, container, block_size=2048)
    contract(sink)
    # 5 x 1000 bytes with 2 KiB blocks must have been committed as several blocks
    sink.write_stream("t/c/chunks/blocks.jsonl", parts(5, 1000))
    blob = BlobServiceClient.from_connection_string(azurite_connection_string).get_blob_client(
        container, "t/c/chunks/blocks.jsonl"
    )
    committed, _ = blob.get_block_list("committed")
    assert len(committed) == 3
    assert "?" not in sink.location("t/c/manifest.json")


def test_an_unusable_output_folder_is_a_config_error_naming_the_setting(tmp_path: Path) -> None:
    from shared.errors import ConfigError
    from shared.settings import Settings
    from shared.sinks import build_sink

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigError) as caught:
        build_sink(Settings.from_env({"OUTPUT_FOLDER": str(blocker / "out")}))
    assert caught.value.setting == "OUTPUT_FOLDER" and caught.value.dooms_collection
    assert "OUTPUT_STORAGE_CONNECTION" in str(caught.value)
