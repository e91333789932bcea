"""The extension's instance-id rules (Azure/azure-functions-durable-extension 2.x).

``DurableClient.StartNewAsync`` (``ContextImplementations/DurableClient.cs``) refuses an id that starts with
``@`` (entity ids are ``@name@key``), contains ``/ \\ # ?`` or a control character (``char.IsControl``:
U+0000-U+001F and U+007F-U+009F), or is longer than ``MaxInstanceIdLength`` (256). It throws
``ArgumentException``, which ``HttpApiHandler`` answers with 400. The first two are built as
``new ArgumentException(nameof(instanceId), "<rule>")``: the arguments are swapped (message, then parameter
name), so .NET's ``Message`` is ``instanceId (Parameter '<rule>')``, and that is the text a client sees.

``DurableOrchestrationContext.CallDurableTaskFunctionAsync`` refuses a sub-orchestration id equal to the caller's
or its parent's id (ordinal, case-insensitive) or starting with ``@``.
"""

from __future__ import annotations

MAX_INSTANCE_ID_LENGTH = 256

_AT_RULE = "Orchestration instance ids must not start with @."
_CHAR_RULE = "Orchestration instance ids must not contain /, \\, #, ?, or control characters."
SUB_ORCHESTRATION_SAME_ID = (
    "The instance ID of a sub-orchestration must be different than the instance ID of a parent orchestration."
)
SUB_ORCHESTRATION_AT = "instanceId (Parameter 'Orchestration instance ids must not start with @')"


def _swapped(rule: str) -> str:
    """``ArgumentException(message="instanceId", paramName=rule).Message`` on .NET Core 3.0 and later."""
    return f"instanceId (Parameter '{rule}')"


def is_control(char: str) -> bool:
    """.NET ``char.IsControl``: the C0 and C1 control ranges and DEL."""
    code = ord(char)
    return code < 0x20 or 0x7F <= code <= 0x9F


def start_id_error(instance_id: str) -> str | None:
    """The extension's message for an id ``StartNewAsync`` refuses, else None (an empty id gets a new GUID
    before these checks, so it is not passed here)."""
    if instance_id.startswith("@"):
        return _swapped(_AT_RULE)
    if any(char in "/\\#?" or is_control(char) for char in instance_id):
        return _swapped(_CHAR_RULE)
    if len(instance_id) > MAX_INSTANCE_ID_LENGTH:
        return f"Instance ID lengths must not exceed {MAX_INSTANCE_ID_LENGTH} characters."
    return None


def sub_orchestration_id_error(child_id: str | None, *, instance_id: str, parent_instance_id: str | None) -> str | None:
    """The extension's message for a sub-orchestration id it refuses, else None. A missing id (DTFx picks
    ``<executionId>:<n>``) passes; the comparisons are ``StringComparison.OrdinalIgnoreCase``."""
    if child_id is None:
        return None
    folded = child_id.casefold()
    if folded == instance_id.casefold() or (parent_instance_id is not None and folded == parent_instance_id.casefold()):
        return SUB_ORCHESTRATION_SAME_ID
    if child_id.startswith("@"):
        return SUB_ORCHESTRATION_AT
    return None
