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


def parts_contract(sink: ChunkSink) -> None:
    """Parts staged by several activities become one object at the commit, in the listed order."""
    name = "t/c/chunks/parts.jsonl"
    write_bytes(sink, name, b"old object\n")
    sink.stage_part(name, "00000", b"first\n")
    sink.stage_part(name, "00002", b"third\n")
    sink.stage_part(name, "00001", b"a part that is replaced\n")
    sink.stage_part(name, "00001", b"second\n")  # a part staged again (its activity ran twice) replaces the first
    sink.stage_part(name, "00009", b"a part no commit lists\n")
    assert sink.read_bytes(name) == b"old object\n"  # staged parts are invisible
    assert sink.list_names("t/c/chunks/parts") == [name] and not any(".parts" in n for n in sink.list_names(""))
    stored = sink.commit_parts(name, ["00000", "00001", "00002"])
    data = b"first\nsecond\nthird\n"
    assert sink.read_bytes(name) == data
    assert (stored.sha256, stored.bytes) == (hashlib.sha256(data).hexdigest(), len(data))
    again = sink.commit_parts(name, ["00000", "00001", "00002"])  # a commit run twice commits the same object
    assert again == stored and sink.read_bytes(name) == data
    sink.discard_parts(name, ["00000", "00001", "00002", "00009"])
    assert sink.read_bytes(name) == data
    empty = "t/c/chunks/none.jsonl"
    sink.stage_part(empty, "00000", b"")
    assert sink.commit_parts(empty, ["00000"]).bytes == 0 and sink.read_bytes(empty) == b""
    sink.discard_parts(empty, ["00000"])
    sink.delete(empty)
    sink.delete(empty)  # deleting what is gone is fine
    assert sink.read_bytes(empty) is None
    with pytest.raises(ValueError):
        sink.stage_part(name, "../x", b"")


def test_memory_sink_contract() -> None:
    contract(MemorySink())
    parts_contract(MemorySink())


def test_a_commit_of_parts_never_staged_fails_and_leaves_the_object() -> None:
    from shared.errors import SinkError

    sink = MemorySink()
    write_bytes(sink, "t/c/chunks/x.jsonl", b"kept")
    sink.stage_part("t/c/chunks/x.jsonl", "00000", b"a")
    with pytest.raises(SinkError):
        sink.commit_parts("t/c/chunks/x.jsonl", ["00000", "00001"])
    assert sink.read_bytes("t/c/chunks/x.jsonl") == b"kept"


def test_local_folder_sink_contract_and_no_temp_leftovers(tmp_path: Path) -> None:
    sink = LocalFolderSink(tmp_path / "out")
    contract(sink)
    parts_contract(sink)
    leftovers = [p.name for p in (tmp_path / "out").rglob(".tmp-*")]
    assert leftovers == []
    staged = [p for p in (tmp_path / "out" / ".parts").rglob("*") if p.is_file()]
    assert staged == [] and not (tmp_path / "out" / ".parts" / "t/c/chunks/parts.jsonl").exists()
    assert sink.location("t/c/manifest.json") == str(tmp_path / "out" / "t" / "c" / "manifest.json")


@pytest.mark.azurite
def test_blob_sink_contract_with_staged_blocks(azurite_connection_string: str) -> None:
    from azure.storage.blob import BlobServiceClient

    from shared.sinks.blob import BlobSink

    container = f"ual-{uuid.uuid4().hex[:12]}"
    sink = BlobSink.from_connection_string(azurite_connection_string, container, block_size=2048)
    contract(sink)
    parts_contract(sink)
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


def test_on_azure_without_an_output_setting_the_sink_is_a_config_error_not_the_app_folder(tmp_path: Path) -> None:
    """Azure sets WEBSITE_INSTANCE_ID. Without an output setting the collector used to write into ./output, which on
    a writable app folder "succeeds" and is wiped by the next deployment: now it names the setting to set."""
    from shared.errors import ConfigError
    from shared.settings import Settings
    from shared.sinks import build_sink

    with pytest.raises(ConfigError) as raised:
        build_sink(Settings.from_env({"WEBSITE_INSTANCE_ID": "0123abcd"}))
    assert raised.value.setting == "OUTPUT_STORAGE_ACCOUNT_URL" and "OUTPUT_FOLDER" in str(raised.value)
    chosen = build_sink(Settings.from_env({"WEBSITE_INSTANCE_ID": "0123abcd", "OUTPUT_FOLDER": str(tmp_path)}))
    assert type(chosen).__name__ == "LocalFolderSink"  # a folder asked for explicitly is still honoured
