"""The replay port: one orchestration episode, pure (history + new messages in, decisions out).

This is the contract between the replay layer (history JSON, the SDK call, shim emulation) and the
runtime (session manager, dispatchers, stores). It does no I/O: no store, no queue, no clock reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from durable_local.model import (
    FailureDetails,
    FunctionRegistry,
    HistoryEvent,
    RuntimeStatus,
    ScheduledMessage,
    SchedulingMode,
    TaskMessage,
)
from durable_local.replay.execution_cache import ExecutionCache


@dataclass(frozen=True, slots=True)
class ReplaySettings:
    """Knobs the extension passes to the worker or enforces itself (Azure Storage provider defaults)."""

    maximum_short_timer_duration: timedelta = timedelta(days=6)
    long_running_timer_interval: timedelta = timedelta(days=3)
    max_orchestration_actions: int = 100_000
    default_http_async_request_sleep_ms: int = 30_000
    max_entity_operation_batch_size: int = 5000
    """``MaxEntityOperationBatchSize``: operations per entity batch (extension: 5000; 50 on Consumption)."""
    entity_message_reorder_window: timedelta = timedelta(minutes=30)
    """``EntityMessageReorderWindowInMinutes``: window in which entity requests are re-ordered and de-duplicated."""
    include_parameters: bool = False
    """DTFx ``TaskOrchestrationDispatcher.IncludeParameters`` (the extension's ``storeInputsInOrchestrationHistory``):
    keep activity and sub-orchestration inputs in the TaskScheduled / SubOrchestrationInstanceCreated history
    events. Off by default, as in the extension; the messages always carry the inputs."""


@dataclass(slots=True)
class EpisodeInput:
    instance_id: str
    past_events: list[HistoryEvent]
    """Committed history of the current execution (empty before the first episode)."""
    new_messages: list[TaskMessage]
    """This work item's messages, in delivery order (ExecutionStarted first when present)."""
    now: datetime
    """Timestamp of the episode's OrchestratorStarted event (= the orchestration's current_utc_datetime)."""
    registry: FunctionRegistry
    mode: SchedulingMode = SchedulingMode.SHIM
    settings: ReplaySettings = field(default_factory=ReplaySettings)
    new_execution_id: Callable[[], str] | None = None
    """Factory for continue-as-new execution ids (uuid4().hex by default); injectable for golden tests."""
    cache: ExecutionCache | None = None
    """What the previous episode of this execution left (``EpisodeResult.cache``): its past events' JSON and its
    parsed actions, reused where this episode repeats them. Ignored when it belongs to another instance or execution;
    it never changes the result, only the work."""


@dataclass(slots=True)
class EpisodeResult:
    execution_id: str
    """The current execution after the episode (a new one after continue-as-new)."""
    history: list[HistoryEvent]
    """Full history of that execution after the episode."""
    committed_count: int
    """How many leading events of ``history`` were already committed (0 when continue-as-new replaced
    the execution): the checkpoint writes ``history[committed_count:]``."""
    status: RuntimeStatus
    output: str | None = None
    custom_status: str | None = None
    failure: FailureDetails | None = None
    activity_messages: list[TaskMessage] = field(default_factory=list)
    """To the work-item queue: each carries the TaskScheduled event."""
    timer_messages: list[ScheduledMessage] = field(default_factory=list)
    """TimerFired messages for this instance's own control queue, visible at the timer's FireAt."""
    orchestrator_messages: list[TaskMessage] = field(default_factory=list)
    """To other instances' control queues (route by ``instance_id``): sub-orchestration ExecutionStarted,
    raised events (EventSent), and SubOrchestrationInstanceCompleted/Failed for the parent."""
    discarded: list[tuple[TaskMessage, str]] = field(default_factory=list)
    """Messages dropped by reconciliation, with the reason (duplicate start, other execution id, ...)."""
    generation: int = 0
    parent_instance_id: str | None = None
    name: str = ""
    input: str | None = None
    continued_as_new: bool = False
    cache: ExecutionCache | None = None
    """For the next episode of ``execution_id`` (None when the worker was not called or the execution ended)."""
    reused_events: int = 0
    """Past events whose JSON text came from ``EpisodeInput.cache`` instead of being encoded again."""
    reused_actions: int = 0
    """Actions of the worker's answer taken from ``EpisodeInput.cache`` instead of being parsed again."""
    entity_operations: int = 0
    """Entity episodes: the operations the batch ran."""
