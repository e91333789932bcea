"""Clocks and partitioning: FNV-1a vectors, queue names, manual time."""

from __future__ import annotations

import threading
import unicodedata
from datetime import UTC, datetime, timedelta, timezone

import pytest

from durable_local.clock import ManualClock, SystemClock
from durable_local.sessions.partitioning import (
    DEFAULT_PARTITION_COUNT,
    control_queue_name,
    fnv1a_32,
    partition_index,
    validate_partition_count,
    work_item_queue_name,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0x811C9DC5), ("a", 0xE40C292C), ("abc", 0x1A47E90B), ("inst1", 0xC82A2938), ("foobar", 0xBF9CF968)],
)
def test_fnv1a_32_known_vectors(text: str, expected: int) -> None:
    assert fnv1a_32(text) == expected


def _fnv_of_bytes(data: bytes) -> int:
    """FNV-1a folded over the given bytes, independently of ``fnv1a_32``'s own encoding step."""
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return value


def test_fnv_hashes_utf8_bytes_not_code_points() -> None:
    # U+00E9 is two UTF-8 bytes; hashing the code point (0xE9) as one byte would give another value.
    assert fnv1a_32("\u00e9") == _fnv_of_bytes(b"\xc3\xa9")
    assert fnv1a_32("\u00e9") != _fnv_of_bytes(b"\xe9")


def test_fnv_hashes_the_id_as_given_without_unicode_normalisation() -> None:
    # DTFx's Fnv1aHashHelper hashes Encoding.UTF8.GetBytes(instanceId) as is. The precomposed (NFC) and the
    # decomposed (NFD) spelling of one visible id are different byte strings, so they hash differently and
    # here even land in different partitions. Written with escapes so that no editor can normalise them.
    nfc, nfd = "caf\u00e9", "cafe\u0301"
    assert unicodedata.normalize("NFC", nfd) == nfc  # the same text to a reader
    assert fnv1a_32(nfc) == _fnv_of_bytes(b"caf\xc3\xa9")
    assert fnv1a_32(nfd) == _fnv_of_bytes(b"cafe\xcc\x81")
    assert fnv1a_32(nfc) != fnv1a_32(nfd)
    assert (partition_index(nfc), partition_index(nfd)) == (1, 3)


@pytest.mark.parametrize(
    ("instance_id", "count", "expected"), [("abc", 4, 3), ("abc", 16, 11), ("inst1", 4, 0), ("inst1", 16, 8)]
)
def test_partition_index_matches_dtfx_vectors(instance_id: str, count: int, expected: int) -> None:
    assert partition_index(instance_id, count) == expected


def test_partition_index_is_case_sensitive_and_defaults_to_four() -> None:
    assert DEFAULT_PARTITION_COUNT == 4
    assert partition_index("abc") == 3
    assert fnv1a_32("ABC") != fnv1a_32("abc")


@pytest.mark.parametrize("bad", [0, 17, -1, 2.0, True, "4"])
def test_partition_count_outside_1_to_16_is_rejected_with_the_rule(bad: object) -> None:
    with pytest.raises(ValueError, match="from 1 to 16"):
        validate_partition_count(bad)  # type: ignore[arg-type]


def test_queue_names() -> None:
    assert control_queue_name("MyHub", 3) == "myhub-control-03"
    assert control_queue_name("hub", 15) == "hub-control-15"
    assert work_item_queue_name("MyHub") == "myhub-workitems"
    with pytest.raises(ValueError):
        control_queue_name("hub", 16)


def test_manual_clock_moves_only_when_told() -> None:
    clock = ManualClock(datetime(2024, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1))))
    assert clock.now() == datetime(2024, 1, 1, tzinfo=UTC)
    assert clock.now().utcoffset() == timedelta(0)
    clock.advance(1.5)
    clock.advance(timedelta(minutes=1))
    assert clock.now() == datetime(2024, 1, 1, 0, 1, 1, 500000, tzinfo=UTC)
    clock.sleep(600)  # returns at once, having moved time
    assert clock.now() == datetime(2024, 1, 1, 0, 11, 1, 500000, tzinfo=UTC)
    clock.set(datetime(2023, 6, 1, tzinfo=UTC))
    assert clock.now() == datetime(2023, 6, 1, tzinfo=UTC)
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError, match="timezone-aware"):
        clock.set(datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        ManualClock(datetime(2024, 1, 1))


def test_manual_clock_is_thread_safe() -> None:
    clock = ManualClock(datetime(2024, 1, 1, tzinfo=UTC))

    def work() -> None:
        for _ in range(500):
            clock.advance(timedelta(microseconds=1))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert clock.now() == datetime(2024, 1, 1, tzinfo=UTC) + timedelta(microseconds=4000)


def test_system_clock_is_aware_utc_and_sleep_zero_returns() -> None:
    clock = SystemClock()
    before = clock.now()
    clock.sleep(0)
    assert before.tzinfo is not None and before.utcoffset() == timedelta(0)
    assert clock.now() >= before
