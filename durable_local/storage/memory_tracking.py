"""The Instances and History tables in memory (one lock, every method atomic)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from durable_local.model import InstanceRecord
from durable_local.ports import (
    Clock,
    EtagConflictError,
    HistoryBatch,
    InstancePage,
    InstanceQuery,
    OrchestrationHistory,
)
from durable_local.storage.codec import copy_record, dumps, encode_continuation, normalize_record
from durable_local.storage.tracking_rules import (
    matches,
    merge_created_time,
    new_etag,
    validate_batch,
    validate_query,
)


@dataclass(slots=True)
class _History:
    """One instance's history partition: the sentinel's columns and the event rows by sequence number."""

    execution_id: str
    etag: str
    checkpoint_complete: bool
    checkpoint_time: datetime | None
    rows: dict[int, str] = field(default_factory=dict)
    """Each event as JSON text, as a table row holds it: encoded once when written, decoded into a private copy for
    every reader."""


class MemoryTrackingStore:
    """``TrackingStore`` in memory. Instance ids are compared case-sensitively (Azure Table keys are)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._instances: dict[str, InstanceRecord] = {}
        self._histories: dict[str, _History] = {}

    # History -------------------------------------------------------------------------------------
    def get_history(self, instance_id: str, expected_execution_id: str | None = None) -> OrchestrationHistory:
        with self._lock:
            history = self._histories.get(instance_id)
            if history is None:
                return OrchestrationHistory(events=[], etag=None, execution_id=expected_execution_id)
            # As DTFx: an expected execution id that is not the sentinel's belongs to an older generation,
            # so no rows are returned (but the sentinel's ETag and checkpoint columns still are).
            current = expected_execution_id is None or expected_execution_id == history.execution_id
            texts = [history.rows[key] for key in sorted(history.rows)] if current else []
            found = OrchestrationHistory(
                events=[],
                etag=history.etag,
                execution_id=history.execution_id if current else expected_execution_id,
                last_checkpoint_time=history.checkpoint_time,
                checkpoint_complete=history.checkpoint_complete,
            )
        found.events = [json.loads(text) for text in texts]  # outside the lock: the texts never change
        return found

    def write_history_batch(self, batch: HistoryBatch, expected_etag: str | None) -> str:
        validate_batch(batch)
        rows = {batch.first_sequence_number + i: dumps(event) for i, event in enumerate(batch.events)}
        with self._lock:
            history = self._histories.get(batch.instance_id)
            if expected_etag is None:
                if history is not None:
                    raise EtagConflictError(f"history of {batch.instance_id!r} already exists (insert conflict)")
                history = _History(batch.execution_id, "", False, None)
                self._histories[batch.instance_id] = history
            elif history is None or history.etag != expected_etag:
                raise EtagConflictError(f"history of {batch.instance_id!r} changed since it was read (ETag mismatch)")
            if history.execution_id != batch.execution_id:
                # Continue-as-new: the new execution replaces every row of the old one.
                history.rows.clear()
                history.execution_id = batch.execution_id
            history.rows.update(rows)
            history.checkpoint_complete = batch.is_final_batch
            if batch.is_final_batch:
                history.checkpoint_time = self._clock.now()
            history.etag = new_etag()
            return history.etag

    # Instances -----------------------------------------------------------------------------------
    def get_instance(self, instance_id: str) -> InstanceRecord | None:
        with self._lock:
            record = self._instances.get(instance_id)
            return None if record is None else copy_record(record)

    def get_instances(self, instance_ids: Iterable[str]) -> list[InstanceRecord]:
        with self._lock:
            found = (self._instances.get(instance_id) for instance_id in instance_ids)
            return [copy_record(record) for record in found if record is not None]

    def set_new_execution(self, record: InstanceRecord, *, overwrite: bool) -> bool:
        stored = normalize_record(record)
        with self._lock:
            if not overwrite and stored.instance_id in self._instances:
                return False
            self._instances[stored.instance_id] = stored
            return True

    def update_instance(self, record: InstanceRecord) -> None:
        """Insert-or-merge: writes every column of ``record`` but keeps the stored ``created_time`` while the
        execution id is unchanged (see ``tracking_rules.merge_created_time``)."""
        stored = normalize_record(record)
        with self._lock:
            existing = self._instances.get(stored.instance_id)
            self._instances[stored.instance_id] = merge_created_time(existing, stored)

    def query_instances(self, query: InstanceQuery) -> InstancePage:
        after = validate_query(query)
        with self._lock:
            candidates = [
                record
                for instance_id, record in self._instances.items()
                if (after is None or instance_id > after) and matches(record, query)
            ]
        candidates.sort(key=lambda record: record.instance_id)
        page = candidates[: query.page_size]
        token = encode_continuation(page[-1].instance_id) if len(candidates) > query.page_size else None
        return InstancePage(instances=[copy_record(record) for record in page], continuation_token=token)

    def purge_instance(self, instance_id: str) -> bool:
        with self._lock:
            had_row = self._instances.pop(instance_id, None) is not None
            had_history = self._histories.pop(instance_id, None) is not None
            return had_row or had_history
