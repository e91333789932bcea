"""The end-to-end rig: the M365 emulator (HTTPS, msal + requests against it) and this repository's function app served
by ``python -m durable_local serve`` (SHIM mode, the default) in a subprocess, talked to over real loopback HTTP.

Every host runs the hosted profile (``tests/support/hosted_profile.py``: what the deployment sets, the tenant budget's
key and the budget included) with the named local conveniences ``E2E_CONVENIENCES`` (short polls and back-offs, an
output folder, ...); a test that runs unlike Azure says so with ``deviations``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

from m365_emulator import Emulator
from tests.support.hosted_profile import E2E_CONVENIENCES, checked, hosted_env
from tests.support.ports import banner_base_url

REPO = Path(__file__).resolve().parents[2]
APP_DIR = Path(os.environ.get("COLLECTOR_E2E_APP_DIR") or REPO)
"""The app the host serves: this checkout, or another (``COLLECTOR_E2E_APP_DIR``) to show a test fails on older code."""
TENANT = "3c9e1f2a-5b6d-4e7f-8a90-1b2c3d4e5f60"
DOMAIN = "contoso.onmicrosoft.com"
"""The tenant's initial domain (the emulator's default): Exchange collections name the tenant by it."""
CLIENT = "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a"
SECRET = "e2e-acceptance-secret"
START = datetime(2024, 6, 3, tzinfo=UTC)
TERMINAL = ("Completed", "Failed", "Terminated")
WEBHOOKS = "/runtime/webhooks/durabletask"


def base_env(
    emulator: Emulator,
    output: Path,
    app_dir: Path = REPO,
    *,
    use: tuple[str, ...] = E2E_CONVENIENCES,
    deviations: dict[str, str] | None = None,
) -> dict[str, str]:
    """The process environment of a collector host: the hosted profile pointing at the emulator, the conveniences
    named in ``use``, and ``deviations`` from the profile (a test that does not run as deployed says so here)."""
    endpoints = {
        "AUDIT_AUTHORITY_HOST": emulator.authority_host,
        "AUDIT_GRAPH_BASE_URL": emulator.graph_base_url,
        "AUDIT_EXCHANGE_BASE_URL": emulator.exchange_base_url,
        "AUDIT_FEED_BASE_URL": emulator.feed_base_url,
        "AUDIT_CA_BUNDLE": str(emulator.ca_bundle),
    }
    settings = hosted_env(
        client_id=CLIENT, client_secret=SECRET, endpoints=endpoints, output=output, use=use, deviations=deviations
    )
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("AUDIT_", "OUTPUT_", "COLLECTOR_"))}
    env = {**inherited, "PYTHONPATH": str(app_dir), "PYTHONUNBUFFERED": "1", **settings}
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):  # would override the emulator's CA for msal
        env.pop(name, None)
    return env


@dataclass
class Host:
    """A running local host: its base URL, output folder and log."""

    base: str
    output: Path
    log: Path
    pid: int = 0
    """The host process (benchmarks read its CPU time)."""

    # -- the collections API ------------------------------------------------------------------------------------
    def post(self, body: Any, *, raw: bytes | None = None) -> requests.Response:
        if raw is not None:
            return requests.post(f"{self.base}/api/collections", data=raw, timeout=30)
        return requests.post(f"{self.base}/api/collections", json=body, timeout=30)

    def post_path(self, path: str) -> requests.Response:
        return requests.post(f"{self.base}{path}", timeout=30)

    def summary(self, collection_id: str) -> dict[str, Any]:
        response = requests.get(f"{self.base}/api/collections/{collection_id}", timeout=30)
        return response.json()  # type: ignore[no-any-return]

    def wait(self, collection_id: str, *, limit_seconds: float = 240.0) -> dict[str, Any]:
        """Follows the summary until the collection ends (a bound on a hung run, not a speed assertion)."""
        deadline = time.monotonic() + limit_seconds
        summary: dict[str, Any] = {}
        while time.monotonic() < deadline:
            summary = self.summary(collection_id)
            if summary.get("runtimeStatus") in TERMINAL:
                return summary
            time.sleep(0.25)
        raise AssertionError(f"collection {collection_id} never finished: {summary}\n{self.log_tail()}")

    # -- the Durable management API -----------------------------------------------------------------------------
    def instances(self) -> list[dict[str, Any]]:
        """Every instance, through the Durable list API (following continuation tokens)."""
        found: list[dict[str, Any]] = []
        headers: dict[str, str] = {}
        while True:
            response = requests.get(f"{self.base}{WEBHOOKS}/instances", headers=headers, timeout=30)
            assert response.status_code == 200, response.text
            found += response.json()
            token = response.headers.get("x-ms-continuation-token")
            if not token:
                return found
            headers = {"x-ms-continuation-token": token}

    def status(self, instance_id: str, *, history: bool = False) -> dict[str, Any]:
        params = {"showHistory": "true", "showInput": "false"} if history else {}
        response = requests.get(f"{self.base}{WEBHOOKS}/instances/{instance_id}", params=params, timeout=30)
        return response.json()  # type: ignore[no-any-return]

    # -- output -------------------------------------------------------------------------------------------------
    def folder(self, collection_id: str) -> Path:
        """The collection's output folder, under the tenant as the request named it (GUID or initial domain)."""
        found = [p for p in (self.output / TENANT, self.output / DOMAIN) if (p / collection_id).exists()]
        return (found[0] if found else self.output / TENANT) / collection_id

    def chunk_ids(self, collection_id: str) -> list[str]:
        """Record ids of every chunk object of a collection written to the output folder (in file order)."""
        ids: list[str] = []
        for path in sorted((self.folder(collection_id) / "chunks").glob("*.jsonl")):
            if not path.name.endswith(".quarantine.jsonl"):
                ids += [json.loads(line)["id"] for line in path.read_text().splitlines()]
        return ids

    def manifest(self, collection_id: str) -> dict[str, Any]:
        return json.loads((self.folder(collection_id) / "manifest.json").read_text())  # type: ignore[no-any-return]

    def written_files(self) -> list[Path]:
        return [p for p in self.output.rglob("*") if p.is_file()] if self.output.exists() else []

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@contextmanager
def serve(
    emulator: Emulator,
    workdir: Path,
    extra_env: dict[str, str] | None = None,
    extra_args: tuple[str, ...] = (),
    *,
    app_dir: Path = APP_DIR,
    clock_file: Path | None = None,
    store: str = "memory",
    use: tuple[str, ...] = E2E_CONVENIENCES,
    deviations: dict[str, str] | None = None,
) -> Iterator[Host]:
    """Serve the collector app on the local host (SHIM mode, memory store, short polling) in a subprocess.

    ``app_dir`` serves another checkout of this repository (its engine and app), e.g. a baseline for a benchmark.
    ``clock_file``: the host and the app run on the wall clock plus the offset this file holds (an
    ``OffsetFileClock``; give the emulator the same clock), so a test moves their time by advancing it.
    ``store``: ``memory`` or a SQLite file (a host killed and started again on it resumes its orchestrations).
    ``use``: the local conveniences (``tests/support/hosted_profile.py``); ``deviations``: hosted settings this test
    runs otherwise ("" unsets one); ``extra_env`` may tune anything else but may not change those.
    """
    output = workdir / "output"
    env = base_env(emulator, output, app_dir, use=use, deviations=deviations)
    env.update(checked(extra_env, base=env))
    if clock_file is not None:
        env["COLLECTOR_CLOCK_FILE"] = str(clock_file)
        extra_args = (*extra_args, "--clock-file", str(clock_file))
    log_path = workdir / "host.log"
    # Port 0: the host binds a free port itself and says which in its banner, so no other process (a parallel test
    # worker's host, Azurite, an emulator) can take it between a pick and the bind.
    command = [sys.executable, "-m", "durable_local", "serve", "--app-dir", str(app_dir), "--port", "0"]
    command += ["--store", store, "--max-polling-interval", "0.02", "--drain-timeout", "5", *extra_args]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=workdir, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        host = Host(_wait_listening(process, log_path), output, log_path, process.pid)
        yield host
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        if os.environ.get("COLLECTOR_E2E_LOG"):
            print(log_path.read_text(errors="replace"))


def _wait_listening(process: subprocess.Popen[bytes], log_path: Path) -> str:
    """The host's base URL once it answers (its banner names the port it bound)."""
    deadline = time.monotonic() + 60
    base = ""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"host exited early:\n{log_path.read_text(errors='replace')}")
        base = base or banner_base_url(log_path) or ""
        if base:
            try:
                requests.get(f"{base}/admin/host/status", timeout=1)
                return base
            except requests.RequestException:
                pass
        time.sleep(0.05)
    raise RuntimeError(f"host never listened:\n{log_path.read_text(errors='replace')}")


def body(end: datetime, *, start: datetime = START, interval: int = 60, k: int = 2, **extra: Any) -> dict[str, Any]:
    """A valid collection request over [start, end); Exchange collections name the tenant by its initial domain."""
    return {
        "tenantId": DOMAIN if extra.get("source") == "exchange" else TENANT,
        "startDate": start.isoformat(),
        "endDate": end.isoformat(),
        "intervalMinutes": interval,
        "maxConcurrency": k,
        **extra,
    }
