"""Start and stop Azurite's blob service for tests (loopback only, telemetry off, in-memory)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
AZURITE_BLOB = REPO / "tools" / "azurite" / "node_modules" / ".bin" / "azurite-blob"

# The well-known development account key Azurite documents for every installation (not a secret).
DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

INSTALL_HINT = (
    "Azurite is not installed. Run `bash scripts/bootstrap.sh` (needs Node.js and npm), "
    "or `cd tools/azurite && npm ci`."
)


@dataclass(frozen=True)
class Azurite:
    host: str
    port: int

    @property
    def blob_endpoint(self) -> str:
        return f"http://{self.host}:{self.port}/{DEV_ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
            f"BlobEndpoint={self.blob_endpoint};"
        )


def _wait_listening(host: str, port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"azurite-blob exited early with code {proc.returncode}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"azurite-blob did not listen on {host}:{port} within {timeout:.0f}s")


@contextmanager
def run_azurite(timeout: float = 30.0) -> Iterator[Azurite]:
    if not AZURITE_BLOB.exists() or shutil.which("node") is None:
        raise RuntimeError(INSTALL_HINT)
    host = "127.0.0.1"
    port = free_port(host)
    workdir = tempfile.mkdtemp(prefix="azurite-")
    proc = subprocess.Popen(
        [
            str(AZURITE_BLOB),
            "--blobHost",
            host,
            "--blobPort",
            str(port),
            "--disableTelemetry",
            "--skipApiVersionCheck",
            "--inMemoryPersistence",
            "--silent",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=workdir,
    )
    try:
        _wait_listening(host, port, proc, timeout)
        yield Azurite(host, port)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
