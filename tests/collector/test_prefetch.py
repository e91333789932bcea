"""``shared.records.prefetch.prefetched``: order, one item ahead, errors after the items before them, clean early
stops."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator

import pytest

from shared.records.prefetch import prefetched


def test_items_arrive_in_order_and_the_worker_is_gone_at_the_end() -> None:
    assert list(prefetched(range(50), name="t-order")) == list(range(50))
    assert list(prefetched([], name="t-order")) == []
    assert not [t for t in threading.enumerate() if t.name == "t-order"]


def test_the_source_runs_in_the_worker_and_at_most_one_item_ahead() -> None:
    produced: list[int] = []
    threads: set[str] = set()
    ahead: list[int] = []
    consumed = 0

    def source() -> Iterator[int]:
        for n in range(20):
            threads.add(threading.current_thread().name)
            ahead.append(n - consumed)  # how far the worker is past what the caller has taken
            produced.append(n)
            yield n

    for item in prefetched(source(), name="t-ahead"):
        consumed = item + 1
        threading.Event().wait(0.002)  # a slow caller: an unbounded worker would run far ahead meanwhile
    assert produced == list(range(20))
    assert threads == {"t-ahead"}
    assert max(ahead) <= 1


def test_an_error_reaches_the_caller_after_every_item_before_it_as_the_same_object() -> None:
    boom = ValueError("page 3 failed")

    def source() -> Iterator[int]:
        yield 1
        yield 2
        raise boom

    got: list[int] = []
    with pytest.raises(ValueError, match="page 3 failed") as caught:
        for item in prefetched(source(), name="t-error"):
            got.append(item)
    assert got == [1, 2] and caught.value is boom


def test_stopping_early_closes_the_source_in_its_own_thread_and_joins_the_worker() -> None:
    events: list[str] = []

    def source() -> Iterator[int]:
        try:
            n = 0
            while True:
                yield n
                n += 1
        finally:
            events.append(threading.current_thread().name)

    stream = prefetched(source(), name="t-close")
    assert [next(stream), next(stream)] == [0, 1]
    stream.close()
    assert events == ["t-close"]
    assert not [t for t in threading.enumerate() if t.name == "t-close"]


def test_an_exception_in_the_caller_stops_the_worker() -> None:
    def source() -> Iterator[int]:
        yield from range(10**9)

    with pytest.raises(RuntimeError):
        for item in prefetched(source(), name="t-caller"):
            if item == 3:
                raise RuntimeError("the sink failed")
    assert not [t for t in threading.enumerate() if t.name == "t-caller"]


def test_the_worker_sees_the_callers_context_variables() -> None:
    tenant: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default="none")
    tenant.set("contoso")

    def source() -> Iterator[str]:
        yield tenant.get()

    assert list(prefetched(source(), name="t-context")) == ["contoso"]
