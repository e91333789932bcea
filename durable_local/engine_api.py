"""The engine's public surface, as used by the local Functions host and by tests.

``durable_local.engine.Engine`` implements ``DurableEngine``. All methods are thread-safe and synchronous;
the HTTP host calls them from an executor thread. Error tree (``durable_local.errors``)::

    EngineError
    ├── InstanceNotFoundError   no instance with that id (HTTP 404)
    ├── InstanceExistsError     start_new with an id whose instance is in a state that cannot be replaced
    ├── InvalidInstanceStateError  the operation does not apply in the instance's state (HTTP 410 for
    │                              raise-event/terminate on a completed instance, per the extension)
    └── FunctionNotFoundError   no orchestrator/activity/entity registered under that name (HTTP 400/404)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from durable_local.entities.client import EntityMetadata, EntityQuery
from durable_local.entities.ids import EntityId
from durable_local.model import HistoryEvent, RuntimeStatus
from durable_local.ports import InstanceQuery


@dataclass(slots=True)
class InstanceStatus:
    """What ``get_status`` returns; the host turns it into the extension's JSON shapes."""

    instance_id: str
    name: str
    runtime_status: RuntimeStatus
    created_time: datetime
    last_updated_time: datetime
    input: str | None = None
    """JSON text, or None when not requested/absent."""
    output: str | None = None
    """JSON text (for Failed: the JSON string of the failure message, as the extension stores it)."""
    custom_status: str | None = None
    """JSON text."""
    history: list[HistoryEvent] | None = None
    """Raw DTFx events of the current execution, only when ``show_history`` was asked."""
    execution_id: str | None = None
    parent_instance_id: str | None = None


class DurableEngine(Protocol):
    @property
    def hub_name(self) -> str: ...

    def start(self) -> None:
        """Start the dequeue loops and dispatchers (idempotent)."""
        ...

    def stop(self, *, drain_timeout: float = 30.0) -> None:
        """Stop taking work, let running work items finish (up to ``drain_timeout``), then stop."""
        ...

    def start_new(self, name: str, *, instance_id: str | None = None, input_json: str | None = None) -> str:
        """Schedule a new orchestration (ExecutionStarted enqueued first, then the Pending row). Returns the
        instance id (a new uuid4 hex when not given)."""
        ...

    def raise_event(self, instance_id: str, event_name: str, data_json: str | None) -> None: ...

    def terminate(self, instance_id: str, reason: str | None) -> None: ...

    def suspend(self, instance_id: str, reason: str | None) -> None: ...

    def resume(self, instance_id: str, reason: str | None) -> None: ...

    def restart(self, instance_id: str, *, restart_with_new_instance_id: bool = True) -> str:
        """Start the same orchestrator with the same input; returns the (new or same) instance id."""
        ...

    def get_status(
        self,
        instance_id: str,
        *,
        show_history: bool = False,
        show_input: bool = True,
    ) -> InstanceStatus | None: ...

    def query(self, query: InstanceQuery) -> tuple[list[InstanceStatus], str | None]:
        """One page of instances matching the filters, and the continuation token for the next page."""
        ...

    def purge(self, instance_id: str) -> bool:
        """Delete an instance's row and history, whatever its status (as DTFx's Azure Storage tracking store
        does). True if something was deleted."""
        ...

    def purge_many(
        self,
        *,
        created_from: datetime | None = None,
        created_to: datetime | None = None,
        statuses: tuple[RuntimeStatus, ...] = (),
    ) -> int:
        """Purge the instances created in the range whose status is one of the terminal ``statuses`` (DTFx drops
        non-terminal ones; no terminal status left means every status). Returns how many were deleted."""
        ...

    def wait_for_completion(self, instance_id: str, timeout: float) -> InstanceStatus | None:
        """Block until the instance is terminal (or ContinuedAsNew is not terminal: keep waiting) or the
        timeout passes; returns the last status seen (None if the instance does not exist)."""
        ...

    def signal_entity(self, entity: EntityId, operation: str, input_json: str | None = None) -> str:
        """Send a one-way entity operation (``input_json`` = the request's input text); returns the request id.
        Raises ``ValueError`` for a bad key, ``FunctionNotFoundError`` for an unknown entity name."""
        ...

    def read_entity_state(self, entity: EntityId) -> EntityMetadata | None:
        """The committed state of an entity; None if it does not exist."""
        ...

    def list_entities(self, query: EntityQuery) -> tuple[list[EntityMetadata], str | None]:
        """One page of entities and the continuation token for the next page."""
        ...
