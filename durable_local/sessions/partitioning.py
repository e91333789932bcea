"""Partitioning and queue naming, as DurableTask.AzureStorage does it.

An instance's control queue is ``fnv1a_32(instance_id) % partition_count`` (32-bit FNV-1a over the UTF-8
bytes of the id, case-sensitive). The hash is not "sticky": changing the partition count of an existing
task hub moves instances to other queues, which DTFx does not support either.
"""

from __future__ import annotations

DEFAULT_PARTITION_COUNT = 4
MIN_PARTITION_COUNT = 1
MAX_PARTITION_COUNT = 16

_FNV_OFFSET_BASIS = 2166136261
_FNV_PRIME = 16777619
_MASK_32 = 0xFFFFFFFF


def fnv1a_32(text: str) -> int:
    """32-bit FNV-1a hash of ``text`` encoded as UTF-8 (``"abc"`` → ``0x1a47e90b``)."""
    value = _FNV_OFFSET_BASIS
    for byte in text.encode("utf-8"):
        value = ((value ^ byte) * _FNV_PRIME) & _MASK_32
    return value


def validate_partition_count(partition_count: int) -> int:
    """Return ``partition_count`` if it is an int in 1..16, else raise ``ValueError`` naming the rule."""
    if (
        isinstance(partition_count, bool)
        or not isinstance(partition_count, int)
        or not MIN_PARTITION_COUNT <= partition_count <= MAX_PARTITION_COUNT
    ):
        raise ValueError(
            f"partitionCount must be an integer from {MIN_PARTITION_COUNT} to {MAX_PARTITION_COUNT}, "
            f"got {partition_count!r}"
        )
    return partition_count


def partition_index(instance_id: str, partition_count: int = DEFAULT_PARTITION_COUNT) -> int:
    """The control-queue partition that owns ``instance_id`` (case-sensitive, like DTFx)."""
    return fnv1a_32(instance_id) % validate_partition_count(partition_count)


def control_queue_name(hub: str, index: int) -> str:
    """``{hub}-control-NN`` in lower case (``"MyHub", 3`` → ``"myhub-control-03"``)."""
    if index < 0 or index >= MAX_PARTITION_COUNT:
        raise ValueError(f"control queue index must be from 0 to {MAX_PARTITION_COUNT - 1}, got {index}")
    return f"{hub.lower()}-control-{index:02d}"


def work_item_queue_name(hub: str) -> str:
    """``{hub}-workitems`` in lower case (Azure queue names must be lower case)."""
    return f"{hub.lower()}-workitems"
