"""Orchestrators and activities for the engine tests, written against the real azure-functions-durable SDK."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import azure.durable_functions as df

from durable_local.model import FunctionRegistry


def chain(ctx: df.DurableOrchestrationContext) -> Any:
    a = yield ctx.call_activity("echo", "a")
    b = yield ctx.call_activity("echo", a + "b")
    c = yield ctx.call_activity("echo", b + "c")
    return c


def fan_out(ctx: df.DurableOrchestrationContext) -> Any:
    count = ctx.get_input()
    results = yield ctx.task_all([ctx.call_activity("square", i) for i in range(count)])
    return sum(results)


def first_of(ctx: df.DurableOrchestrationContext) -> Any:
    slow = ctx.call_activity("sleepy", {"value": "slow", "seconds": 0.5})
    fast = ctx.call_activity("sleepy", {"value": "fast", "seconds": 0.0})
    winner = yield ctx.task_any([slow, fast])
    return winner.result


def timer_then_done(ctx: df.DurableOrchestrationContext) -> Any:
    seconds = ctx.get_input() or 3600
    yield ctx.create_timer(ctx.current_utc_datetime + timedelta(seconds=seconds))
    return "fired"


def wait_event(ctx: df.DurableOrchestrationContext) -> Any:
    ctx.set_custom_status({"stage": "waiting"})
    value = yield ctx.wait_for_external_event("go")
    ctx.set_custom_status({"stage": "done"})
    return {"got": value}


def parent(ctx: df.DurableOrchestrationContext) -> Any:
    first = yield ctx.call_sub_orchestrator("chain", None, f"{ctx.instance_id}-child")
    return "parent:" + first


def counter(ctx: df.DurableOrchestrationContext) -> Any:
    value = ctx.get_input() or 0
    if value < 3:
        yield ctx.call_activity("echo", str(value))
        ctx.continue_as_new(value + 1)
        return None
    return value


def outlives_its_timer(ctx: df.DurableOrchestrationContext) -> Any:
    """The collector's pattern: a timer races an activity, the activity wins, the execution continues as new; the
    losing timer (cancelled, so it holds nothing open) still fires later, for an execution that no longer exists.
    The next execution checkpoints twice (the second after a 30 s timer) before that, then waits an hour."""
    if not ctx.get_input():
        timer = ctx.create_timer(ctx.current_utc_datetime + timedelta(seconds=600))
        yield ctx.task_any([ctx.call_activity("echo", "first"), timer])
        timer.cancel()
        ctx.continue_as_new(1)
        return None
    yield ctx.create_timer(ctx.current_utc_datetime + timedelta(seconds=30))
    yield ctx.create_timer(ctx.current_utc_datetime + timedelta(seconds=3600))
    return "done"


def with_retry(ctx: df.DurableOrchestrationContext) -> Any:
    options = df.RetryOptions(first_retry_interval_in_milliseconds=10, max_number_of_attempts=3)
    result = yield ctx.call_activity_with_retry("flaky", options, ctx.get_input())
    return result


def catches(ctx: df.DurableOrchestrationContext) -> Any:
    try:
        yield ctx.call_activity("boom", "x")
    except Exception as exc:
        return "caught: " + str(exc)
    return "not caught"


def window(ctx: df.DurableOrchestrationContext) -> Any:
    """The naive task_any sliding window (K=3 over 12 items) that collapses under the shim."""
    spec = ctx.get_input()
    k, durations = spec["k"], spec["durations"]
    pending = [ctx.call_activity("sleepy", {"value": i, "seconds": durations[i]}) for i in range(k)]
    next_index = k
    done = []
    while pending:
        finished = yield ctx.task_any(pending)
        pending.remove(finished)
        done.append(finished.result)
        if next_index < len(durations):
            pending.append(ctx.call_activity("sleepy", {"value": next_index, "seconds": durations[next_index]}))
            next_index += 1
    return sorted(done)


def calls_missing(ctx: df.DurableOrchestrationContext) -> Any:
    try:
        yield ctx.call_activity("not_registered", None)
    except Exception as exc:
        return str(exc)
    return "no error"


def slow_fan_out(ctx: df.DurableOrchestrationContext) -> Any:
    count = ctx.get_input()
    results = yield ctx.task_all([ctx.call_activity("sleepy", {"value": i, "seconds": 0.05}) for i in range(count)])
    return results


_NON_DETERMINISTIC_CALLS = Counter[str]()


def changes_its_mind(ctx: df.DurableOrchestrationContext) -> Any:
    # Deliberately broken: the first run schedules "echo", any replay schedules "square".
    _NON_DETERMINISTIC_CALLS[ctx.instance_id] += 1
    name = "echo" if _NON_DETERMINISTIC_CALLS[ctx.instance_id] == 1 else "square"
    yield ctx.call_activity(name, 2 if name == "square" else "x")
    yield ctx.call_activity("echo", "y")
    return "unreachable"


class Activities:
    """Activity bodies with shared state the tests can inspect (calls per key, failures to inject)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.flaky_failures = 2
        self.gate = threading.Event()
        self.gate.set()
        self.orchestrator_gate = threading.Event()
        self.orchestrator_gate.set()
        self.orchestrator_entered = threading.Event()

    def gated(self, ctx: df.DurableOrchestrationContext) -> Any:
        """Blocks inside the SDK call until ``orchestrator_gate`` opens (a slow episode, for drain tests)."""
        self.orchestrator_entered.set()
        self.orchestrator_gate.wait(30)
        value = yield ctx.call_activity("echo", "g")
        return value

    def echo(self, data: str | None) -> str | None:
        value = json.loads(data) if data else None
        with self.lock:
            self.calls[f"echo:{value}"] += 1
        return json.dumps(value)

    def square(self, data: str | None) -> str:
        value = json.loads(data or "0")
        self.gate.wait(30)
        with self.lock:
            self.calls[f"square:{value}"] += 1
        return json.dumps(value * value)

    def sleepy(self, data: str | None) -> str:
        spec = json.loads(data or "{}")
        time.sleep(float(spec.get("seconds", 0)))
        return json.dumps(spec.get("value"))

    def flaky(self, data: str | None) -> str:
        with self.lock:
            self.calls["flaky"] += 1
            fail = self.calls["flaky"] <= self.flaky_failures
        if fail:
            raise ValueError(f"flaky failure {self.calls['flaky']}")
        return json.dumps("ok")

    def boom(self, data: str | None) -> str:
        raise RuntimeError("kaboom")

    def registry(self) -> FunctionRegistry:
        orchestrators = {
            name: df.Orchestrator.create(fn)
            for name, fn in {
                "chain": chain,
                "fan_out": fan_out,
                "first_of": first_of,
                "timer_then_done": timer_then_done,
                "wait_event": wait_event,
                "parent": parent,
                "counter": counter,
                "outlives_its_timer": outlives_its_timer,
                "with_retry": with_retry,
                "catches": catches,
                "window": window,
                "changes_its_mind": changes_its_mind,
                "gated": self.gated,
                "calls_missing": calls_missing,
                "slow_fan_out": slow_fan_out,
            }.items()
        }
        activities = {
            "echo": self.echo,
            "square": self.square,
            "sleepy": self.sleepy,
            "flaky": self.flaky,
            "boom": self.boom,
        }
        return FunctionRegistry(orchestrators=orchestrators, activities=activities)
