"""The error answer of the Durable HTTP management API, shared by its instance and entity routes."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from durable_local.errors import (
    FunctionNotFoundError,
    InstanceExistsError,
    InstanceNotFoundError,
    InvalidInstanceStateError,
)

# The .NET exception each engine error stands for in the extension (``ExceptionType`` is its full name).
_DOTNET_TYPES: dict[type[BaseException], str] = {
    ValueError: "System.ArgumentException",
    FunctionNotFoundError: "System.ArgumentException",
    InstanceNotFoundError: "System.ArgumentException",
    InstanceExistsError: "DurableTask.Core.Exceptions.OrchestrationAlreadyExistsException",
    InvalidInstanceStateError: "System.InvalidOperationException",
}


def error_response(status: int, message: str, exc: BaseException | None = None) -> web.Response:
    """The extension's ``CreateErrorResponse`` body (``HttpRequestMessageExtensions.cs``; the SDK reads
    ``ExceptionMessage`` on a 400 start)."""
    body: dict[str, Any] = {"Message": message}
    if exc is not None:
        exception_type = next((name for kind, name in _DOTNET_TYPES.items() if isinstance(exc, kind)), None)
        body.update({"ExceptionMessage": str(exc), "ExceptionType": exception_type or type(exc).__name__})
    else:
        body["ExceptionMessage"] = message
    return web.json_response(body, status=status)
