"""Timer triggers on the local host, as the WebJobs timer extension runs them (azure-webjobs-sdk-extensions,
``Extensions/Timers``; ``docs/local-host.md``, "Timer triggers").

* ``TimerSchedule.Create``: the schedule (``%SETTING%`` resolved from the app settings) is an NCRONTAB expression or
  a TimeSpan (``durable_local.host.schedules``). An unresolved setting or an invalid schedule puts the function in
  error ("The 'f' function is in error: ..."): the local host refuses to start instead of running without it.
* ``TimerListener``: at start, a missed occurrence (``ScheduleMonitor.CheckPastDueAsync``, with ``use_monitor``)
  runs at once with ``past_due`` true; else ``run_on_startup`` runs at once; then every occurrence. One invocation at
  a time per function: the next occurrence is computed after the invocation ends from the time it started, so
  occurrences missed during a long run collapse into one immediate run. A failing invocation is logged and the
  schedule goes on. Stopping waits for a running invocation.
* ``use_monitor`` (default true, turned off for schedules that fire more than once a minute) records the schedule
  status (``Last``, ``Next``, ``LastUpdated``), which the function receives in ``TimerRequest.schedule_status``. On
  Azure it is a blob in the host's storage account; here a JSON file per function next to the SQLite store
  (``<store>.timers/<function>.json``), or memory with the memory store (nothing is past due after a restart then).
* The function receives what the Python worker decodes from the host's ``TimerInfo`` JSON
  (``{"Schedule": {"AdjustForDST": ...}, "ScheduleStatus": {...} | null, "IsPastDue": ...}``, local times with their
  offset), decoded by ``azure.functions``' own ``TimerRequestConverter``.
* A retry policy runs inside the invocation (``durable_local.host.retries``): the next occurrence is computed when the
  last retry has ended. Stopping the host ends a wait between retries.
* ``TimerHost.run_now`` is a manual run (``POST /admin/functions/{name}``): ``TimerTriggerBinding.BindAsync`` builds a
  ``TimerInfo`` with the monitor's recorded status and ``IsPastDue`` false; the schedule and its status are left as
  they are.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from durable_local.host.config import HostConfigError
from durable_local.host.invoke import InvocationContext, log_invocation
from durable_local.host.loader import ClientBinding, LoadedApp, TimerFunction
from durable_local.host.retries import Attempts
from durable_local.host.schedules import Schedule, ScheduleError, parse_schedule

logger = logging.getLogger(__name__)

NEVER = datetime(1, 1, 1)  # noqa: DTZ001 - schedules run on local wall-clock time, as the host's DateTime.Now
"""``default(DateTime)``: a status time that was never set."""


@dataclass(frozen=True, slots=True)
class ScheduleStatus:
    """``ScheduleStatus`` in local wall-clock time."""

    last: datetime
    next: datetime
    last_updated: datetime

    def to_json(self) -> dict[str, str]:
        return {"Last": _dotnet_local(self.last), "Next": _dotnet_local(self.next),
                "LastUpdated": _dotnet_local(self.last_updated)}  # fmt: skip

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> ScheduleStatus:
        return ScheduleStatus(_local(data["Last"]), _local(data["Next"]), _local(data["LastUpdated"]))


class StatusStore(Protocol):
    """The schedule monitor's storage (``StorageScheduleMonitor`` on Azure)."""

    def get(self, function: str) -> ScheduleStatus | None: ...

    def put(self, function: str, status: ScheduleStatus) -> None: ...


class MemoryStatusStore:
    def __init__(self) -> None:
        self._statuses: dict[str, ScheduleStatus] = {}

    def get(self, function: str) -> ScheduleStatus | None:
        return self._statuses.get(function.lower())

    def put(self, function: str, status: ScheduleStatus) -> None:
        self._statuses[function.lower()] = status


