"""kill -9 a worker process mid-orchestration; a new Engine on the same SQLite file finishes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from durable_local.clock import SystemClock
from durable_local.engine import Engine
from durable_local.model import RuntimeStatus
from durable_local.storage import open_sqlite_store

from . import sqlite_worker

REPO = Path(__file__).resolve().parents[3]


def test_sigkill_mid_run_then_restart_completes_with_same_output(tmp_path: Path) -> None:
    db = tmp_path / "hub.db"
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.engine.runtime.sqlite_worker", str(db), "killme"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    seen: list[str] = []
    try:
        assert child.stdout is not None
        for line in child.stdout:
            seen.append(line.strip())
            if line.strip() == "done 2":
                break
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
    assert "done 2" in seen, f"child never reached step 2: {seen}"
    assert child.returncode == -signal.SIGKILL

    clock = SystemClock()
    store = open_sqlite_store(db, clock)
    before = store.tracking.get_instance("killme")
    assert before is not None and not before.status.is_terminal
    engine = Engine(sqlite_worker.registry(), store=store, settings=sqlite_worker.settings(), clock=clock)
    engine.start()
    try:
        status = engine.wait_for_completion("killme", 30)
    finally:
        engine.stop(drain_timeout=2)
        store.close()
    assert status is not None and status.runtime_status is RuntimeStatus.COMPLETED
    assert json.loads(status.output or "null") == sqlite_worker.expected_output()
