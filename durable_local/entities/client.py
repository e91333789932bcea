"""Entity client operations: signal an entity, read its state, list entities.

* Signal (``DurableClient.SignalEntityAsyncInternal``): a ``RequestMessage`` with no parent (so the entity's
  sorter lets it through), ``signal: true`` and a new random id, raised as event ``op`` on the entity's
  instance (no execution id: whatever execution is current). No Instances row is written: the entity's first
  batch creates it. The key must not contain ``/``, ``\\``, ``#``, ``?`` or control characters, and an entity
  function of that name must exist in the app (``ThrowIfFunctionDoesNotExist``).
* Read state and list (DTFx ``AzureStorage/EntityTrackingStoreQueries.cs``, which the extension uses when the
  backend offers entity queries, as Azure Storage does): the Instances row of ``@name@key``; the entity exists
  when its scheduler state (the row's input) has a ``state``. Listing filters instance ids by ``@`` or
  ``@name@``, by the row's created time (= the time of the entity's last batch, since every batch starts a new
  execution), and without ``fetchState`` decides existence from the custom status (``entityExists``).
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from durable_local.entities.ids import ENTITY_PREFIX, EntityId, check_signal_key, scheduler_id_prefix
from durable_local.entities.messages import REQUEST_EVENT, RequestMessage
from durable_local.entities.state import entity_state_of, status_says_exists
from durable_local.errors import FunctionNotFoundError
from durable_local.history import event_raised
from durable_local.model import FunctionRegistry, InstanceRecord, TaskMessage
from durable_local.ports import Clock, InstanceQuery, Queue, TrackingStore

_QUERY_TIME_BUDGET = 0.1
"""Seconds spent reading further pages while a page holds no entity (DTFx: 100 ms)."""


@dataclass(frozen=True, slots=True)
class EntityMetadata:
    """One entity as the client sees it (DTFx ``EntityBackendQueries.EntityMetadata``)."""

    entity_id: EntityId
    last_operation_time: datetime
    state: str | None
    """The entity state as JSON text (None when not fetched)."""


@dataclass(slots=True)
class EntityQuery:
    """Filters of ``list_entities`` (the extension's ``EntityQuery``)."""

    entity_name: str | None = None
    last_operation_from: datetime | None = None
    last_operation_to: datetime | None = None
    page_size: int = 100
    continuation_token: str | None = None
    fetch_state: bool = False


class EntityClient:
    def __init__(
        self,
        *,
        registry: FunctionRegistry,
        tracking: TrackingStore,
        control_queue_for: Callable[[str], Queue],
        clock: Clock,
    ) -> None:
        self._registry = registry
        self._tracking = tracking
        self._control_queue_for = control_queue_for
        self._clock = clock
        self._sequence = itertools.count(1)

    def signal_entity(self, entity: EntityId, operation: str, input_json: str | None) -> str:
        """Send a one-way operation; ``input_json`` is the request's input text. Returns the request id."""
        check_signal_key(entity.key)
        if self._registry.entity(entity.name) is None:
            raise FunctionNotFoundError("entity", entity.name)
        request = RequestMessage(id=str(uuid.uuid4()), operation=operation, is_signal=True, input=input_json)
        event = event_raised(timestamp=self._clock.now(), name=REQUEST_EVENT, input=request.to_text())
        target = entity.scheduler_id
        self._control_queue_for(target).add(TaskMessage(target, None, event, next(self._sequence)))
        return request.id

    def read_entity_state(self, entity: EntityId) -> EntityMetadata | None:
        """The committed state of an entity, or None when it does not exist (never ran, or has no state)."""
        record = self._tracking.get_instance(entity.scheduler_id)
        if record is None:
            return None
        return _metadata(record, fetch_state=True)

    def list_entities(self, query: EntityQuery) -> tuple[list[EntityMetadata], str | None]:
        prefix = scheduler_id_prefix(query.entity_name) if query.entity_name else ENTITY_PREFIX
        instance_query = InstanceQuery(
            created_from=query.last_operation_from,
            created_to=query.last_operation_to,
            instance_id_prefix=prefix,
            page_size=query.page_size,
            continuation_token=query.continuation_token,
        )
        deadline = time.monotonic() + _QUERY_TIME_BUDGET
        while True:
            page = self._tracking.query_instances(instance_query)
            found = [m for m in (_metadata(r, fetch_state=query.fetch_state) for r in page.instances) if m is not None]
            token = page.continuation_token
            if found or token is None or time.monotonic() > deadline:
                return found, token
            instance_query.continuation_token = token


def _metadata(record: InstanceRecord, *, fetch_state: bool) -> EntityMetadata | None:
    try:
        entity = EntityId.from_scheduler_id(record.instance_id)
    except ValueError:
        return None
    if not fetch_state:
        if not status_says_exists(record.custom_status):
            return None
        return EntityMetadata(entity, record.created_time, None)
    state = entity_state_of(record.input)
    if state is None:
        return None
    return EntityMetadata(entity, record.created_time, state)
