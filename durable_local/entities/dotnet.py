""".NET values as the Durable extension writes them into entity messages: ``DateTime`` and deterministic GUIDs.

* Entity request messages carry ``Timestamp``/``Predecessor`` (``DateTime``, 100 ns ticks) that the receiving
  entity compares to order and de-duplicate messages (``EntityScheduler/MessageSorter.cs``). Here they are kept
  as integer ticks since 0001-01-01 and written like Newtonsoft's ISO format (``yyyy-MM-ddTHH:mm:ss.FFFFFFF``,
  trailing zeros of the fraction dropped, ``Z`` for UTC values; ``DateTime.MinValue`` has no ``Z``).
* ``DurableOrchestrationContext.NewGuid`` makes each entity request id from the instance id, the orchestration's
  current time (``ToString("o")``) and a counter: an RFC 4122 version 5 UUID in the namespace
  ``9e952959-5e33-4daf-827f-2fa12937b875`` (``GuidManager.cs``), so a replay produces the same ids.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

from durable_local.history import format_timestamp

TICKS_PER_SECOND = 10_000_000
_EPOCH = datetime(1, 1, 1, tzinfo=UTC)
_URL_NAMESPACE = uuid.UUID("9e952959-5e33-4daf-827f-2fa12937b875")
_DATETIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,7}))?(Z|[+-]\d\d:\d\d)?$")


def to_ticks(moment: datetime) -> int:
    """Ticks (100 ns) since 0001-01-01T00:00:00 UTC."""
    if moment.tzinfo is None:
        raise ValueError("entity message times must be timezone-aware")
    delta = moment.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * TICKS_PER_SECOND + delta.microseconds * 10


def from_ticks(ticks: int) -> datetime:
    return _EPOCH + timedelta(microseconds=ticks // 10)


def ticks_of(span: timedelta) -> int:
    return (span.days * 86_400 + span.seconds) * TICKS_PER_SECOND + span.microseconds * 10


def format_datetime(ticks: int) -> str:
    """Newtonsoft's ``IsoDateFormat`` for a UTC ``DateTime`` (``DateTime.MinValue`` = 0 ticks: no ``Z``)."""
    seconds, fraction = divmod(ticks, TICKS_PER_SECOND)
    m = _EPOCH + timedelta(seconds=seconds)
    text = f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
    if fraction:
        text += "." + f"{fraction:07d}".rstrip("0")
    return text if ticks == 0 else text + "Z"


def parse_datetime(text: str) -> int:
    """Ticks of an ISO-8601 date-time as written by ``format_datetime`` (or with an offset)."""
    found = _DATETIME.match(text.strip())
    if found is None:
        raise ValueError(f"{text!r} is not an ISO-8601 date-time")
    year, month, day, hour, minute, second = (int(found.group(i)) for i in range(1, 7))
    fraction = int((found.group(7) or "").ljust(7, "0"))
    moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    offset = found.group(8)
    ticks = to_ticks(moment) + fraction
    if offset and offset != "Z":
        sign = 1 if offset[0] == "+" else -1
        ticks -= sign * (int(offset[1:3]) * 3600 + int(offset[4:6]) * 60) * TICKS_PER_SECOND
    return ticks


def deterministic_guid(instance_id: str, current_utc: datetime, counter: int) -> str:
    """``DurableOrchestrationContext.NewGuid``: ``uuid5(namespace, "{instanceId}_{now:o}_{counter}")``."""
    name = f"{instance_id}_{format_timestamp(current_utc)}_{counter}"
    return str(uuid.uuid5(_URL_NAMESPACE, name))
