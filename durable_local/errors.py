"""Errors the engine raises on purpose (tree in ``durable_local.engine_api``)."""

from __future__ import annotations


class EngineError(Exception):
    """Root of the engine's errors."""


class InstanceNotFoundError(EngineError):
    def __init__(self, instance_id: str) -> None:
        super().__init__(f"No instance with ID '{instance_id}' was found.")
        self.instance_id = instance_id


class InstanceExistsError(EngineError):
    """DTFx's ``OrchestrationAlreadyExistsException`` (``AzureStorageOrchestrationService.CreateTaskOrchestrationAsync``
    with ``ThrowExceptionOnInvalidDedupeStatus``, which the extension sets); the message is DTFx's."""

    def __init__(self, instance_id: str, status: str) -> None:
        super().__init__(f"An Orchestration instance with the status {status} already exists.")
        self.instance_id = instance_id
        self.status = status


class InvalidInstanceStateError(EngineError):
    def __init__(self, instance_id: str, status: str, operation: str) -> None:
        super().__init__(f"Cannot {operation} instance '{instance_id}' because it is in the {status} state.")
        self.instance_id = instance_id
        self.status = status
        self.operation = operation


class FunctionNotFoundError(EngineError):
    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f"The {kind} function '{name}' doesn't exist, is disabled, or is not an {kind} function.")
        self.kind = kind
        self.name = name
