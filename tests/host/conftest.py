"""Fixtures for the local host tests: serve an app in a subprocess and talk to it over HTTP only."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests

from durable_local.host import LocalHost
from tests.support.ports import banner_base_url

REPO = Path(__file__).resolve().parents[2]
APPS = Path(__file__).resolve().parent / "apps"
TERMINAL = ("Completed", "Failed", "Terminated", "Canceled")
_logs = itertools.count(1)


@dataclass
class ServedApp:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=timeout)


def start_app(
    app: str | Path,
    workdir: Path,
    *,
    store: str | None = None,
    extra: list[str] | None = None,
    env: dict[str, str] | None = None,
    port: int | None = None,
) -> ServedApp:
    # Without a port the host binds a free one itself and names it in its banner (tests.support.ports).
    app_dir = APPS / app if isinstance(app, str) else app
    command = [sys.executable, "-m", "durable_local", "serve", "--app-dir", str(app_dir), "--port", str(port or 0)]
    command += ["--max-polling-interval", "0.1"]
    if store is not None:
        command += ["--store", store]
    command += extra or []
    log_path = workdir / f"host-{port or next(_logs)}.log"
    environment = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1", **(env or {})}
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=workdir, stdout=log, stderr=subprocess.STDOUT, env=environment)
    served = ServedApp(process, port or 0, log_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"host exited with {process.returncode}:\n{served.log()}")
        base = banner_base_url(log_path)
        if base is not None:
            served.port = int(base.rsplit(":", 1)[1])
            try:
                with socket.create_connection(("127.0.0.1", served.port), timeout=0.5):
                    return served
            except OSError:
                pass
        time.sleep(0.05)
    served.stop(signal.SIGKILL)
    raise RuntimeError(f"host did not listen on {port}:\n{served.log()}")


@pytest.fixture
def serve_app(tmp_path: Path) -> Iterator[Callable[..., ServedApp]]:
    started: list[ServedApp] = []

    def factory(app: str | Path, **kwargs: Any) -> ServedApp:
        served = start_app(app, tmp_path, **kwargs)
        started.append(served)
        return served

    yield factory
    for served in started:
        if served.process.poll() is None:
            served.stop(signal.SIGKILL)


@pytest.fixture(scope="module")
def basic_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApp]:
    """The basic sample app on an in-memory store, shared by a module's tests."""
    served = start_app("basic", tmp_path_factory.mktemp("basic"), store="memory")
    yield served
    served.stop()


def wait_for_status(status_url: str, *, timeout: float = 60, statuses: tuple[str, ...] = TERMINAL) -> dict[str, Any]:
    """Poll a statusQueryGetUri until runtimeStatus is one of ``statuses``; returns the last body."""
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = requests.get(status_url, timeout=10)
        body = response.json()
        if body.get("runtimeStatus") in statuses:
            return body
        time.sleep(0.05)
    raise AssertionError(f"instance did not reach {statuses} in {timeout}s; last status {body}")


def start(base_url: str, orchestrator: str, payload: Any = None, instance_id: str | None = None) -> dict[str, Any]:
    """Start through the app's own starter function (SDK client); returns the check-status payload."""
    url = f"{base_url}/api/orchestrators/{orchestrator}" + (f"/{instance_id}" if instance_id else "")
    response = requests.post(url, json=payload, timeout=30)
    assert response.status_code == 202, response.text
    return dict(response.json())


WEBHOOKS = "/runtime/webhooks/durabletask"


@pytest.fixture(scope="module")
def host() -> Iterator[LocalHost]:
    """The basic app on an in-process ``LocalHost`` (memory store), for tests of the management API over HTTP."""
    fields: dict[str, Any] = {"max_queue_polling_interval": timedelta(milliseconds=100)}
    served = LocalHost(APPS / "basic", port=0, store="memory", settings_overrides=fields, drain_timeout=5)
    served.start()
    yield served
    served.stop()


def hook(host: LocalHost, tail: str) -> str:
    return f"{host.base_url}{WEBHOOKS}/{tail}"


def exists(host: LocalHost, instance_id: str) -> bool:
    response = requests.get(hook(host, "instances/" + quote(instance_id, safe="")), timeout=10)
    return response.status_code != 404
