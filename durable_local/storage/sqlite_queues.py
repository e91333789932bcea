"""Azure Storage Queue semantics on SQLite (table ``queue_messages``; one transaction per call).

Messages are ordered by an autoincrement ``seq`` (insertion order). Timestamps are fixed-width UTC ISO
strings, so ``next_visible_on <= now`` is a plain string comparison that SQLite can evaluate.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta

from durable_local.model import TaskMessage
from durable_local.ports import Clock, MessageGoneError, QueueMessage
from durable_local.storage.codec import decode_task_message, encode_task_message, format_utc, parse_utc
from durable_local.storage.queue_rules import (
    new_message_id,
    new_pop_receipt,
    validate_get_args,
    validate_queue_name,
    validate_timeout,
)
from durable_local.storage.sqlite_db import SqliteDatabase

_SELECT_BY_SEQ = (
    "SELECT message_id, pop_receipt, dequeue_count, inserted_on, next_visible_on, body FROM queue_messages"
    " WHERE seq = ?"
)
_SELECT_BY_ID = (
    "SELECT message_id, pop_receipt, dequeue_count, inserted_on, next_visible_on, body FROM queue_messages"
    " WHERE message_id = ?"
)


def _to_message(row: sqlite3.Row | tuple[str, str, int, str, str, str]) -> QueueMessage:
    message_id, pop_receipt, dequeue_count, inserted_on, next_visible_on, body = row
    return QueueMessage(
        message_id=message_id,
        pop_receipt=pop_receipt,
        dequeue_count=int(dequeue_count),
        inserted_on=parse_utc(inserted_on),
        next_visible_on=parse_utc(next_visible_on),
        body=decode_task_message(body),
    )


class SqliteQueue:
    """A handle on one named queue in a ``SqliteQueueService``."""

    def __init__(self, db: SqliteDatabase, clock: Clock, name: str) -> None:
        self._db = db
        self._clock = clock
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def add(self, message: TaskMessage, *, visibility_delay: timedelta = timedelta(0)) -> str:
        validate_timeout(visibility_delay, "visibility_delay")
        body = encode_task_message(message)
        message_id = new_message_id()
        now = self._clock.now()
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO queue_messages (queue, message_id, pop_receipt, dequeue_count, inserted_on,"
                " next_visible_on, body) VALUES (?, ?, NULL, 0, ?, ?, ?)",
                (self._name, message_id, format_utc(now), format_utc(now + visibility_delay), body),
            )
        return message_id

    def get_messages(self, max_count: int, visibility_timeout: timedelta) -> list[QueueMessage]:
        validate_get_args(max_count, visibility_timeout)
        taken: list[QueueMessage] = []
        with self._db.transaction() as conn:
            # Read "now" inside the lock so that concurrent callers see non-decreasing times.
            now = self._clock.now()
            hidden_until = format_utc(now + visibility_timeout)
            rows = conn.execute(
                "SELECT seq FROM queue_messages WHERE queue = ? AND next_visible_on <= ? ORDER BY seq LIMIT ?",
                (self._name, format_utc(now), max_count),
            ).fetchall()
            for (seq,) in rows:
                receipt = new_pop_receipt()
                conn.execute(
                    "UPDATE queue_messages SET dequeue_count = dequeue_count + 1, pop_receipt = ?,"
                    " next_visible_on = ? WHERE seq = ?",
                    (receipt, hidden_until, seq),
                )
                row = conn.execute(_SELECT_BY_SEQ, (seq,)).fetchone()
                taken.append(_to_message(row))
        return taken

    def delete(self, message_id: str, pop_receipt: str) -> None:
        with self._db.transaction() as conn:
            deleted = conn.execute(
                "DELETE FROM queue_messages WHERE queue = ? AND message_id = ? AND pop_receipt = ?",
                (self._name, message_id, pop_receipt),
            ).rowcount
            if deleted != 1:
                raise MessageGoneError(f"message {message_id} with that pop receipt is not in queue {self._name}")

    def update_visibility(self, message_id: str, pop_receipt: str, visibility_timeout: timedelta) -> QueueMessage:
        validate_timeout(visibility_timeout, "visibility_timeout")
        receipt = new_pop_receipt()
        with self._db.transaction() as conn:
            visible_on = format_utc(self._clock.now() + visibility_timeout)
            updated = conn.execute(
                "UPDATE queue_messages SET pop_receipt = ?, next_visible_on = ?"
                " WHERE queue = ? AND message_id = ? AND pop_receipt = ?",
                (receipt, visible_on, self._name, message_id, pop_receipt),
            ).rowcount
            if updated != 1:
                raise MessageGoneError(f"message {message_id} with that pop receipt is not in queue {self._name}")
            row = conn.execute(_SELECT_BY_ID, (message_id,)).fetchone()
        return _to_message(row)

    def approximate_count(self) -> int:
        with self._db.reading() as conn:
            row = conn.execute("SELECT COUNT(*) FROM queue_messages WHERE queue = ?", (self._name,)).fetchone()
        return int(row[0])


class SqliteQueueService:
    """``QueueService`` over a ``SqliteDatabase``; time comes from ``clock``."""

    def __init__(self, db: SqliteDatabase, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    def get_queue(self, name: str) -> SqliteQueue:
        validate_queue_name(name)
        with self._db.transaction() as conn:
            conn.execute("INSERT OR IGNORE INTO queues (name) VALUES (?)", (name,))
        return SqliteQueue(self._db, self._clock, name)

    def delete_queue(self, name: str) -> None:
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM queue_messages WHERE queue = ?", (name,))
            conn.execute("DELETE FROM queues WHERE name = ?", (name,))

    def queue_names(self) -> list[str]:
        """Names of the existing queues, sorted (diagnostics and tests)."""
        with self._db.reading() as conn:
            return [str(row[0]) for row in conn.execute("SELECT name FROM queues ORDER BY name")]
