"""ExecutionStarted de-duplication rules of the seed (``DedupeExecutionStartedMessagesAsync``), as pure functions.

Starts are always enqueued *before* the client writes the Instances row, so a start whose execution id does not
match the row is either early (the row is on its way: defer) or redundant (scheduled after the row: discard).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from durable_local.history import parse_timestamp
from durable_local.model import InstanceRecord, RuntimeStatus
from durable_local.ports import QueueMessage

Verdict = Literal["keep", "discard", "defer"]

MAX_START_DEQUEUE_COUNT = 10
"""At this dequeue count an unmatched start is discarded (the client must have failed and seen it)."""


def dedupe_verdict(message: QueueMessage, remote: InstanceRecord | None, visibility_timeout: timedelta) -> Verdict:
    """``"keep"``, ``"discard"`` or ``"defer"`` for one top-level ExecutionStarted against its Instances row."""
    local_execution = (message.body.execution_id or "").lower()
    if remote is not None and (remote.execution_id is None or local_execution == remote.execution_id.lower()):
        # Happy path: the message matches the row (or the row predates execution ids).
        return "keep"
    generation = int(message.body.event.get("Generation") or 0)
    if (
        remote is not None
        and generation == remote.generation
        and is_scheduled_after_instance_update(message, remote, visibility_timeout)
    ):
        return "discard"
    if message.dequeue_count >= MAX_START_DEQUEUE_COUNT:
        return "discard"
    # Unknown yet (the row may still be on its way): abandon and look again later.
    return "defer"


def is_scheduled_after_instance_update(
    message: QueueMessage, remote: InstanceRecord, visibility_timeout: timedelta
) -> bool:
    """The seed's ``IsScheduledAfterInstanceUpdate``."""
    timestamp = message.body.event.get("Timestamp")
    if timestamp and remote.created_time < parse_timestamp(str(timestamp)) and remote.status is RuntimeStatus.PENDING:
        # A Pending row older than the message: the same machine stamped both, so no clock skew.
        return True
    if message.dequeue_count <= 1:
        # Only a re-inserted message has a re-insertion time to compare.
        return False
    # Assumes the visibility timeout did not change meaningfully since the message was (re)inserted.
    reinserted = message.next_visible_on - visibility_timeout
    return reinserted > remote.created_time
