"""A Graph status check that waits for its query (window version 2): one activity, several checks.

At realistic latency (queries of 30 s to minutes) a Graph chunk's orchestration episodes are its status checks: a
durable timer, then the check activity, two episodes a check, about ten checks a chunk. From window version 2 the
lane calls the check activity at once when its check is due within ``RunOptions.poll_wait`` (60 s), and the activity
waits for it: it checks the query at ``notBefore`` and, while it is still running, again on the same schedule the
lane would follow (``RunOptions.next_poll`` of its running time), as long as the next check is due within its wait
(and before its budget slot's deadline). It returns when the query is finished (exported in the same call, as
before) or when the next check would fall past that bound, saying how many checks it made and when the last was
sent and due (``GraphChecked.checks``, ``checked_at``, ``due_at``): the lane goes on from there. The checks are the
ones the timers made, at the same moments, so a finished query is noticed no later; the episodes are one per
activity.

The wait reads the app's clock (``Waiter.now``: ``shared.clock.utc_now``, moved by ``COLLECTOR_CLOCK_FILE`` in the
local host's tests and benchmarks) and sleeps in short steps while that clock is moved, so a moved clock shortens it
as it shortens a durable timer. The hosted trigger is ``async`` and sleeps with ``asyncio.sleep``: the Functions
Python worker runs an async function on its event loop, so a waiting check holds no worker thread (the checks and the
export themselves run in a thread, ``asyncio.to_thread``: they are blocking HTTP). It still counts as one of the
activities a host runs at once (``maxConcurrentActivityFunctions``) while it waits. A collection's cancel or a
switch of executions waits for it at most the wait bound.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime

from shared.models import ActivityResult, iso, parse_iso
from shared.requests.run_options import RunOptions
from shared.sources.graph import query_rules
from shared.sources.graph.calls import GraphChecked, GraphPoll
from shared.window.state import later

MOVED_CLOCK_STEP = 0.05
"""Real seconds between two reads of a moved clock while waiting (a benchmark runs time up to 20 times faster)."""


@dataclass(frozen=True, slots=True)
class Waiter:
    """The clock a waiting check reads and how it sleeps until a moment of that clock."""

    now: Callable[[], datetime]
    sleep: Callable[[float], None] = time.sleep
    """Blocks for real seconds (the synchronous path; a test's waiter moves its own clock instead)."""
    moved: bool = False
    """The clock may run faster than the wall clock: sleep in steps of ``MOVED_CLOCK_STEP`` and read it again."""

    def _step(self, moment: datetime) -> float:
        left = (moment - self.now()).total_seconds()
        return min(left, MOVED_CLOCK_STEP) if self.moved and left > 0 else left

    def until(self, moment: datetime) -> None:
        while (step := self._step(moment)) > 0:
            self.sleep(step)

    async def until_async(self, moment: datetime) -> None:
        while (step := self._step(moment)) > 0:
            await asyncio.sleep(step)


_WAITER: ContextVar[Waiter | None] = ContextVar("graph_poll_waiter", default=None)


@contextmanager
def waiting_with(waiter: Waiter) -> Iterator[None]:
    """Synchronous bodies run inside this block wait with ``waiter`` (a replay test's clock); outside it a waiting
    payload is checked once, at once."""
    token = _WAITER.set(waiter)
    try:
        yield
    finally:
        _WAITER.reset(token)


def current() -> Waiter | None:
    return _WAITER.get()


class Check:
    """What ``checks`` yields when it wants the query checked now: send it the check's ``ActivityResult``."""


class CancelRequested(Exception):  # noqa: N818 - a signal thrown into ``checks``, not an error
    """Thrown into ``checks`` instead of sending a check's result: the collection's cancel was requested, so the
    activity returns what its previous check found (or that it checked nothing) rather than check and perhaps export
    a chunk after the cancel."""


CHECK = Check()


def checks(poll: GraphPoll, now: Callable[[], datetime]) -> Generator[datetime | Check, ActivityResult, ActivityResult]:
    """The schedule of one waiting check, as a generator: it yields a moment to sleep until, or ``CHECK`` (and is
    sent that check's result); it returns the activity's result, with the checks it made.

    The first check is at ``notBefore`` (at once when that has passed); each later one ``next_poll(running)`` after
    the previous one was sent, while that is within the wait bound: ``waitSeconds`` from the start, and no later
    than the budget slot's deadline (past it the slot must be renewed before the next request).
    """
    start = now()
    bound = later(start, poll.wait_seconds)
    if poll.call.slot_deadline:
        bound = min(bound, parse_iso(poll.call.slot_deadline))
    if poll.wait_until is not None:  # the window is switching executions: it waits for this activity too
        bound = min(bound, poll.wait_until)
    schedule = RunOptions(
        poll_fraction=poll.poll_fraction,
        poll_min_interval_seconds=poll.poll_min_seconds,
        poll_max_interval_seconds=poll.poll_max_seconds,
    )
    due = poll.not_before or start
    made = 0
    previous: ActivityResult | None = None
    while True:
        if due > now():
            yield min(due, bound)
        issued, planned = now(), min(due, bound)
        made += 1
        try:
            result = yield CHECK
        except CancelRequested:
            if previous is not None:
                return previous
            cancelled = GraphChecked(query_rules.PENDING, "not checked: the collection's cancel was requested")
            stamps = {"checks": 0, "checkedAt": iso(issued), "dueAt": iso(min(planned, issued))}
            return ActivityResult.success({**cancelled.to_json(), **stamps})
        checked = GraphChecked.from_json(result.data) if result.data else None
        if checked is None or (result.error is not None and not result.needs_split):
            return result  # a failure: the lane retries it as before
        marked = {**result.data, "checks": made, "checkedAt": iso(issued), "dueAt": iso(min(planned, issued))}
        if checked.outcome != query_rules.PENDING:
            return ActivityResult(result.ok, marked, result.error, result.needs_split)
        previous = ActivityResult(result.ok, marked, result.error, result.needs_split)
        submitted = poll.submitted_at or issued
        due = later(issued, schedule.next_poll((issued - submitted).total_seconds()))
        if due > bound:
            return previous


def run(
    poll: GraphPoll, waiter: Waiter, check: Callable[[], ActivityResult], cancelled: Callable[[], bool] = lambda: False
) -> ActivityResult:
    """``checks`` driven synchronously: sleeps with ``waiter``, checks with ``check``; before each check,
    ``cancelled()`` says whether the collection's cancel was requested (then no more checks: it returns what the
    previous check found, or a pending answer that says it checked nothing)."""
    steps = checks(poll, waiter.now)
    answer: ActivityResult | None = None
    try:
        while True:
            step = steps.send(answer) if answer is not None else next(steps)
            answer = None
            if isinstance(step, Check) and cancelled():
                steps.throw(CancelRequested())  # it returns: StopIteration below
            if isinstance(step, Check):
                answer = check()
            else:
                waiter.until(step)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def run_async(
    poll: GraphPoll, waiter: Waiter, check: Callable[[], ActivityResult], cancelled: Callable[[], bool] = lambda: False
) -> ActivityResult:
    """``checks`` on an event loop: sleeps with ``asyncio.sleep``, each check (blocking HTTP) and each look for a
    cancel request (``run``) in a thread."""
    steps = checks(poll, waiter.now)
    answer: ActivityResult | None = None
    try:
        while True:
            step = steps.send(answer) if answer is not None else next(steps)
            answer = None
            if isinstance(step, Check) and await asyncio.to_thread(cancelled):
                steps.throw(CancelRequested())  # it returns: StopIteration below
            if isinstance(step, Check):
                answer = await asyncio.to_thread(check)
            else:
                await waiter.until_async(step)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
