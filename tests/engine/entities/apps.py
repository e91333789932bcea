"""Entities and orchestrators for the engine-level entity tests (real SDK handles)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import azure.durable_functions as df

from durable_local.model import FunctionRegistry


def ledger(context: df.DurableEntityContext) -> None:
    """Appends every input to a list, so the state shows the order operations ran in."""
    entries = context.get_state(lambda: [])
    if context.operation_name == "append":
        entries.append(context.get_input())
    elif context.operation_name == "get":
        context.set_result(entries)
    context.set_state(entries)


def tally(context: df.DurableEntityContext) -> None:
    """A counter whose ``add`` returns the new value."""
    value = context.get_state(lambda: 0)
    if context.operation_name == "add":
        value += context.get_input()
        context.set_result(value)
    elif context.operation_name == "get":
        context.set_result(value)
    elif context.operation_name == "delete":
        context.destruct_on_exit()
        return
    context.set_state(value)


def appender(ctx: df.DurableOrchestrationContext) -> Any:
    """Signals ``n`` appends tagged with this sender, reading the ledger half-way and at the end."""
    spec = ctx.get_input()
    entity = df.EntityId("ledger", spec["key"])
    seen_midway = None
    for index in range(spec["n"]):
        ctx.signal_entity(entity, "append", f"{spec['tag']}:{index}")
        if index == spec["n"] // 2:
            seen_midway = yield ctx.call_entity(entity, "get")
    final = yield ctx.call_entity(entity, "get")
    return {"midway": seen_midway, "final": final}


def adder(ctx: df.DurableOrchestrationContext) -> Any:
    """``n`` sequential calls ``add 1``; returns the values the entity answered."""
    spec = ctx.get_input()
    entity = df.EntityId("tally", spec["key"])
    answers = []
    for _ in range(spec["n"]):
        answers.append((yield ctx.call_entity(entity, "add", 1)))
    return answers


def window_calls(ctx: df.DurableOrchestrationContext) -> Any:
    """At most ``k`` entity calls in flight (task_any), with the collector's already-due timer when ``nudge``."""
    spec = ctx.get_input()
    keys = list(spec["keys"])
    pending: list[Any] = []
    results: list[Any] = []
    added = True
    while keys or pending:
        while keys and len(pending) < spec["k"]:
            pending.append(ctx.call_entity(df.EntityId("tally", keys.pop(0)), "add", 1))
            added = True
        tasks = list(pending)
        nudge = None
        if spec["nudge"] and added:
            nudge = ctx.create_timer(ctx.current_utc_datetime)
            tasks.append(nudge)
        added = False
        winner = yield ctx.task_any(tasks)
        if winner is nudge:
            continue
        pending.remove(winner)
        results.append(winner.result)
    return results


def call_with_timeout(ctx: df.DurableOrchestrationContext) -> Any:
    """An entity call raced against a durable timer (the timeout pattern)."""
    call = ctx.call_entity(df.EntityId("tally", ctx.get_input()), "get")
    timeout = ctx.create_timer(ctx.current_utc_datetime + timedelta(seconds=1))
    winner = yield ctx.task_any([call, timeout])
    return "timeout" if winner is timeout else winner.result


class Recorder:
    """Wraps entity handles to see each batch: how many run at once per entity, and on which thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.batches: list[tuple[str, int, str]] = []

    def wrap(self, function: Any) -> Any:
        handle = df.Entity.create(function)

        def run(batch_json: str) -> str:
            request = json.loads(batch_json)
            entity = f"@{request['self']['name']}@{request['self']['key']}"
            with self.lock:
                self.active[entity] += 1
                self.peak[entity] = max(self.peak[entity], self.active[entity])
                self.batches.append((entity, len(request["batch"]), threading.current_thread().name))
            try:
                time.sleep(0.001)  # long enough for a second batch of the same entity to overlap, were it allowed
                return str(handle(batch_json))
            finally:
                with self.lock:
                    self.active[entity] -= 1

        return run

    def registry(self) -> FunctionRegistry:
        orchestrators = {
            name: df.Orchestrator.create(fn)
            for name, fn in {
                "appender": appender,
                "adder": adder,
                "window_calls": window_calls,
                "call_with_timeout": call_with_timeout,
            }.items()
        }
        entities = {"ledger": self.wrap(ledger), "tally": self.wrap(tally)}
        return FunctionRegistry(orchestrators=orchestrators, activities={}, entities=entities)