class FileStatusStore:
    """One JSON file per function (``{"Last", "Next", "LastUpdated"}``, as the host's status blob)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, function: str) -> Path:
        return self.folder / f"{function.lower()}.json"

    def get(self, function: str) -> ScheduleStatus | None:
        path = self._path(function)
        if not path.exists():
            return None
        try:
            return ScheduleStatus.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            logger.warning("timer status %s is unreadable; starting without it", path)
            return None

    def put(self, function: str, status: ScheduleStatus) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(function)
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps(status.to_json()), encoding="utf-8")
        partial.replace(path)


def resolve_schedule(function: TimerFunction, environ: Mapping[str, str]) -> Schedule:
    """The function's schedule, or the host's "function is in error" message as a ``HostConfigError``."""
    text = function.schedule
    if len(text) > 2 and text.startswith("%") and text.endswith("%"):
        value = environ.get(text[1:-1])
        if value is None:
            raise HostConfigError(f"The '{function.name}' function is in error: '{text}' does not resolve to a value.")
        text = value
    try:
        return parse_schedule(text)
    except ScheduleError as exc:
        raise HostConfigError(f"The '{function.name}' function is in error: {exc}") from exc


def check_past_due(
    store: StatusStore, name: str, now: datetime, schedule: Schedule, status: ScheduleStatus | None
) -> tuple[timedelta, ScheduleStatus | None]:
    """``ScheduleMonitor.CheckPastDueAsync``: how long the recorded next occurrence is overdue (zero if not), and the
    status as recorded (initialized, or re-based when the schedule changed since it was written)."""
    if status is None:
        upcoming = schedule.next_after(now)
        if upcoming is None:
            return timedelta(0), None
        status = ScheduleStatus(NEVER, upcoming, now)
        store.put(name, status)
    else:
        base = status.last if status.last != NEVER else status.last_updated if status.last_updated != NEVER else now
        expected = schedule.next_after(base)
        if expected is not None and status.next != expected:
            # The schedule changed: a next occurrence in the past must not count as missed.
            if now > expected:
                base, expected = now, schedule.next_after(now)
            if expected is None:
                return timedelta(0), None
            status = ScheduleStatus(NEVER, expected, base)
            store.put(name, status)
    return (now - status.next if now > status.next else timedelta(0)), status


def timer_info_json(schedule: Schedule, status: ScheduleStatus | None, past_due: bool) -> str:
    """The ``TimerInfo`` the host serializes for the worker."""
    info = {
        "Schedule": {"AdjustForDST": schedule.adjust_for_dst},
        "ScheduleStatus": None if status is None else status.to_json(),
        "IsPastDue": past_due,
    }
    return json.dumps(info)


Invoke = Callable[[TimerFunction, str], Awaitable[None]]


class TimerListener:
    """One timer function's schedule loop, on the host's event loop."""

    def __init__(
        self,
        function: TimerFunction,
        schedule: Schedule,
        *,
        invoke: Invoke,
        store: StatusStore,
        now: Callable[[], datetime] = datetime.now,
    ) -> None:
        self.function = function
        self.schedule = schedule
        self._invoke = invoke
        self._store = store
        self._now = now
        self.monitored = function.use_monitor and not schedule.occurs_more_than_once_a_minute(now())
        self._stopping = asyncio.Event()
        self.status: ScheduleStatus | None = None
        self.invocations = 0

    async def run(self) -> None:
        now = self._now()
        past_due = False
        if self.monitored:
            overdue, self.status = check_past_due(
                self._store, self.function.name, now, self.schedule, self._store.get(self.function.name)
            )
            past_due = overdue > timedelta(0)
        if self.status is None:
            upcoming = self.schedule.next_after(now)
            self.status = None if upcoming is None else ScheduleStatus(NEVER, upcoming, NEVER)
        logger.info("Timer '%s' (%s): %s", self.function.name, self.schedule.expression, self._upcoming(now))
        if past_due:
            logger.info("Function '%s' is past due on startup. Executing now.", self.function.name)
            await self._fire(self._now(), past_due=True)
        elif self.function.run_on_startup:
            logger.info("Function '%s' is configured to run on startup. Executing now.", self.function.name)
            await self._fire(self._now(), run_on_startup=True)
        while not self._stopping.is_set() and self.status is not None:
            # .timestamp() of a naive datetime reads it as local time, daylight saving included.
            delay = max(0.0, self.status.next.timestamp() - time.time())
            try:
                await asyncio.wait_for(self._stopping.wait(), timeout=delay)
                return
            except TimeoutError:
                pass
            await self._fire(self._now())

    def stop(self) -> None:
        self._stopping.set()

    async def _fire(self, moment: datetime, *, past_due: bool = False, run_on_startup: bool = False) -> None:
        """``InvokeJobFunction``: invoke, then record the status from the invocation's (adjusted) start time."""
        if self._stopping.is_set():
            return
        self.invocations += 1
        info = timer_info_json(self.schedule, self.status if self.monitored else None, past_due)
        try:
            await self._invoke(self.function, info)
        except Exception:
            logger.exception("Error occurred during scheduled invocation for '%s'.", self.function.name)
        adjusted = moment
        if not past_due and not run_on_startup and self.status is not None and self.status.next > moment:
            adjusted = self.status.next  # fired a little early (clock skew): don't schedule the same time twice
        upcoming = self.schedule.next_after(adjusted)
        self.status = None if upcoming is None else ScheduleStatus(adjusted, upcoming, adjusted)
        if self.monitored and self.status is not None:
            self._store.put(self.function.name, self.status)

    def _upcoming(self, now: datetime) -> str:
        moments: list[str] = []
        moment: datetime | None = now
        for _ in range(5):
            moment = None if moment is None else self.schedule.next_after(moment)
            if moment is None:
                break
            moments.append(moment.isoformat(sep=" "))
        return "next occurrences " + (", ".join(moments) if moments else "none")


