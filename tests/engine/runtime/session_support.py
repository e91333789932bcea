"""Helpers of the session manager tests: a manager over the real memory store, Instances rows, waits."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

from durable_local.model import InstanceRecord, RuntimeStatus
from durable_local.sessions.manager import OrchestrationSessionManager
from durable_local.settings import EngineSettings
from durable_local.storage import StoreBundle

from .conftest import T0, Queues


def make_manager(
    store: StoreBundle, settings: EngineSettings, queues: Queues, **kwargs: object
) -> OrchestrationSessionManager:
    return OrchestrationSessionManager(settings, store.tracking, queues.clock, pending=queues.tracker, **kwargs)  # type: ignore[arg-type]


def instance_row(
    instance_id: str, execution_id: str | None, status: RuntimeStatus, generation: int = 0
) -> InstanceRecord:
    return InstanceRecord(
        instance_id=instance_id,
        name="orch",
        execution_id=execution_id,
        status=status,
        created_time=T0,
        last_updated_time=T0,
        generation=generation,
    )


def no_session_until(manager: OrchestrationSessionManager, condition: Callable[[], bool], timeout: float = 20) -> bool:
    """Poll ``get_next_session`` (each poll must open no session) until ``condition`` holds; False on time-out.

    Waits for the background prefetch by condition, not by a fixed short timeout that a loaded CI machine misses.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert manager.get_next_session(timeout=0.02) is None
        if condition():
            return True
    return False


def visible_now(queues: Queues) -> int:
    batch = queues.raw.get_messages(32, timedelta(seconds=1))
    for m in batch:  # put them straight back
        queues.raw.update_visibility(m.message_id, m.pop_receipt, timedelta(0))
    return len(batch)
