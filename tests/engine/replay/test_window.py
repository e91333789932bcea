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


@pytest.mark.parametrize("seed", [1, 7, 42])
def test_a_cancelled_nudge_keeps_the_shim_moving_without_an_episode_of_its_own(seed: int) -> None:
    """The shim creates a timer reported as cancelled already cancelled: it is no open task, its WhenAny completes
    in the same episode, and it never fires, so the window holds K with one episode per completion."""
    counts = in_flight_per_completion(o.cancelled_timer_window, SchedulingMode.SHIM, seed)
    assert counts == [o.WINDOW_K] * (o.WINDOW_N - 2) + [2, 1]

    def episodes(orchestrator: o.Orch) -> tuple[int, int]:
        driver = Driver({"window": o.handle(orchestrator)}, o.ACTIVITIES, mode=SchedulingMode.SHIM)
        driver.start("window", "w1")
        result = driver.run("w1", pick=random.Random(seed).choice)
        fired = sum(1 for e in result.history if e["EventType"] == 11)  # TimerFired
        return sum(1 for r in driver.results if r.history), fired

    due, due_fired = episodes(o.timer_window)
    cancelled, cancelled_fired = episodes(o.cancelled_timer_window)
    assert cancelled_fired == 0 and due_fired > 0
    assert cancelled < due
