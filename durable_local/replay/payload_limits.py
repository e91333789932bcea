"""The extension's 16 KB limit on an orchestration's custom status.

``OutOfProcOrchestrationShim.ScheduleDurableTaskEvents`` passes the worker's ``customStatus`` to
``IDurableOrchestrationContext.SetCustomStatus``, which serializes it with
``MessagePayloadDataConverter.Serialize(value, 16)`` (Azure/azure-functions-durable-extension 2.x). That throws
``ArgumentException`` when ``(int)(Encoding.Unicode.GetByteCount(json) / 1024.0) > 16``, before any action is
replayed; ``TaskOrchestrationShim`` turns it into a failed orchestration ("Orchestrator function '<name>' failed:
<message>"). The JSON is Newtonsoft's compact form of the value: no spaces, non-ASCII characters written as
themselves (one UTF-16 unit each, two outside the BMP), where Python's ``json.dumps`` would escape them.
"""

from __future__ import annotations

import json

MAX_CUSTOM_STATUS_KB = 16


def utf16_kb(value: object) -> int:
    """Whole KB of the value's compact JSON in UTF-16, rounded down as the extension's cast does."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-16-le")) // 1024


def custom_status_error(custom_status_json: str | None) -> str | None:
    """The extension's message when the custom status (JSON text as the SDK sent it) is too big, else None."""
    if custom_status_json is None:
        return None
    size = utf16_kb(json.loads(custom_status_json))
    if size <= MAX_CUSTOM_STATUS_KB:
        return None
    return (
        f"The UTF-16 size of the JSON-serialized payload must not exceed {MAX_CUSTOM_STATUS_KB:,} KB. "
        f"The current payload size is {size:,} KB."
    )
