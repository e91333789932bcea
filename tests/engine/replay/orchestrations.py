"""Orchestrators and activities used by the replay tests, written the way users write them."""

from __future__ import annotations

import json
from collections.abc import Callable, Generator
from datetime import timedelta
from typing import Any

import azure.durable_functions as df

Orch = Callable[[str], str]
Gen = Generator[Any, Any, Any]


def handle(fn: Callable[[df.DurableOrchestrationContext], Gen]) -> Orch:
    created: Orch = df.Orchestrator.create(fn)
    return created


def echo(data: str | None) -> str | None:
    return data


def exclaim(data: str | None) -> str:
    return json.dumps(json.loads(data or '""') + "!")


def double(data: str | None) -> str:
    return json.dumps(json.loads(data or "0") * 2)


def boom(data: str | None) -> str:
    raise RuntimeError(f"boom {data}")


class Flaky:
    """Fails the first ``failures`` calls, then succeeds."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    def __call__(self, data: str | None) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(f"flaky failure {self.calls}")
        return json.dumps(f"ok after {self.calls}")


ACTIVITIES: dict[str, Callable[[str | None], str | None]] = {
    "echo": echo,
    "exclaim": exclaim,
    "double": double,
    "boom": boom,
}


def chain(context: df.DurableOrchestrationContext) -> Gen:
    first = yield context.call_activity("exclaim", context.get_input())
    second = yield context.call_activity("exclaim", first)
    third = yield context.call_activity("exclaim", second)
    return third


def fan_out(context: df.DurableOrchestrationContext) -> Gen:
    count = context.get_input()
    results = yield context.task_all([context.call_activity("double", i) for i in range(count)])
    return sum(results)


def first_of_two(context: df.DurableOrchestrationContext) -> Gen:
    slow = context.call_activity("echo", "slow")
    fast = context.call_activity("echo", "fast")
    winner = yield context.task_any([slow, fast])
    return winner.result


def timers(context: df.DurableOrchestrationContext) -> Gen:
    start = context.current_utc_datetime
    yield context.create_timer(start + timedelta(hours=1))
    yield context.create_timer(start + timedelta(days=10))
    return context.current_utc_datetime.isoformat()


def approval(context: df.DurableOrchestrationContext) -> Gen:
    first = yield context.wait_for_external_event("Approve")
    second = yield context.wait_for_external_event("Approve")
    return [first, second]


def child(context: df.DurableOrchestrationContext) -> Gen:
    value = context.get_input()
    if value == "fail":
        raise ValueError("child says no")
    doubled = yield context.call_activity("double", value)
    return doubled


def parent(context: df.DurableOrchestrationContext) -> Gen:
    ok = yield context.call_sub_orchestrator("child", 21, "kid-1")
    try:
        yield context.call_sub_orchestrator("child", "fail", "kid-2")
    except Exception as exc:
        return {"ok": ok, "error": str(exc)}
    return {"ok": ok, "error": None}


def caught_failure(context: df.DurableOrchestrationContext) -> Gen:
    try:
        yield context.call_activity("boom", 1)
    except Exception as exc:
        recovered = yield context.call_activity("echo", "recovered")
        return {"caught": str(exc), "then": recovered}
    return "not reached"


def uncaught_failure(context: df.DurableOrchestrationContext) -> Gen:
    yield context.call_activity("echo", 1)
    raise ValueError("orchestrator gave up")


def with_status(context: df.DurableOrchestrationContext) -> Gen:
    context.set_custom_status({"stage": 1})
    yield context.call_activity("echo", 1)
    context.set_custom_status({"stage": 2})
    yield context.call_activity("echo", 2)
    return "done"


def waits_forever(context: df.DurableOrchestrationContext) -> Gen:
    yield context.wait_for_external_event("never")
    return "unreachable"


def stepper(context: df.DurableOrchestrationContext) -> Gen:
    total = 0
    for i in range(3):
        total += yield context.call_activity("double", i)
    return total


def uses_entity(context: df.DurableOrchestrationContext) -> Gen:
    entity = df.EntityId("counter", "k")
    yield context.call_entity(entity, "add", 1)
    return "x"


def uses_http(context: df.DurableOrchestrationContext) -> Gen:
    yield context.call_http("GET", "http://127.0.0.1:1/")
    return "x"


def retrying(context: df.DurableOrchestrationContext) -> Gen:
    options = df.RetryOptions(first_retry_interval_in_milliseconds=5000, max_number_of_attempts=3)
    try:
        value = yield context.call_activity_with_retry("flaky", options, "in")
    except Exception as exc:
        return {"failed": str(exc)}
    after = yield context.call_activity("echo", "after")
    return {"value": value, "after": after}


def generations(context: df.DurableOrchestrationContext) -> Gen:
    """Three generations; each races a quick activity against a slow one and moves on with the winner."""
    state = context.get_input() or {"gen": 0, "seen": []}
    quick = context.call_activity("echo", f"quick{state['gen']}")
    slow = context.call_activity("echo", f"slow{state['gen']}")
    winner = yield context.task_any([quick, slow])
    state = {"gen": state["gen"] + 1, "seen": [*state["seen"], winner.result]}
    if state["gen"] >= 3:
        return state
    context.continue_as_new(state)
    return None


def timeout_race(context: df.DurableOrchestrationContext) -> Gen:
    """The usual timeout pattern: the timer loses, is cancelled, and the instance continues as new."""
    state = context.get_input() or {"gen": 0}
    deadline = context.create_timer(context.current_utc_datetime + timedelta(hours=1))
    work = context.call_activity("echo", state["gen"])
    winner = yield context.task_any([work, deadline])
    if winner == work:
        deadline.cancel()
    if state["gen"] >= 2:
        return state
    context.continue_as_new({"gen": state["gen"] + 1})
    return None


WINDOW_K = 3
WINDOW_N = 12


def naive_window(context: df.DurableOrchestrationContext) -> Gen:
    """Keep K activities running with ``task_any``, refilling the window after each completion."""
    pending: list[Any] = []
    next_item = 0
    results = []
    while next_item < WINDOW_N or pending:
        while len(pending) < WINDOW_K and next_item < WINDOW_N:
            pending.append(context.call_activity("echo", next_item))
            next_item += 1
        winner = yield context.task_any(pending)
        pending.remove(winner)
        results.append(winner.result)
    return sorted(results)


def _nudged_window(context: df.DurableOrchestrationContext, nudge: Callable[[], Any]) -> Gen:
    """The sliding window, plus ``nudge()`` (a timer) among the candidates whenever a yield adds tasks."""
    pending: list[Any] = []
    next_item = 0
    results = []
    while next_item < WINDOW_N or pending:
        added = False
        while len(pending) < WINDOW_K and next_item < WINDOW_N:
            pending.append(context.call_activity("echo", next_item))
            next_item += 1
            added = True
        candidates = list(pending)
        if added:
            candidates.append(nudge())
        winner = yield context.task_any(candidates)
        if winner in pending:
            pending.remove(winner)
            results.append(winner.result)
    return sorted(results)


def timer_window(context: df.DurableOrchestrationContext) -> Gen:
    """Same window, plus the already-due timer whenever a yield adds tasks (a winning timer is a no-op)."""
    return (yield from _nudged_window(context, lambda: context.create_timer(context.current_utc_datetime)))


def cancelled_timer_window(context: df.DurableOrchestrationContext) -> Gen:
    """Same window, with the collector's nudge: a far timer cancelled before it is ever yielded."""

    def nudge() -> Any:
        timer = context.create_timer(context.current_utc_datetime + timedelta(days=2))
        timer.cancel()
        return timer

    return (yield from _nudged_window(context, nudge))


def status_then_continue(context: df.DurableOrchestrationContext) -> Gen:
    generation = context.get_input() or 0
    if generation == 0:
        context.set_custom_status({"set_in": 0})
    yield context.call_activity("echo", generation)
    if generation < 2:
        context.continue_as_new(generation + 1)
        return None
    return generation


def fails_after_first_of_two(context: df.DurableOrchestrationContext) -> Gen:
    first = context.call_activity("echo", "a")
    second = context.call_activity("echo", "b")
    yield context.task_any([first, second])
    raise RuntimeError("failed with a task still running")


def anonymous_child(context: df.DurableOrchestrationContext) -> Gen:
    value = yield context.call_sub_orchestrator("child", 5)
    return value
