"""Rules shared by both queue implementations: Azure Storage Queue limits and the abandon back-off.

Abandon back-off is ``TaskHubQueue.AbandonMessageAsync`` in DurableTask.AzureStorage: the message is made
visible again after ``min(2^DequeueCount, 600)`` seconds (``DequeueCount > 30`` → 600, which also avoids
overflow); reaching 600 s is logged as a poison message, but the message is never dead-lettered.
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

MAX_ABANDON_DELAY = timedelta(seconds=600)
MAX_GET_MESSAGES = 32
"""Azure Get Messages accepts ``numofmessages`` 1..32."""

_QUEUE_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}$")


def abandon_delay(dequeue_count: int) -> timedelta:
    """Visibility delay for abandoning a message dequeued ``dequeue_count`` times: 2, 4, 8, … 512, 600, 600 s."""
    if dequeue_count > 30:
        return MAX_ABANDON_DELAY
    return min(timedelta(seconds=2 ** max(dequeue_count, 0)), MAX_ABANDON_DELAY)


def is_poison(delay: timedelta) -> bool:
    """True once the abandon back-off has reached its 600 s ceiling (DTFx logs PoisonMessageDetected)."""
    return delay >= MAX_ABANDON_DELAY


def validate_queue_name(name: str) -> str:
    """Azure queue naming: 3-63 chars, lower-case letters, digits and single inner dashes."""
    if not _QUEUE_NAME.match(name):
        raise ValueError(
            f"invalid queue name {name!r}: use 3-63 lower-case letters, digits or dashes, starting and ending "
            "with a letter or digit, without consecutive dashes"
        )
    return name


def validate_get_args(max_count: int, visibility_timeout: timedelta) -> None:
    if not 1 <= max_count <= MAX_GET_MESSAGES:
        raise ValueError(f"max_count must be from 1 to {MAX_GET_MESSAGES} (Azure Get Messages), got {max_count}")
    validate_timeout(visibility_timeout, "visibility_timeout")


def validate_timeout(value: timedelta, what: str) -> None:
    if value < timedelta(0):
        raise ValueError(f"{what} must not be negative, got {value}")


def new_message_id() -> str:
    return str(uuid.uuid4())


def new_pop_receipt() -> str:
    return uuid.uuid4().hex
