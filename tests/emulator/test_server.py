"""The server itself: many concurrent HTTPS connections, and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import requests

from m365_emulator import Emulator
from tests.emulator.helpers import EXCHANGE_SCOPE, GRAPH_SCOPE, T0, TENANT, session_for
from tests.emulator.test_exchange import search

REPO = Path(__file__).resolve().parents[2]


def test_serves_at_least_twenty_concurrent_connections(emu: Emulator) -> None:
    emu.config.exchange.max_concurrent_sessions = 50  # let all of them in
    emu.faults.slow_page_seconds = 0.5  # each Exchange call holds its connection while the others arrive
    sessions = [session_for(emu, EXCHANGE_SCOPE) for _ in range(24)]
    barrier = threading.Barrier(len(sessions))

    def call(session: requests.Session) -> int:
        barrier.wait()
        return search(session, emu, T0, T0 + timedelta(hours=1), SessionId=str(uuid.uuid4()), ResultSize=5).status_code

    with ThreadPoolExecutor(max_workers=len(sessions)) as pool:
        statuses = list(pool.map(call, sessions))
    assert statuses == [200] * 24
    assert emu.stats.peak_concurrency[(TENANT, "exchange")] >= 20


def test_cli_prints_urls_and_a_working_demo_app() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")}
    env["PYTHONPATH"] = str(REPO)
    process = subprocess.Popen(
        [sys.executable, "-m", "m365_emulator", "serve", "--port", "0", "--records-per-hour", "10"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        assert process.stdout is not None
        info: dict[str, str] = {}
        for line in process.stdout:
            if line.strip() == "ready":
                break
            name, _, value = line.partition(" ")
            info[name] = value.strip().split(" ")[0]
        token = requests.post(
            f"{info['base_url']}/{info['tenant_id']}/oauth2/v2.0/token",
            data={
                "grant_type": "client_credentials",
                "client_id": info["client_id"],
                "client_secret": info["client_secret"],
                "scope": GRAPH_SCOPE,
            },
            verify=info["ca_bundle"],
            timeout=10,
        )
        assert token.status_code == 200
        listed = requests.get(
            f"{info['graph_base_url']}/beta/security/auditLog/queries",
            headers={"Authorization": f"Bearer {token.json()['access_token']}"},
            verify=info["ca_bundle"],
            timeout=10,
        )
        assert listed.status_code == 200 and listed.json()["value"] == []
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert process.returncode == 0
