"""Issue 6, item 1: the seed scenario (1 day, 240-minute chunks -> 6 chunks, K=2) into Blob Storage (Azurite)."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import START, TENANT, body, serve


@pytest.mark.azurite
def test_seed_scenario_into_azurite_matches_ground_truth(
    make_emulator: MakeEmulator, tmp_path: Path, azurite_connection_string: str
) -> None:
    from azure.storage.blob import BlobServiceClient

    emulator = make_emulator(records_per_hour=90.0)
    container = f"e2e-seed-{uuid.uuid4().hex[:8]}"
    env = {"OUTPUT_STORAGE_CONNECTION": azurite_connection_string, "OUTPUT_CONTAINER": container}
    end = START + timedelta(days=1)
    with serve(emulator, tmp_path, env) as host:
        started = host.post(body(end, interval=240, k=2, collectionId="seed"))
        assert started.status_code == 202, started.text
        assert started.json()["chunks"] == 6
        summary = host.wait("seed")

    assert summary["status"] == "Completed", summary
    assert summary["progress"]["total"] == 6 and summary["progress"]["completed"] == 6
    blobs = BlobServiceClient.from_connection_string(azurite_connection_string).get_container_client(container)
    prefix = f"{TENANT}/seed/"
    chunk_names = sorted(
        b.name
        for b in blobs.list_blobs(name_starts_with=f"{prefix}chunks/")
        if b.name.endswith(".jsonl") and not b.name.endswith(".quarantine.jsonl")
    )
    assert len(chunk_names) == 6
    contents = {name: blobs.download_blob(name).readall() for name in chunk_names}
    ids = [json.loads(line)["id"] for data in contents.values() for line in data.decode().splitlines()]
    truth = emulator.ground_truth_ids(TENANT, START, end)
    assert len(truth) > 1000  # a day of a 90-records-per-hour tenant: the comparison is not vacuous
    assert len(ids) == len(set(ids)), "duplicate record ids in the output"
    assert sorted(ids) == sorted(truth)

    manifest = json.loads(blobs.download_blob(f"{prefix}manifest.json").readall())
    assert manifest["gaps"] == [] and manifest["failures"] == []
    assert manifest["totals"]["records"] == len(truth) and manifest["totals"]["chunks"] == 6
    hashes = {chunk["blob"]: chunk["sha256"] for chunk in manifest["chunks"]}
    assert sorted(hashes) == chunk_names
    for name, data in contents.items():
        assert hashes[name] == hashlib.sha256(data).hexdigest(), name
    created = 6 + emulator.stats.faulted(TENANT)  # one more for each query the emulator failed, lost or left running
    assert emulator.stats.queries_created[TENANT] == created and emulator.stats.queries_deleted[TENANT] == 0
    assert summary["queries"]["leftOnService"] == created and manifest["queries"]["deletion"] == "off"
    peak = max(live for _, live in emulator.stats.live_timeline(TENANT))
    print(f"seed: {len(truth)} records in 6 chunks, peak chunks in flight at the emulator {peak} (K=2)")
    assert peak == 2
