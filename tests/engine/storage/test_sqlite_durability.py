"""SQLite specifics: survives SIGKILL of a writer, reopens, shares the file with another process."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from durable_local.clock import ManualClock, SystemClock
from durable_local.ports import HistoryBatch
from durable_local.storage import open_memory_store, open_sqlite_store, open_store
from durable_local.storage.memory_queues import MemoryQueueService
from durable_local.storage.sqlite_queues import SqliteQueueService
from tests.engine.storage.conftest import event, message, record

REPO_ROOT = Path(__file__).resolve().parents[3]
BATCH = 5

# The child commits unit after unit and reports each one on stdout only after its commit returned.
WRITER = textwrap.dedent(
    """
    import sys
    from durable_local.clock import SystemClock
    from durable_local.model import InstanceRecord, RuntimeStatus, TaskMessage
    from durable_local.ports import HistoryBatch
    from durable_local.storage import open_sqlite_store

    store = open_sqlite_store(sys.argv[1], SystemClock())
    clock = SystemClock()
    queue = store.queues.get_queue("hub-control-01")
    i = 0
    while True:
        iid = f"i-{i:06d}"
        now = clock.now()
        store.tracking.set_new_execution(
            InstanceRecord(iid, "orch", "e", RuntimeStatus.PENDING, now, now), overwrite=False)
        events = [{"EventType": 4, "EventId": n, "Name": "a"} for n in range(int(sys.argv[2]))]
        store.tracking.write_history_batch(HistoryBatch(iid, "e", 0, events, True), None)
        queue.add(TaskMessage(iid, "e", {"EventType": 0, "EventId": -1}, i))
        sys.stdout.write(f"{i}\\n")
        sys.stdout.flush()
        i += 1
    """
)


def _run_writer_and_kill(db: Path, wait_for: int) -> list[int]:
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), str(BATCH)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    reported: list[int] = []
    try:
        assert child.stdout is not None
        while len(reported) < wait_for:
            line = child.stdout.readline()
            if not line:
                pytest.fail(f"writer exited early: {child.stderr.read() if child.stderr else ''}")
            reported.append(int(line))
        os.kill(child.pid, signal.SIGKILL)  # mid-stream: the child is still writing
    finally:
        child.kill()
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    return reported


def test_committed_rows_survive_sigkill_and_db_stays_usable(tmp_path: Path) -> None:
    db = tmp_path / "hub" / "store.db"
    reported = _run_writer_and_kill(db, wait_for=60)

    store = open_sqlite_store(db, ManualClock(SystemClock().now()))
    try:
        tracking = store.tracking
        for i in reported:
            iid = f"i-{i:06d}"
            assert tracking.get_instance(iid) is not None, iid
            history = tracking.get_history(iid)
            assert [e["EventId"] for e in history.events] == list(range(BATCH)), iid
        queue = store.queues.get_queue("hub-control-01")
        bodies = []
        while got := queue.get_messages(32, timedelta(minutes=5)):
            bodies.extend(m.body.sequence_number for m in got)
        assert set(reported) <= set(bodies)
        # Whatever the kill interrupted is all or nothing: every history present is a whole batch.
        conn = sqlite3.connect(db)
        counts = conn.execute("SELECT instance_id, COUNT(*) FROM history GROUP BY instance_id").fetchall()
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
        assert counts and all(count == BATCH for _, count in counts)
        # And the database takes new writes.
        tracking.update_instance(record("after-crash"))
        etag = tracking.write_history_batch(HistoryBatch("after-crash", "x", 0, [event(0)], True), None)
        assert tracking.get_history("after-crash").etag == etag
    finally:
        store.close()


def test_second_process_writes_while_first_is_open(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    store = open_sqlite_store(db, SystemClock())
    other = textwrap.dedent(
        """
        import sys
        from durable_local.clock import SystemClock
        from durable_local.model import TaskMessage
        from durable_local.storage import open_sqlite_store
        store = open_sqlite_store(sys.argv[1], SystemClock())
        queue = store.queues.get_queue("hub-workitems")
        for n in range(200):
            queue.add(TaskMessage("child", None, {"EventType": 4, "EventId": n}, n))
        store.close()
        """
    )
    try:
        child = subprocess.Popen([sys.executable, "-c", other, str(db)], cwd=REPO_ROOT)
        queue = store.queues.get_queue("hub-workitems")
        for n in range(200):
            queue.add(message("parent", n))
        assert child.wait(timeout=60) == 0
        assert queue.approximate_count() == 400
    finally:
        store.close()


def test_reopen_after_clean_close_keeps_everything(tmp_path: Path) -> None:
    clock = ManualClock(SystemClock().now())
    path = tmp_path / "a" / "b" / "hub.db"
    with open_store(str(path), clock) as store:
        store.queues.get_queue("hub-control-00").add(message(n=3), visibility_delay=timedelta(seconds=10))
        store.tracking.update_instance(record("x"))
        store.tracking.write_history_batch(HistoryBatch("x", "exec1", 0, [event(0)], False), None)
    assert path.exists()
    with open_store(str(path), clock) as store:
        queue = store.queues.get_queue("hub-control-00")
        assert queue.get_messages(1, timedelta(seconds=5)) == []  # the delay survived the reopen
        clock.advance(10)
        assert [m.body for m in queue.get_messages(1, timedelta(seconds=5))] == [message(n=3)]
        assert store.tracking.get_instance("x") == record("x")
        assert store.tracking.get_history("x").checkpoint_complete is False


def test_open_store_spec(tmp_path: Path) -> None:
    clock = ManualClock(SystemClock().now())
    with open_store(" Memory ", clock) as store:
        assert isinstance(store.queues, MemoryQueueService)
    with open_store(str(tmp_path / "x.db"), clock) as store:
        assert isinstance(store.queues, SqliteQueueService)
        assert store.description == str(tmp_path / "x.db")
    with pytest.raises(ValueError, match="memory"):
        open_store("  ", clock)
    closed = open_sqlite_store(tmp_path / "y.db", clock)
    closed.close()
    closed.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        closed.tracking.get_instance("x")
    assert open_memory_store(clock).description == "memory"
