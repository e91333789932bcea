"""End to end: the real app on ``python -m durable_local serve`` (SHIM mode), the real audit adapters (msal +
requests) against the M365 emulator over HTTPS, output to a local folder, compared with the emulator's ground truth."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from m365_emulator import AppRegistration, Emulator, EmulatorConfig, TenantSpec, run_emulator
from tests.support.hosted_profile import hosted_env
from tests.support.ports import banner_base_url

REPO = Path(__file__).resolve().parents[2]
TENANT = "7a1f2c3d-4b5e-4f60-8a71-92b3c4d5e6f7"
DOMAIN = "contoso.onmicrosoft.com"  # the emulator tenant's default initial domain
CLIENT = "0b1c2d3e-4f50-4a61-8b72-93c4d5e6f708"
SECRET = "collector-e2e-secret"
START = datetime(2024, 5, 1, tzinfo=UTC)


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[Emulator]:
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    config = EmulatorConfig(tenants=[TenantSpec(TENANT, seed=11, records_per_hour=60.0)])
    config.graph.completion_delay_seconds = 0.05
    with run_emulator(config) as running:
        running.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
        yield running


@pytest.fixture
def host(emulator: Emulator, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    yield from _serve(emulator, tmp_path, {})


@pytest.fixture
def blob_host(emulator: Emulator, tmp_path: Path, azurite_connection_string: str) -> Iterator[tuple[str, str]]:
    container = f"e2e-{uuid.uuid4().hex[:10]}"
    env = {"OUTPUT_STORAGE_CONNECTION": azurite_connection_string, "OUTPUT_CONTAINER": container}
    for base, _ in _serve(emulator, tmp_path, env):
        yield base, container


def _serve(emulator: Emulator, tmp_path: Path, extra: dict[str, str]) -> Iterator[tuple[str, Path]]:
    output = tmp_path / "output"
    endpoints = {
        "AUDIT_AUTHORITY_HOST": emulator.authority_host,
        "AUDIT_GRAPH_BASE_URL": emulator.graph_base_url,
        "AUDIT_EXCHANGE_BASE_URL": emulator.exchange_base_url,
        "AUDIT_CA_BUNDLE": str(emulator.ca_bundle),
    }
    # As deployed (the hosted profile: the budget key, the budget on), with the named local conveniences.
    settings = hosted_env(client_id=CLIENT, client_secret=SECRET, endpoints=endpoints, output=output)
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("AUDIT_", "OUTPUT_", "COLLECTOR_"))}
    env = {
        **inherited,
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",
        **settings,
        "COLLECTOR_CHUNKS_PER_EXECUTION": "4",
        **extra,
    }
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        env.pop(name, None)
    log_path = tmp_path / "host.log"
    command = [sys.executable, "-m", "durable_local", "serve", "--app-dir", str(REPO), "--port", "0"]
    command += ["--store", "memory", "--max-polling-interval", "0.1"]  # port 0: the host picks (tests.support.ports)
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        base = None
        for _ in range(600):
            if process.poll() is not None:
                raise RuntimeError(log_path.read_text())
            base = banner_base_url(log_path)
            if base is not None:
                break
            time.sleep(0.05)
        assert base is not None, log_path.read_text()
        yield base, output
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
        if os.environ.get("COLLECTOR_E2E_LOG"):
            print(log_path.read_text())


def _wait_terminal(base: str, collection_id: str) -> dict[str, object]:
    for _ in range(1200):  # bounded polling of a running system, not a timed assertion
        summary = requests.get(f"{base}/api/collections/{collection_id}", timeout=10).json()
        if summary["runtimeStatus"] in ("Completed", "Failed", "Terminated"):
            return summary  # type: ignore[no-any-return]
        time.sleep(0.1)
    raise AssertionError(f"collection never finished: {summary}")


@pytest.mark.parametrize("source", ["graph", "exchange"])
def test_collection_matches_emulator_ground_truth(emulator: Emulator, host: tuple[str, Path], source: str) -> None:
    base, output = host
    end = START + timedelta(hours=10)
    tenant = DOMAIN if source == "exchange" else TENANT  # Exchange is named by its initial domain (anchor mailbox)
    body = {
        "tenantId": tenant,
        "startDate": START.isoformat(),
        "endDate": end.isoformat(),
        "intervalMinutes": 60,
        "maxConcurrency": 3,
        "source": source,
        "collectionId": f"e2e-{source}",
    }
    started = requests.post(f"{base}/api/collections", json=body, timeout=30)
    assert started.status_code == 202, started.text
    links = started.json()
    assert links["id"] == f"e2e-{source}" and links["statusQueryGetUri"] and links["summaryUri"]
    again = requests.post(f"{base}/api/collections", json=body, timeout=30)
    assert again.status_code == 200 and again.json()["existing"] is True

    summary = _wait_terminal(base, f"e2e-{source}")
    assert summary["status"] == "Completed", summary
    collected: list[str] = []
    for path in sorted((output / tenant / f"e2e-{source}" / "chunks").glob("*.jsonl")):
        if not path.name.endswith(".quarantine.jsonl"):
            collected += [json.loads(line)["id"] for line in path.read_text().splitlines()]
    truth = emulator.ground_truth_ids(TENANT, START, end)
    assert len(collected) == len(set(collected))
    assert sorted(collected) == sorted(truth)
    assert summary["records"] == len(truth)
    manifest = json.loads((output / tenant / f"e2e-{source}" / "manifest.json").read_text())
    assert manifest["gaps"] == [] and manifest["totals"]["records"] == len(truth)
    peaks = [v for (tenant, _api), v in emulator.stats.peak_concurrency.items() if tenant == TENANT]
    assert peaks and max(peaks) <= 3
    if source == "graph":
        assert emulator.stats.queries_created[TENANT] >= 10 and emulator.stats.queries_deleted[TENANT] == 0
        assert summary["queries"]["leftOnService"] == emulator.stats.queries_created[TENANT]
    print(f"{source}: {len(truth)} records, emulator peak concurrency {max(peaks)} (K=3)")


def test_invalid_request_is_a_400_naming_the_field(host: tuple[str, Path]) -> None:
    base, output = host
    response = requests.post(f"{base}/api/collections", json={"tenantId": "nope"}, timeout=30)
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "tenantId"
    assert not output.exists() or not any(output.iterdir())


@pytest.mark.azurite
def test_blob_output_through_azurite(
    emulator: Emulator, blob_host: tuple[str, str], azurite_connection_string: str
) -> None:
    from azure.storage.blob import BlobServiceClient

    base, container = blob_host
    end = START + timedelta(hours=4)
    body = {"tenantId": TENANT, "startDate": START.isoformat(), "endDate": end.isoformat(), "intervalMinutes": 60,
            "maxConcurrency": 2, "collectionId": "e2e-blob"}  # fmt: skip
    assert requests.post(f"{base}/api/collections", json=body, timeout=30).status_code == 202
    summary = _wait_terminal(base, "e2e-blob")
    assert summary["status"] == "Completed", summary
    client = BlobServiceClient.from_connection_string(azurite_connection_string).get_container_client(container)
    collected: list[str] = []
    for blob in client.list_blobs(name_starts_with=f"{TENANT}/e2e-blob/chunks/"):
        if blob.name.endswith(".jsonl") and not blob.name.endswith(".quarantine.jsonl"):
            text = client.download_blob(blob.name).readall().decode()
            collected += [json.loads(line)["id"] for line in text.splitlines()]
    assert sorted(collected) == sorted(emulator.ground_truth_ids(TENANT, START, end))
    manifest = json.loads(client.download_blob(f"{TENANT}/e2e-blob/manifest.json").readall())
    assert manifest["totals"]["records"] == len(collected) and manifest["gaps"] == []
    assert str(summary["manifest"]).endswith(f"/{container}/{TENANT}/e2e-blob/manifest.json")
