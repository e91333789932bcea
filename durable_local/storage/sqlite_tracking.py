"""The Instances and History tables on SQLite.

Tables: ``instances`` (the record as JSON plus the columns queries filter on), ``history`` (one row per event,
keyed by instance id and sequence number, with its ``execution_id``) and ``history_sentinels`` (one per
instance: execution id, ETag, IsCheckpointComplete, checkpoint time). Each public method is one transaction;
a history batch and its sentinel commit together, as one Azure entity-group batch does.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from durable_local.model import InstanceRecord
from durable_local.ports import (
    Clock,
    EtagConflictError,
    HistoryBatch,
    InstancePage,
    InstanceQuery,
    OrchestrationHistory,
)
from durable_local.storage.codec import (
    decode_record,
    dumps,
    encode_continuation,
    encode_record,
    format_utc,
    normalize_record,
    parse_utc,
)
from durable_local.storage.sqlite_db import SqliteDatabase
from durable_local.storage.tracking_rules import merge_created_time, new_etag, validate_batch, validate_query


class SqliteTrackingStore:
    """``TrackingStore`` over a ``SqliteDatabase``. Instance ids are compared case-sensitively."""

    def __init__(self, db: SqliteDatabase, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    # History -------------------------------------------------------------------------------------
    def get_history(self, instance_id: str, expected_execution_id: str | None = None) -> OrchestrationHistory:
        with self._db.reading() as conn:
            sentinel = conn.execute(
                "SELECT execution_id, etag, checkpoint_complete, checkpoint_time FROM history_sentinels"
                " WHERE instance_id = ?",
                (instance_id,),
            ).fetchone()
            if sentinel is None:
                return OrchestrationHistory(events=[], etag=None, execution_id=expected_execution_id)
            execution_id, etag, complete, checkpoint_time = sentinel
            # As DTFx: an expected execution id that is not the sentinel's belongs to an older generation.
            current = expected_execution_id is None or expected_execution_id == execution_id
            rows = (
                conn.execute(
                    "SELECT event FROM history WHERE instance_id = ? AND execution_id = ? ORDER BY sequence_number",
                    (instance_id, execution_id),
                ).fetchall()
                if current
                else []
            )
        return OrchestrationHistory(
            events=[json.loads(row[0]) for row in rows],
            etag=etag,
            execution_id=execution_id if current else expected_execution_id,
            last_checkpoint_time=None if checkpoint_time is None else parse_utc(checkpoint_time),
            checkpoint_complete=bool(complete),
        )

    def write_history_batch(self, batch: HistoryBatch, expected_etag: str | None) -> str:
        validate_batch(batch)
        rows = [
            (batch.instance_id, batch.first_sequence_number + i, batch.execution_id, dumps(event))
            for i, event in enumerate(batch.events)
        ]
        etag = new_etag()
        with self._db.transaction() as conn:
            sentinel = conn.execute(
                "SELECT execution_id, etag FROM history_sentinels WHERE instance_id = ?", (batch.instance_id,)
            ).fetchone()
            if expected_etag is None and sentinel is not None:
                raise EtagConflictError(f"history of {batch.instance_id!r} already exists (insert conflict)")
            if expected_etag is not None and (sentinel is None or sentinel[1] != expected_etag):
                raise EtagConflictError(f"history of {batch.instance_id!r} changed since it was read (ETag mismatch)")
            if sentinel is not None and sentinel[0] != batch.execution_id:
                # Continue-as-new: the new execution replaces every row of the old one.
                conn.execute("DELETE FROM history WHERE instance_id = ?", (batch.instance_id,))
            conn.executemany(
                "INSERT OR REPLACE INTO history (instance_id, sequence_number, execution_id, event)"
                " VALUES (?, ?, ?, ?)",
                rows,
            )
            checkpoint_time = format_utc(self._clock.now()) if batch.is_final_batch else None
            # A non-final batch keeps the previous checkpoint time (DTFx only stamps the final batch).
            conn.execute(
                "INSERT INTO history_sentinels (instance_id, execution_id, etag, checkpoint_complete, checkpoint_time)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (instance_id) DO UPDATE SET execution_id = excluded.execution_id,"
                " etag = excluded.etag, checkpoint_complete = excluded.checkpoint_complete,"
                " checkpoint_time = COALESCE(excluded.checkpoint_time, history_sentinels.checkpoint_time)",
                (batch.instance_id, batch.execution_id, etag, int(batch.is_final_batch), checkpoint_time),
            )
        return etag

    # Instances -----------------------------------------------------------------------------------
    def get_instance(self, instance_id: str) -> InstanceRecord | None:
        with self._db.reading() as conn:
            row = conn.execute("SELECT record FROM instances WHERE instance_id = ?", (instance_id,)).fetchone()
        return None if row is None else decode_record(row[0])

    def get_instances(self, instance_ids: Iterable[str]) -> list[InstanceRecord]:
        wanted = list(instance_ids)
        found: dict[str, InstanceRecord] = {}
        with self._db.reading() as conn:
            for instance_id in dict.fromkeys(wanted):
                row = conn.execute("SELECT record FROM instances WHERE instance_id = ?", (instance_id,)).fetchone()
                if row is not None:
                    found[instance_id] = decode_record(row[0])
        return [found[instance_id] for instance_id in wanted if instance_id in found]

    def set_new_execution(self, record: InstanceRecord, *, overwrite: bool) -> bool:
        stored = normalize_record(record)
        with self._db.transaction() as conn:
            if not overwrite:
                exists = conn.execute("SELECT 1 FROM instances WHERE instance_id = ?", (stored.instance_id,)).fetchone()
                if exists is not None:
                    return False
            self._write(conn, stored)
        return True

    def update_instance(self, record: InstanceRecord) -> None:
        """Insert-or-merge: writes every column of ``record`` but keeps the stored ``created_time`` while the
        execution id is unchanged (see ``tracking_rules.merge_created_time``)."""
        stored = normalize_record(record)
        with self._db.transaction() as conn:
            row = conn.execute("SELECT record FROM instances WHERE instance_id = ?", (stored.instance_id,)).fetchone()
            existing = None if row is None else decode_record(row[0])
            self._write(conn, merge_created_time(existing, stored))

    def query_instances(self, query: InstanceQuery) -> InstancePage:
        after = validate_query(query)
        clauses: list[str] = []
        params: list[Any] = []
        if after is not None:
            clauses.append("instance_id > ?")
            params.append(after)
        if query.runtime_status:
            clauses.append(f"status IN ({', '.join('?' for _ in query.runtime_status)})")
            params.extend(status.value for status in query.runtime_status)
        if query.created_from is not None:
            clauses.append("created_time >= ?")
            params.append(format_utc(query.created_from))
        if query.created_to is not None:
            clauses.append("created_time <= ?")
            params.append(format_utc(query.created_to))
        if query.instance_id_prefix:
            # LIKE is case-insensitive for ASCII by default; GLOB has its own metacharacters. substr is exact.
            clauses.append("substr(instance_id, 1, ?) = ?")
            params.extend((len(query.instance_id_prefix), query.instance_id_prefix))
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        params.append(query.page_size + 1)
        with self._db.reading() as conn:
            rows = conn.execute(
                f"SELECT instance_id, record FROM instances {where} ORDER BY instance_id LIMIT ?",  # noqa: S608
                params,
            ).fetchall()
        page = [decode_record(row[1]) for row in rows[: query.page_size]]
        token = encode_continuation(page[-1].instance_id) if len(rows) > query.page_size else None
        return InstancePage(instances=page, continuation_token=token)

    def purge_instance(self, instance_id: str) -> bool:
        with self._db.transaction() as conn:
            deleted = conn.execute("DELETE FROM instances WHERE instance_id = ?", (instance_id,)).rowcount
            deleted += conn.execute("DELETE FROM history_sentinels WHERE instance_id = ?", (instance_id,)).rowcount
            deleted += conn.execute("DELETE FROM history WHERE instance_id = ?", (instance_id,)).rowcount
        return deleted > 0

    @staticmethod
    def _write(conn: sqlite3.Connection, record: InstanceRecord) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO instances (instance_id, status, created_time, execution_id, record)"
            " VALUES (?, ?, ?, ?, ?)",
            (
                record.instance_id,
                record.status.value,
                format_utc(record.created_time),
                record.execution_id,
                encode_record(record),
            ),
        )
