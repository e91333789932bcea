"""Rules shared by both tracking stores: query filtering, batch checks and new ETags."""

from __future__ import annotations

import uuid
from dataclasses import replace

from durable_local.model import InstanceRecord
from durable_local.ports import HistoryBatch, InstanceQuery
from durable_local.storage.codec import decode_continuation, require_utc


def new_etag() -> str:
    """A fresh opaque ETag (every sentinel write gets a new one, like Azure Table's timestamp ETags)."""
    return f'W/"{uuid.uuid4().hex}"'


def validate_batch(batch: HistoryBatch) -> None:
    if not batch.instance_id:
        raise ValueError("history batch needs an instance_id")
    if not batch.execution_id:
        raise ValueError("history batch needs an execution_id")
    if batch.first_sequence_number < 0:
        raise ValueError(f"first_sequence_number must be >= 0, got {batch.first_sequence_number}")


def validate_query(query: InstanceQuery) -> str | None:
    """Check the query; returns the instance id to continue after (from the token), if any."""
    if query.page_size < 1:
        raise ValueError(f"page_size must be at least 1, got {query.page_size}")
    if query.created_from is not None:
        require_utc(query.created_from, "created_from")
    if query.created_to is not None:
        require_utc(query.created_to, "created_to")
    return None if query.continuation_token is None else decode_continuation(query.continuation_token)


def matches(record: InstanceRecord, query: InstanceQuery) -> bool:
    """The in-memory form of the filters the SQLite store expresses in SQL (both bounds inclusive)."""
    if query.runtime_status and record.status not in query.runtime_status:
        return False
    if query.created_from is not None and record.created_time < query.created_from:
        return False
    if query.created_to is not None and record.created_time > query.created_to:
        return False
    return not (query.instance_id_prefix and not record.instance_id.startswith(query.instance_id_prefix))


def merge_created_time(existing: InstanceRecord | None, record: InstanceRecord) -> InstanceRecord:
    """``update_instance`` keeps the stored ``created_time`` unless the record starts a new execution.

    The checkpoint writes the whole row (insert-or-merge of every column); only ``created_time`` is kept from
    the existing row while the execution id is unchanged, so a caller that rebuilds the record from history
    cannot move an instance's creation time. A different execution id (continue-as-new, restart) takes the
    record's own ``created_time``.
    """
    if existing is None or existing.execution_id != record.execution_id:
        return record
    if existing.created_time == record.created_time:
        return record
    return replace(record, created_time=existing.created_time)
