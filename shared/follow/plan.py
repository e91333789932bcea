"""A follower's cycle as pure functions: which passes to run now, what their outcome changes, when to wake next.

Each cycle the follower (``orchestrators.follow``) plans its passes, runs each as a collection (the collect
orchestrator over explicit windows, as a sub-orchestration) and applies its output here. One pass per UTC day that
has work: the windows closed since the coverage ends (never closer to now than ``delay``, at most
``MAX_NEW_WINDOWS`` per cycle so a long outage is caught up in bounded passes), the provisional windows whose
late-arrival band has passed (read again: ``activities.reread``), and the failed windows whose back-off has passed.
Each pass's manifest covers its whole day so far (``scope``: ``activities.manifest_scope``). Deterministic: time is
the orchestration's ``current_utc_datetime``, handed in.

Coverage never has a gap: it advances over a pass's new windows once that pass ran (each window collected or listed
as failed, and a failed window is retried until it is collected); a pass the service refused as a whole (the
collection was doomed: auditing off, a permission removed) advances nothing and pauses the follower, which tries
again at its next wake and goes on from where its coverage ends.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from shared.follow.state import (
    DAY,
    FollowSpec,
    FollowState,
    WindowFailure,
    day_collection_id,
    day_of,
    day_start,
)
from shared.models import Chunk, JsonDict, iso
from shared.timeline.latency import AUDIT_LATENCY

MAX_NEW_WINDOWS = 192
"""New windows one cycle collects at most (catch-up after an outage continues at once in the next cycle)."""
RETRY_CAP = timedelta(hours=6)
"""The longest back-off between two tries of a failed window."""
MAX_LISTED = 20
"""Failures the status lists (the newest; the rest are counted); the day manifests list all of them."""


def frontier(spec: FollowSpec, now: datetime) -> datetime:
    """The end of the last window that closed at least ``delay`` before ``now``, on the follower's window grid."""
    edge = now - spec.delay
    if edge <= spec.start:
        return spec.start
    return spec.start + spec.interval * ((edge - spec.start) // spec.interval)


@dataclass(frozen=True, slots=True)
class Pass:
    """One collection over some windows of one day."""

    day: date
    collection_id: str
    instance_id: str
    new: tuple[Chunk, ...]
    settle: tuple[Chunk, ...]
    retry: tuple[Chunk, ...]
    scope: JsonDict

    @property
    def windows(self) -> tuple[Chunk, ...]:
        return tuple(sorted({*self.new, *self.settle, *self.retry}, key=lambda c: (c.start, c.end)))

    def headline(self) -> JsonDict:
        return {
            "instanceId": self.instance_id,
            "collectionId": self.collection_id,
            "day": self.day.isoformat(),
            "windows": len(self.windows),
            "new": len(self.new),
            "settle": len(self.settle),
            "retry": len(self.retry),
        }


def new_windows(spec: FollowSpec, state: FollowState, now: datetime) -> list[Chunk]:
    """The windows closed since the coverage ends, oldest first, at most ``MAX_NEW_WINDOWS``."""
    end = frontier(spec, now)
    found: list[Chunk] = []
    cursor = state.covered_until
    while cursor + spec.interval <= end and len(found) < MAX_NEW_WINDOWS:
        found.append(Chunk(cursor, cursor + spec.interval))
        cursor += spec.interval
    return found


def plan(spec: FollowSpec, state: FollowState, now: datetime) -> list[Pass]:
    """This cycle's passes, one per day with work, oldest day first."""
    new = new_windows(spec, state, now)
    settle = [c for c in state.provisional if c.end + AUDIT_LATENCY <= now]
    retry = [f.chunk for f in state.failures if f.retry_at <= now]
    covered = max([state.covered_until, *(c.end for c in new)])
    days = sorted({day_of(c.start) for c in (*new, *settle, *retry)})
    passes: list[Pass] = []
    for day in days:
        on = [c for c in new if day_of(c.start) == day]
        again = [c for c in settle if day_of(c.start) == day]
        retried = [c for c in retry if day_of(c.start) == day]
        begin, end = max(spec.start, day_start(day)), min(day_start(day) + DAY, covered)
        scope = {
            "ranges": [{"start": iso(begin), "end": iso(end)}],
            "failures": [
                f.manifest_json() for f in state.failures if day_of(f.chunk.start) == day and f.chunk not in retried
            ],
            "provisional": [c.span_json() for c in state.provisional if day_of(c.start) == day],
        }
        collection = day_collection_id(spec.follow_id, day)
        instance = f"{collection}-p{state.passes + len(passes)}"
        passes.append(Pass(day, collection, instance, tuple(on), tuple(again), tuple(retried), scope))
    return passes


def _inside(chunk: Chunk, windows: Iterable[Chunk]) -> bool:
    return any(w.start <= chunk.start and chunk.end <= w.end for w in windows)


def _backoff(spec: FollowSpec, attempts: int) -> timedelta:
    wait: timedelta = spec.every * 2 ** max(0, attempts - 1)
    return min(wait, RETRY_CAP)


def apply(spec: FollowSpec, state: FollowState, done: Pass, output: JsonDict | None, now: datetime) -> bool:
    """Update ``state`` with a pass's output (None: the pass itself failed); False when the follower pauses."""
    state.passes += 1
    if output is None:
        state.last_error = {
            "at": iso(now),
            "kind": "pass_failed",
            "message": "the collection pass failed",
            **done.headline(),
        }
        return True
    reason = output.get("reason") if isinstance(output.get("reason"), dict) else None
    if output.get("status") == "Failed":
        reason = reason or {"kind": "failed", "message": "the collection pass failed"}
        since = state.paused.get("since") if state.paused else iso(now)
        state.paused = {"since": since, "kind": reason.get("kind"), "message": reason.get("message")}
        state.last_error = {
            "at": iso(now),
            "kind": reason.get("kind"),
            "message": reason.get("message"),
            **done.headline(),
        }
        return False
    state.paused = None
    earlier = {f.chunk: f for f in state.failures}
    state.failures = [f for f in state.failures if f.chunk not in done.retry]
    for failure in output.get("failures") or []:
        chunk = Chunk.from_json(failure["chunk"])
        kind, message = str(failure.get("kind")), str(failure.get("message"))
        state.last_error = {
            "at": iso(now),
            "kind": kind,
            "message": message,
            "window": chunk.label(),
            **done.headline(),
        }
        if _inside(chunk, done.settle):
            continue  # its earlier read stands and stays provisional: read again at the next cycle
        before = next((f for c, f in earlier.items() if c.start <= chunk.start and chunk.end <= c.end), None)
        attempts = (before.attempts if before else 0) + 1
        state.failures.append(WindowFailure(chunk, kind, message, attempts, now + _backoff(spec, attempts)))
    state.failures.sort(key=lambda f: (f.chunk.start, f.chunk.end))
    if done.new:
        state.covered_until = max(state.covered_until, *(c.end for c in done.new))
    written = output.get("provisionalWindows")
    kept = [c for c in state.provisional if day_of(c.start) != done.day]
    if isinstance(written, list):
        kept += [Chunk.from_json(w) for w in written]
    else:  # the manifest was not written: nothing read again counts as final, the new windows are provisional
        kept += [c for c in state.provisional if day_of(c.start) == done.day] + list(done.new)
    state.provisional = sorted(set(kept), key=lambda c: (c.start, c.end))
    return True


def next_wake(spec: FollowSpec, state: FollowState, now: datetime) -> datetime:
    """When the next cycle runs: at once while new windows are waiting (catching up), else at the next multiple of
    ``every`` (counted from the follower's start)."""
    if state.paused is None and new_windows(spec, state, now):
        return now
    steps = (now - spec.start) // spec.every + 1
    return spec.start + spec.every * steps


def final_before(state: FollowState) -> datetime:
    """The start of the oldest UTC day not final yet: every day before it is covered to its end, with no window still
    provisional and none still failed, so no pass will read it again (its passes' instances may be purged)."""
    starts = [state.covered_until, *(c.start for c in state.provisional), *(f.chunk.start for f in state.failures)]
    return day_start(day_of(min(starts)))


def status(
    spec: FollowSpec, state: FollowState, now: datetime, running: Pass | None = None, *, stopping: bool = False
) -> JsonDict:
    """The follower's custom status (and, once stopped, its output's view): coverage, provisional windows,
    failures, pause, last error, lag behind ``now``; ``stopping`` while it finishes a pass after a stop."""
    provisional = state.provisional
    behind = frontier(spec, now) - state.covered_until
    phase = (
        "stopped"
        if state.stopped
        else "stopping"
        if stopping
        else "paused"
        if state.paused
        else "catching up"
        if behind > spec.interval
        else "following"
    )
    return {
        "followId": spec.follow_id,
        "tenantId": spec.tenant_id,
        "source": spec.source,
        "filters": spec.filters,
        "intervalMinutes": spec.interval.total_seconds() / 60,
        "everyMinutes": spec.every.total_seconds() / 60,
        "delayMinutes": spec.delay.total_seconds() / 60,
        "maxConcurrency": spec.options.max_concurrency,
        "status": phase,
        "covered": {"start": iso(spec.start), "end": iso(state.covered_until)},
        "lagSeconds": (now - state.covered_until).total_seconds(),
        "provisional": {
            "windows": len(provisional),
            "start": iso(provisional[0].start) if provisional else None,
            "end": iso(provisional[-1].end) if provisional else None,
            "settledAfter": iso(max(c.end for c in provisional) + AUDIT_LATENCY) if provisional else None,
        },
        "failures": [f.to_json() for f in state.failures[-MAX_LISTED:]],
        "failureCount": len(state.failures),
        "paused": state.paused,
        "lastError": state.last_error,
        "running": running.headline() if running else None,
        "passes": state.passes,
        "cycles": state.cycles,
        "nextWakeAt": iso(state.next_wake) if state.next_wake else None,
        "finalBefore": iso(final_before(state)),
        "at": iso(now),
    }
