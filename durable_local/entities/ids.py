"""Entity ids: ``@name@key`` instance ids, as the Durable extension (2.x) makes them.

Sources: ``Azure/azure-functions-durable-extension`` ``EntityScheduler/EntityId.cs`` (the name is lower-cased,
the key kept as is; the scheduler id is ``@{name}@{key}``; parsing splits at the second ``@``, so a key may
contain ``@``), ``Azure/durabletask`` ``DurableTask.Core/Common/Entities.cs`` (``IsEntityInstance``: the id
starts with ``@``) and ``ContextImplementations/DurableClient.cs`` (keys a client signals must not contain
``/``, ``\\``, ``#``, ``?`` or control characters).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

ENTITY_PREFIX = "@"


def is_entity_instance(instance_id: str | None) -> bool:
    """DTFx ``Entities.IsEntityInstance``: instance ids of entities start with ``@``."""
    return bool(instance_id) and str(instance_id)[0] == ENTITY_PREFIX


@dataclass(frozen=True, slots=True)
class EntityId:
    """An entity's name (lower case) and key."""

    name: str
    key: str

    @classmethod
    def of(cls, name: str, key: str) -> EntityId:
        """The extension's ``new EntityId(name, key)``: the name is required and lower-cased."""
        if not name:
            raise ValueError("Invalid entity id: entity name must not be a null or empty string.")
        if key is None:  # callers may come from untyped JSON
            raise ValueError("Invalid entity id: entity key must not be null.")
        return cls(name.lower(), key)

    @classmethod
    def from_scheduler_id(cls, scheduler_id: str) -> EntityId:
        """``GetEntityIdFromSchedulerId``: ``@name@key`` (the key may contain further ``@``)."""
        if not is_entity_instance(scheduler_id):
            raise ValueError(f"{scheduler_id!r} is not an entity instance id (it must start with '@')")
        position = scheduler_id.find(ENTITY_PREFIX, 1)
        if position < 0:
            raise ValueError(f"{scheduler_id!r} is not an entity instance id ('@name@key')")
        return cls.of(scheduler_id[1:position], scheduler_id[position + 1 :])

    @property
    def scheduler_id(self) -> str:
        return f"{ENTITY_PREFIX}{self.name}{ENTITY_PREFIX}{self.key}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "key": self.key}

    @classmethod
    def from_json(cls, data: Any) -> EntityId:
        if not isinstance(data, dict):
            raise ValueError(f"an entity id must be a JSON object with name and key, got {data!r}")
        return cls.of(str(data.get("name") or ""), str(data.get("key") if data.get("key") is not None else ""))

    def __str__(self) -> str:
        return self.scheduler_id


def scheduler_id_prefix(name: str) -> str:
    """``GetSchedulerIdPrefixFromEntityName``: ``@name@`` (lower-cased) for listing one entity name."""
    return f"{ENTITY_PREFIX}{name.lower()}{ENTITY_PREFIX}"


def check_signal_key(key: str) -> None:
    """The extension's ``SignalEntityAsync`` rejects keys with ``/``, ``\\``, ``#``, ``?`` or control characters."""
    if any(char in "/\\#?" or unicodedata.category(char) == "Cc" for char in key):
        raise ValueError("Entity keys must not contain /, \\, #, ?, or control characters.")
