"""Runtime settings of the local durable engine, with DTFx Azure Storage defaults.

Each field names the ``AzureStorageOrchestrationServiceSettings`` (or Durable extension ``durableTask``)
setting it mirrors. Defaults are the extension's, except where noted; tests shrink the polling intervals
and delays so that nothing waits for real seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from durable_local.model import SchedulingMode
from durable_local.sessions.partitioning import MAX_PARTITION_COUNT, MIN_PARTITION_COUNT

_ZERO = timedelta(0)


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """How the engine polls, buffers, and schedules work.

    Durations are ``timedelta``. All are validated in ``__post_init__``; a bad value raises ``ValueError``
    naming the field and the rule.
    """

    hub_name: str = "TestHubName"
    """``TaskHubName``; queue names are derived from it in lower case."""
    partition_count: int = 4
    """``PartitionCount``: number of control queues, 1..16. Changing it for an existing hub is unsupported."""
    control_queue_batch_size: int = 32
    """``ControlQueueBatchSize``: messages fetched per control-queue read (Azure max 32)."""
    control_queue_buffer_threshold: int = 256
    """``ControlQueueBufferThreshold``: stop reading control queues while this many messages are buffered
    (DTFx default 64, the Durable extension uses 256)."""
    control_queue_visibility_timeout: timedelta = timedelta(minutes=5)
    """``ControlQueueVisibilityTimeout``: how long a dequeued control message stays hidden."""
    work_item_visibility_timeout: timedelta = timedelta(minutes=5)
    """``WorkItemQueueVisibilityTimeout``: same for activity messages (renewed while the activity runs)."""
    max_concurrent_activities: int = 10
    """``MaxConcurrentTaskActivityWorkItems`` (``maxConcurrentActivityFunctions``), per worker."""
    max_concurrent_orchestrations: int = 100
    """``MaxConcurrentTaskOrchestrationWorkItems`` (``maxConcurrentOrchestratorFunctions``), per worker."""
    orchestration_worker_threads: int = 1
    """Threads that run episodes; capped by ``max_concurrent_orchestrations``. The SDK call is CPU-bound Python
    holding the GIL, so extra threads add no throughput and create lock convoys on the store
    (``bench/engine_overhead.py``: 20 instances, 96 episodes/s with 1 thread, 78 with 2, 73 with 4)."""
    max_history_events: int | None = None
    """``MaxHistoryEvents`` (seed): a prefetched history longer than this terminates the orchestration."""
    max_queue_polling_interval: timedelta = timedelta(seconds=30)
    """``MaxQueuePollingInterval``: ceiling of the empty-queue polling back-off."""
    min_queue_polling_interval: timedelta = timedelta(milliseconds=50)
    """First step of the empty-queue back-off (DTFx ``BackoffPollingHelper`` starts at 50 ms)."""
    buffer_full_delay: timedelta = timedelta(seconds=1)
    """Pause of a dequeue loop while the buffer threshold is reached (DTFx: 1 s)."""
    prefetch_retry_delay: timedelta = timedelta(seconds=5)
    """Pause before retrying a failed history prefetch (seed: 5 s)."""
    requeue_delay: timedelta = timedelta(milliseconds=200)
    """Delay before re-queueing a batch for another generation when the ready queue is empty (seed: 200 ms)."""
    dequeue_error_delay: timedelta = timedelta(seconds=1)
    """Pause after an unexpected error in a dequeue loop (seed: 1 s)."""
    drain_poll_interval: timedelta = timedelta(milliseconds=500)
    """How often ``drain`` checks whether a partition still has active sessions (seed: 500 ms)."""
    drain_timeout: timedelta = timedelta(seconds=30)
    """Default bound of a partition drain on shutdown (TablePartitionManager waits up to 10 min)."""
    disable_execution_started_dedup: bool = False
    """``DisableExecutionStartedDeduplication``: opt out of the ExecutionStarted de-duplication."""
    scheduling_mode: SchedulingMode = SchedulingMode.SHIM
    """How SDK actions become scheduled work: faithful to the extension's shim, or idealised."""
    store_inputs_in_orchestration_history: bool = False
    """``storeInputsInOrchestrationHistory`` (extension, default false): write activity and sub-orchestration
    inputs into their TaskScheduled / SubOrchestrationInstanceCreated history events (DTFx ``IncludeParameters``)."""
    history_batch_size: int = 99
    """Events per history write (Azure Table entity-group batch: 100 rows minus the sentinel)."""
    max_entity_operation_batch_size: int = 5000
    """``MaxEntityOperationBatchSize``: entity operations per batch (extension default 5000; 50 on Consumption)."""
    entity_message_reorder_window: timedelta = timedelta(minutes=30)
    """``EntityMessageReorderWindowInMinutes``: entity requests are ordered and de-duplicated within this window."""
    use_separate_queue_for_entity_work_items: bool = False
    """``UseSeparateQueueForEntityWorkItems`` (seed): entity batches wait in their own ready queue and an entity
    dispatcher takes them (``GetNextSessionAsync(entitiesOnly: true)``). The extension turns it on only for
    .NET isolated, Java and custom handlers; for Python it is off and one dispatcher takes both."""
    entity_worker_threads: int = 1
    """Threads of the entity dispatcher when ``use_separate_queue_for_entity_work_items`` is on."""
    overridable_existing_instance_states: str = "NonRunningStates"
    """``overridableExistingInstanceStates`` (extension): ``NonRunningStates`` passes DTFx the dedupe statuses
    Running, ContinuedAsNew, Pending and Suspended, so a start over such an instance is refused; ``AnyState`` passes
    none, so a start with an existing id replaces the instance whatever its state."""

    def __post_init__(self) -> None:
        if not self.hub_name or not self.hub_name.replace("-", "").isalnum():
            raise ValueError(f"hub_name must be non-empty letters, digits or '-', got {self.hub_name!r}")
        _int_range("partition_count", self.partition_count, MIN_PARTITION_COUNT, MAX_PARTITION_COUNT)
        _int_range("control_queue_batch_size", self.control_queue_batch_size, 1, 32)
        _int_range("control_queue_buffer_threshold", self.control_queue_buffer_threshold, 1, 1_000_000)
        _int_range("max_concurrent_activities", self.max_concurrent_activities, 1, 10_000)
        _int_range("max_concurrent_orchestrations", self.max_concurrent_orchestrations, 1, 10_000)
        _int_range("orchestration_worker_threads", self.orchestration_worker_threads, 1, 1_000)
        _int_range("history_batch_size", self.history_batch_size, 1, 99)
        _int_range("max_entity_operation_batch_size", self.max_entity_operation_batch_size, 1, 1_000_000)
        _int_range("entity_worker_threads", self.entity_worker_threads, 1, 1_000)
        if self.max_history_events is not None:
            _int_range("max_history_events", self.max_history_events, 1, 100_000_000)
        for name in (
            "control_queue_visibility_timeout",
            "work_item_visibility_timeout",
            "max_queue_polling_interval",
            "min_queue_polling_interval",
        ):
            value = getattr(self, name)
            if not isinstance(value, timedelta) or value <= _ZERO:
                raise ValueError(f"{name} must be a positive timedelta, got {value!r}")
        for name in (
            "entity_message_reorder_window",
            "buffer_full_delay",
            "prefetch_retry_delay",
            "requeue_delay",
            "dequeue_error_delay",
            "drain_poll_interval",
            "drain_timeout",
        ):
            value = getattr(self, name)
            if not isinstance(value, timedelta) or value < _ZERO:
                raise ValueError(f"{name} must be a non-negative timedelta, got {value!r}")
        if self.min_queue_polling_interval > self.max_queue_polling_interval:
            raise ValueError(
                "min_queue_polling_interval must not exceed max_queue_polling_interval "
                f"({self.min_queue_polling_interval} > {self.max_queue_polling_interval})"
            )
        if self.overridable_existing_instance_states not in ("AnyState", "NonRunningStates"):
            raise ValueError(
                "overridable_existing_instance_states must be AnyState or NonRunningStates, got "
                f"{self.overridable_existing_instance_states!r}"
            )
        if not isinstance(self.scheduling_mode, SchedulingMode):
            raise ValueError(f"scheduling_mode must be a SchedulingMode, got {self.scheduling_mode!r}")

    @property
    def orchestration_threads(self) -> int:
        """Threads the orchestration dispatcher runs: never more than the concurrency limit."""
        return min(self.orchestration_worker_threads, self.max_concurrent_orchestrations)


def _int_range(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}, got {value!r}")
