"""``python -m collector_local doctor`` in a subprocess, against the emulator (real HTTPS) and Azurite: one line per
probe, exit code 0 only when nothing failed, settings from the environment plus ``local.settings.json``, and never a
secret (client secret, account key, SAS signature, token) in what it prints."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas

from m365_emulator import Emulator
from shared.doctor.graph_probe import GRAPH_PROBES
from shared.doctor.sources import PROBE_ORDER
from tests.doctor.conftest import CLIENT, DOMAIN, SECRET, app_env, folder_output, process_env
from tests.support.azurite import DEV_ACCOUNT, DEV_KEY, Azurite

REPO = Path(__file__).resolve().parents[2]


def run_cli(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI with ``env`` as its environment; ``--app-dir`` defaults to ``cwd`` (no local.settings.json there), so
    a developer's own local.settings.json in the repository never leaks into a test."""
    app_dir = [] if "--app-dir" in args else ["--app-dir", str(cwd)]
    return subprocess.run(
        [sys.executable, "-m", "collector_local", "doctor", *args, *app_dir],
        cwd=cwd,
        env={**process_env(env), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_no_secret(text: str, *secrets: str) -> None:
    for secret in (SECRET, *secrets):
        assert secret not in text
    assert "eyJ" not in text  # the start of every JWT (base64 of '{"')
    assert "sig=" not in text.lower() and "accountkey" not in text.lower()


def sas_output(azurite: Azurite) -> tuple[dict[str, str], str]:
    sas = generate_account_sas(
        DEV_ACCOUNT,
        DEV_KEY,
        ResourceTypes(service=True, container=True, object=True),
        AccountSasPermissions(read=True, write=True, delete=True, list=True, add=True, create=True),
        datetime.now(UTC) + timedelta(hours=1),
    )
    connection = f"BlobEndpoint={azurite.blob_endpoint};SharedAccessSignature={sas}"
    return {"OUTPUT_STORAGE_CONNECTION": connection, "OUTPUT_CONTAINER": f"doctor-{uuid.uuid4().hex[:8]}"}, sas


@pytest.mark.azurite
def test_all_ok_prints_one_line_per_probe_and_exits_0(emu: Emulator, azurite: Azurite, tmp_path: Path) -> None:
    output, sas = sas_output(azurite)

    done = run_cli(app_env(emu, output), "--tenant", DOMAIN, cwd=tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[1] for line in lines[:-1]] == list(PROBE_ORDER)
    assert all(line.startswith("OK ") for line in lines[:-1])
    assert lines[-1].endswith("nothing failed") and f"{len(PROBE_ORDER)} ok, 0 failed, 0 warnings" in lines[-1]
    assert_no_secret(done.stdout + done.stderr, sas.split("sig=")[1][:20], DEV_KEY)


@pytest.mark.azurite
def test_json_output_and_a_failure_exit_code_without_leaking_the_wrong_secret(
    emu: Emulator, azurite: Azurite, tmp_path: Path
) -> None:
    output, sas = sas_output(azurite)
    wrong = "Wrong~Secret-" + uuid.uuid4().hex

    done = run_cli(app_env(emu, output, AUDIT_CLIENT_SECRET=wrong), "--tenant", DOMAIN, "--json", cwd=tmp_path)

    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["ok"] is False and report["tenantId"] == DOMAIN
    by_probe = {r["probe"]: r for r in report["results"]}
    assert list(by_probe) == list(PROBE_ORDER)
    assert by_probe["graph.token"]["outcome"] == "failed" and "AUDIT_CLIENT_SECRET" in by_probe["graph.token"]["fix"]
    assert by_probe["storage"]["outcome"] == "ok"
    assert_no_secret(done.stdout + done.stderr, wrong, sas.split("sig=")[1][:20])


def test_settings_come_from_local_settings_json_and_the_environment_wins(emu: Emulator, tmp_path: Path) -> None:
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    values = {"AUDIT_CLIENT_ID": CLIENT, "AUDIT_CLIENT_SECRET": "file-secret-that-is-wrong"}
    (app_dir / "local.settings.json").write_text(json.dumps({"IsEncrypted": False, "Values": values}))
    env = app_env(emu, folder_output(tmp_path / "out"))
    del env["AUDIT_CLIENT_ID"]  # only in the file

    wins = run_cli(env, "--tenant", DOMAIN, "--source", "graph", "--app-dir", str(app_dir), cwd=tmp_path)
    del env["AUDIT_CLIENT_SECRET"]  # now the file's (wrong) secret is used
    loses = run_cli(env, "--tenant", DOMAIN, "--source", "graph", "--app-dir", str(app_dir), cwd=tmp_path)

    assert wins.returncode == 0, wins.stdout + wins.stderr
    probed = [line.split()[1] for line in wins.stdout.splitlines()[:-1]]
    assert probed == ["settings", "tenant", "storage", *GRAPH_PROBES]
    assert loses.returncode == 1 and "FAILED   graph.token" in loses.stdout
    assert_no_secret(wins.stdout + wins.stderr + loses.stdout + loses.stderr, "file-secret-that-is-wrong")


def test_a_bad_tenant_is_refused_before_anything_runs(emu: Emulator, tmp_path: Path) -> None:
    requests_before = sum(emu.stats.requests.values())

    done = run_cli(app_env(emu, folder_output(tmp_path)), "--tenant", " contoso.onmicrosoft.com", cwd=tmp_path)

    assert done.returncode == 2
    assert done.stderr.startswith("--tenant: tenantId must not start or end with whitespace")
    assert done.stdout == ""
    assert sum(emu.stats.requests.values()) == requests_before
