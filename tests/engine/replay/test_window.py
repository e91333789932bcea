"""Evidence that SHIM mode is faithful: a naive task_any window collapses, the timer technique holds K."""

from __future__ import annotations

import json
import random

import pytest

from durable_local.model import RuntimeStatus, SchedulingMode, TaskMessage
from tests.engine.replay import orchestrations as o
from tests.engine.replay.driver import Driver


def in_flight_per_completion(orchestrator: o.Orch, mode: SchedulingMode, seed: int) -> list[int]:
    chooser = random.Random(seed)

    def pick(items: list[TaskMessage]) -> TaskMessage:
        return chooser.choice(items)

    driver = Driver({"window": o.handle(orchestrator)}, o.ACTIVITIES, mode=mode)
    driver.start("window", "w1")
    result = driver.run("w1", pick=pick)
    assert result.status is RuntimeStatus.COMPLETED
    assert json.loads(result.output or "") == list(range(o.WINDOW_N))
    assert len(driver.in_flight_at_delivery) == o.WINDOW_N
    return driver.in_flight_at_delivery


@pytest.mark.parametrize("seed", [1, 7, 42])
def test_naive_window_collapses_to_one_in_shim_mode(seed: int) -> None:
    counts = in_flight_per_completion(o.naive_window, SchedulingMode.SHIM, seed)
    print("shim naive", counts)
    assert counts[0] == o.WINDOW_K
    assert counts[-6:] == [1] * 6  # the shim blocks on the newest WhenAny: one activity at a time


@pytest.mark.parametrize("seed", [1, 7, 42])
def test_naive_window_holds_k_in_ideal_mode(seed: int) -> None:
    counts = in_flight_per_completion(o.naive_window, SchedulingMode.IDEAL, seed)
    print("ideal naive", counts)
    assert counts == [o.WINDOW_K] * (o.WINDOW_N - 2) + [2, 1]


@pytest.mark.parametrize("seed", [1, 7, 42])
def test_already_due_timer_keeps_the_shim_moving(seed: int) -> None:
    counts = in_flight_per_completion(o.timer_window, SchedulingMode.SHIM, seed)
    print("shim timer", counts)
    assert counts == [o.WINDOW_K] * (o.WINDOW_N - 2) + [2, 1]