class TimerHost:
    """Every timer function of an app: validated when built, run on the host's loop between ``start`` and ``stop``."""

    def __init__(
        self,
        app: LoadedApp,
        environ: Mapping[str, str],
        *,
        store: StatusStore,
        client_binding: Callable[[ClientBinding], str],
    ) -> None:
        self._app = app
        self._client_binding = client_binding
        problems: list[str] = []
        self.listeners = []
        for function in app.timers:
            try:
                schedule = resolve_schedule(function, environ)
            except HostConfigError as exc:
                problems.append(str(exc))
                continue
            self.listeners.append(TimerListener(function, schedule, invoke=self._invoke, store=store))
        if problems:
            raise HostConfigError("\n".join(problems))
        self._futures: list[Future[None]] = []
        self._manual: set[asyncio.Task[None]] = set()
        self._stopping: asyncio.Event | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._futures = [asyncio.run_coroutine_threadsafe(listener.run(), loop) for listener in self.listeners]

    def stop(self, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        """Stop scheduling; a running invocation may finish (up to ``timeout`` seconds); waits between retries end."""
        for listener in self.listeners:
            loop.call_soon_threadsafe(listener.stop)
        loop.call_soon_threadsafe(self._stop_retries)
        deadline = time.monotonic() + timeout
        manual = asyncio.run_coroutine_threadsafe(self._manual_runs(), loop)
        for future in [*self._futures, manual]:
            try:
                future.result(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:
                future.cancel()
                logger.warning("a timer invocation was still running at shutdown; cancelled")

    def _stop_retries(self) -> None:
        self._stopping_event().set()

    def _stopping_event(self) -> asyncio.Event:
        if self._stopping is None:
            self._stopping = asyncio.Event()
        return self._stopping

    async def _manual_runs(self) -> None:
        if self._manual:
            await asyncio.gather(*self._manual, return_exceptions=True)

    def run_now(self, name: str) -> None:
        """A manual run of timer function ``name`` (call on the host's loop): started in the background."""
        listener = next(listener for listener in self.listeners if listener.function.name == name)
        status = listener.status if listener.monitored else None
        info = timer_info_json(listener.schedule, status, past_due=False)

        async def run() -> None:
            try:
                await self._invoke(listener.function, info)
            except Exception:
                logger.exception("Error occurred during the manual invocation of '%s'.", name)

        task = asyncio.get_running_loop().create_task(run())
        self._manual.add(task)
        task.add_done_callback(self._manual.discard)

    async def _invoke(self, function: TimerFunction, info_json: str) -> None:
        """One invocation, run again under the function's retry policy until it succeeds or gives up."""
        attempts = Attempts(function.name, function.retry)
        stopping = self._stopping_event()
        while True:
            try:
                await self._attempt(function, info_json, attempts)
                return
            except Exception as exc:
                delay = attempts.failed(exc)
                if delay is None:
                    raise
                try:
                    await asyncio.wait_for(stopping.wait(), timeout=delay)
                except TimeoutError:
                    continue
                raise  # the host is stopping: the invocation ends with its last failure

    async def _attempt(self, function: TimerFunction, info_json: str, attempts: Attempts) -> None:
        from azure.functions import meta
        from azure.functions.timer import TimerRequestConverter

        started = time.perf_counter()
        request = TimerRequestConverter.decode(meta.Datum(value=info_json, type="json"), trigger_metadata={})
        kwargs: dict[str, Any] = {function.timer_parameter: request}
        for client in function.clients:
            kwargs[client.parameter] = self._client_binding(client)
        if function.context_parameter:
            kwargs[function.context_parameter] = InvocationContext(
                function.name, str(self._app.app_dir), retry_context=attempts.context
            )
        try:
            if function.is_async:
                await function.handler(**kwargs)
            else:
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(None, functools.partial(function.handler, **kwargs))
        except Exception as exc:
            log_invocation(function.name, started, f"Failed: {type(exc).__name__}: {exc}")
            raise
        log_invocation(function.name, started, "Succeeded")


def _dotnet_local(moment: datetime) -> str:
    """A local ``DateTime`` as Newtonsoft writes it: offset included, trailing zeros of the fraction trimmed."""
    if moment == NEVER:
        offset = datetime.now().astimezone().strftime("%z")
        return f"0001-01-01T00:00:00{offset[:3]}:{offset[3:]}"
    aware = moment.astimezone()
    text = aware.strftime("%Y-%m-%dT%H:%M:%S")
    if aware.microsecond:
        text += "." + f"{aware.microsecond:06d}".rstrip("0")
    offset = aware.strftime("%z")
    return f"{text}{offset[:3]}:{offset[3:]}"


def _local(text: str) -> datetime:
    """The naive local time of a stored status time."""
    parsed = datetime.fromisoformat(text)
    if parsed.year == 1:
        return NEVER
    return parsed.astimezone().replace(tzinfo=None) if parsed.tzinfo else parsed
