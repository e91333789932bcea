"""Sample app for the local host's timer triggers: what each invocation saw is kept in ``INVOCATIONS``."""

from __future__ import annotations

import threading
import time
from typing import Any

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)

INVOCATIONS: dict[str, list[dict[str, Any]]] = {}
_lock = threading.Lock()


def _record(name: str, timer: func.TimerRequest, started: float, **extra: Any) -> None:
    entry = {"started": started, "ended": time.monotonic(), "past_due": timer.past_due,
             "status": dict(timer.schedule_status), "schedule": dict(timer.schedule), **extra}  # fmt: skip
    with _lock:
        INVOCATIONS.setdefault(name, []).append(entry)


@app.timer_trigger(schedule="*/1 * * * * *", arg_name="timer")
def every_second(timer: func.TimerRequest) -> None:
    """Takes longer than its period: invocations must never overlap."""
    started = time.monotonic()
    time.sleep(1.5)
    _record("every_second", timer, started)


@app.timer_trigger(schedule="0 0 0 1 1 *", arg_name="timer", run_on_startup=True, use_monitor=False)
async def on_startup(timer: func.TimerRequest, context: func.Context) -> None:
    _record("on_startup", timer, time.monotonic(), function=context.function_name)


@app.timer_trigger(schedule="0 0 0 1 1 *", arg_name="timer")
def yearly(timer: func.TimerRequest) -> None:
    """Only runs when past due (the schedule monitor missed New Year)."""
    _record("yearly", timer, time.monotonic())


@app.timer_trigger(schedule="%TICK_SCHEDULE%", arg_name="timer")
@app.durable_client_input(client_name="client")
async def starts_orchestration(timer: func.TimerRequest, client: df.DurableOrchestrationClient) -> None:
    """The common companion of a Durable app: a schedule that starts (a singleton) orchestration."""
    started = time.monotonic()
    existing = await client.get_status("from-timer")
    if existing is None or existing.runtime_status is None:
        await client.start_new("greet", "from-timer", "timer")
    _record("starts_orchestration", timer, started)


@app.orchestration_trigger(context_name="context")
def greet(context: df.DurableOrchestrationContext):  # type: ignore[no-untyped-def]
    result = yield context.call_activity("shout", context.get_input())
    return result


@app.activity_trigger(input_name="name")
def shout(name: str) -> str:
    return name.upper() + "!"
