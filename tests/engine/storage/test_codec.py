"""Serialisation helpers: sortable UTC strings, task messages, continuation tokens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durable_local.storage.codec import (
    decode_continuation,
    decode_task_message,
    encode_continuation,
    encode_task_message,
    format_utc,
    parse_utc,
)
from tests.engine.storage.conftest import message

aware = st.datetimes(
    min_value=datetime(1, 1, 2),
    max_value=datetime(9999, 12, 30),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=-7))]),
)


@given(aware, aware)
def test_formatted_times_sort_like_the_instants(a: datetime, b: datetime) -> None:
    fa, fb = format_utc(a), format_utc(b)
    assert len(fa) == len(fb) == 32
    assert (fa < fb) == (a < b)
    assert parse_utc(fa) == a


def test_naive_datetime_is_rejected() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        format_utc(datetime(2024, 1, 1))


def test_task_message_round_trip() -> None:
    original = message("ü-instance", 9, execution_id=None)
    assert decode_task_message(encode_task_message(original)) == original


@given(st.text())
def test_continuation_token_round_trip(instance_id: str) -> None:
    token = encode_continuation(instance_id)
    assert decode_continuation(token) == instance_id


@pytest.mark.parametrize("token", ["", "abc", "dl1:***", "dl1:/w=="])
def test_foreign_tokens_are_rejected(token: str) -> None:
    with pytest.raises(ValueError, match="continuation token"):
        decode_continuation(token)
