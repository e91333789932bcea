"""The SQLite database that holds queues and tracking tables of one task hub store.

Concurrency choice: **one connection per database, guarded by a lock.** Every public store method takes the
lock and runs exactly one transaction, so calls from many threads of one process are serialised in the
process (SQLite operations here take microseconds; a lock is simpler and faster than a connection per
thread, which would contend on SQLite's own file lock and hit SQLITE_BUSY). Other *processes* opening the
same file are coordinated by SQLite itself: writes use ``BEGIN IMMEDIATE`` and wait up to ``busy_timeout``.

Durability: WAL journal. With ``synchronous=NORMAL`` (the default here) a committed transaction survives the
process being killed (SIGKILL) because the WAL frame is already in the OS before ``COMMIT`` returns; only an
OS crash or power loss can lose the last transactions. Pass ``synchronous="FULL"`` to fsync on every commit.
The next open replays the WAL, and a transaction cut off by a kill is rolled back as a whole.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 10_000
_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS queue_messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    message_id TEXT NOT NULL UNIQUE,
    pop_receipt TEXT,
    dequeue_count INTEGER NOT NULL DEFAULT 0,
    inserted_on TEXT NOT NULL,
    next_visible_on TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS queue_messages_by_queue ON queue_messages (queue, seq);
CREATE TABLE IF NOT EXISTS queues (name TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS instances (
    instance_id TEXT PRIMARY KEY,
    status INTEGER NOT NULL,
    created_time TEXT NOT NULL,
    execution_id TEXT,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS instances_by_created ON instances (created_time);
CREATE TABLE IF NOT EXISTS history_sentinels (
    instance_id TEXT PRIMARY KEY,
    execution_id TEXT NOT NULL,
    etag TEXT NOT NULL,
    checkpoint_complete INTEGER NOT NULL,
    checkpoint_time TEXT
);
CREATE TABLE IF NOT EXISTS history (
    instance_id TEXT NOT NULL,
    sequence_number INTEGER NOT NULL,
    execution_id TEXT NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (instance_id, sequence_number)
);
"""


class SqliteDatabase:
    """A shared, locked connection to one database file, with the schema in place.

    Args:
        path: the database file; parent directories are created.
        synchronous: SQLite ``synchronous`` pragma (``NORMAL`` survives process kills, ``FULL`` power loss).
    """

    def __init__(self, path: str | Path, *, synchronous: str = "NORMAL") -> None:
        if synchronous.upper() not in _SYNCHRONOUS:
            raise ValueError(f"synchronous must be one of {', '.join(_SYNCHRONOUS)}, got {synchronous!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        # isolation_level=None: we issue BEGIN/COMMIT ourselves so each method is exactly one transaction.
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            str(self.path), isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
        )
        self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            logger.warning("SQLite store %s runs in journal mode %s (WAL unavailable)", self.path, mode)
        self._conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        with self.transaction() as conn:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            elif version != SCHEMA_VERSION:
                raise RuntimeError(f"{self.path} has store schema {version}; this engine uses {SCHEMA_VERSION}")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run the block as one write transaction (``BEGIN IMMEDIATE`` … ``COMMIT``, rollback on error)."""
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """Run the block as one read transaction (a consistent snapshot across its statements)."""
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    def close(self) -> None:
        """Close the connection (idempotent). A clean close also checkpoints and removes the WAL file."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError(f"SQLite store {self.path} is closed")
        return self._conn
