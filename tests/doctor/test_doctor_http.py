"""``GET /api/doctor`` on the local Functions host (this repository's app, served with keys required) against the
emulator and Azurite: function auth, 400 naming the parameter (nothing probed), the same results as the CLI, and no
secret in the answer or the host's log."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas

from m365_emulator import Emulator
from shared.doctor import run_doctor
from shared.doctor.sources import PROBE_ORDER
from tests.doctor.conftest import CLIENT, DOMAIN, SECRET, app_env, process_env
from tests.support.azurite import DEV_ACCOUNT, DEV_KEY, Azurite
from tests.support.hosted_profile import hosted
from tests.support.ports import banner_base_url

pytestmark = pytest.mark.azurite
REPO = Path(__file__).resolve().parents[2]
_KEY = re.compile(r"^Function key \(default\): (\S+)$", re.MULTILINE)


@dataclass
class Served:
    base: str
    key: str
    log: Path

    def get(self, query: str, *, key: bool = True) -> requests.Response:
        headers = {"x-functions-key": self.key} if key else {}
        return requests.get(f"{self.base}/api/doctor{query}", headers=headers, timeout=120)


@pytest.fixture(scope="module")
def settings_env(emu: Emulator, azurite: Azurite) -> tuple[dict[str, str], str]:
    sas = generate_account_sas(
        DEV_ACCOUNT,
        DEV_KEY,
        ResourceTypes(service=True, container=True, object=True),
        AccountSasPermissions(read=True, write=True, delete=True, list=True, add=True, create=True),
        datetime.now(UTC) + timedelta(hours=1),
    )
    output = {
        "OUTPUT_STORAGE_CONNECTION": f"BlobEndpoint={azurite.blob_endpoint};SharedAccessSignature={sas}",
        "OUTPUT_CONTAINER": f"doctor-{uuid.uuid4().hex[:8]}",
    }
    return {**hosted(client_id=CLIENT), **app_env(emu, output)}, sas  # the app as deployed, pointed at the emulator


@pytest.fixture(scope="module")
def served(settings_env: tuple[dict[str, str], str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    workdir = tmp_path_factory.mktemp("doctor-host")
    log = workdir / "host.log"
    env = {**process_env(settings_env[0]), "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    # Port 0: the host picks a free one and names it in its banner (tests.support.ports).
    command = [sys.executable, "-m", "durable_local", "serve", "--app-dir", str(REPO), "--port", "0"]
    command += ["--store", "memory", "--require-keys", "--drain-timeout", "5"]
    with log.open("wb") as handle:
        process = subprocess.Popen(command, cwd=workdir, stdout=handle, stderr=subprocess.STDOUT, env=env)
    try:
        yield Served(*_wait_for_key(process, log), log)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if os.environ.get("COLLECTOR_E2E_LOG"):
            print(log.read_text(errors="replace"))


def _wait_for_key(process: subprocess.Popen[bytes], log: Path) -> tuple[str, str]:
    """The host's base URL and master key, once it answers."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"host exited early:\n{log.read_text(errors='replace')}")
        found = _KEY.search(log.read_text(errors="replace"))
        base = banner_base_url(log)
        if found and base:
            try:
                requests.get(f"{base}/admin/host/status", timeout=1)
                return base, found.group(1)
            except requests.RequestException:
                pass
        time.sleep(0.05)
    raise RuntimeError(f"host never listened:\n{log.read_text(errors='replace')}")


def outcomes(body: dict[str, Any]) -> dict[str, str]:
    return {r["probe"]: r["outcome"] for r in body["results"]}


def test_the_route_needs_a_function_key(served: Served) -> None:
    assert served.get(f"?tenantId={DOMAIN}", key=False).status_code == 401
    assert served.get(f"?tenantId={DOMAIN}&code=wrong", key=False).status_code == 401


def test_answers_the_same_results_as_a_direct_run_and_leaks_no_secret(
    served: Served, settings_env: tuple[dict[str, str], str]
) -> None:
    env, sas = settings_env

    response = served.get(f"?tenantId={DOMAIN}")

    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["ok"] is True and body["tenantId"] == DOMAIN and body["source"] == "all"
    assert [r["probe"] for r in body["results"]] == list(PROBE_ORDER)
    direct = run_doctor(env, DOMAIN).to_json()
    mine, theirs = outcomes(body), outcomes(direct)
    differ = {probe for probe in mine if mine[probe] != theirs.get(probe)}
    details = [r for r in body["results"] + direct["results"] if r["probe"] in differ]
    assert mine == theirs, details  # the details say why a probe differed
    seen = response.text + served.log.read_text(errors="replace")
    for secret in (SECRET, sas.split("sig=")[1][:20], DEV_KEY):
        assert secret not in seen
    assert "eyJ" not in seen


def test_a_failure_mode_is_answered_200_with_the_fix(served: Served, emu: Emulator) -> None:
    emu.config.exchange.anchor_domain = "contosoltd.onmicrosoft.com"
    try:
        response = served.get(f"?tenantId={DOMAIN}&source=exchange&timeoutSeconds=60")
    finally:
        emu.config.exchange.anchor_domain = None

    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is False and body["source"] == "exchange"
    anchor = next(r for r in body["results"] if r["probe"] == "exchange.anchor")
    assert anchor["outcome"] == "failed" and "initial domain" in anchor["fix"]
    assert not any(r["probe"].startswith("graph.") for r in body["results"])


@pytest.mark.parametrize(
    ("query", "field", "rule"),
    [
        ("", "tenantId", "required"),
        ("?tenantId=%20contoso.onmicrosoft.com", "tenantId", "whitespace"),
        ("?tenantId=contoso..com", "tenantId", "format"),
        ("?tenantId=contoso.onmicrosoft.com&source=both", "source", "choice"),
        ("?tenantId=contoso.onmicrosoft.com&timeoutSeconds=soon", "timeoutSeconds", "type"),
        ("?tenantId=contoso.onmicrosoft.com&timeoutSeconds=5", "timeoutSeconds", "range"),
        ("?tenantId=contoso.onmicrosoft.com&timeoutSeconds=600", "timeoutSeconds", "range"),
    ],
)
def test_bad_parameters_are_a_400_naming_them_and_nothing_is_probed(
    served: Served, emu: Emulator, query: str, field: str, rule: str
) -> None:
    before = sum(emu.stats.requests.values())

    response = served.get(query)

    assert response.status_code == 400
    assert response.json()["error"]["field"] == field and response.json()["error"]["rule"] == rule
    assert sum(emu.stats.requests.values()) == before
