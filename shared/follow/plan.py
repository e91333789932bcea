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
from dataclasses import dataclass, replace
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
from shared.models import Chunk, JsonDict, iso, parse_iso
from shared.timeline.latency import AUDIT_LATENCY

MAX_NEW_WINDOWS = 192
"""New windows one cycle collects at most (catch-up after an outage continues at once in the next cycle)."""
RETRY_CAP = timedelta(hours=6)
ZERO = timedelta(0)
"""The longest back-off between two tries of a failed window."""
FEED_SETTLE_MARGIN = timedelta(hours=1)
"""A window the feed reads is read for the last time this long after its band passed: a record published at the band's
end is in a blob created minutes later, and a listing leaves its newest minutes to a later read."""
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
    source: str = ""
    """The source that reads its windows (the follower's search source, or the feed it reads)."""
    reconcile: bool = False
    """The reconcile's pass: its one window (``settle``) read again by search after the feed's last read."""

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
            "source": self.source,
            **({"reconcile": True} if self.reconcile else {}),
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


def window_source(spec: FollowSpec, state: FollowState, chunk: Chunk, now: datetime) -> str:
    """Which source reads ``chunk``: the feed where the follower reads it and the feed can cover the window (it began
    after the subscription the follower started, within the feed's reach, and no feed read of it came back
    unproved), else the follower's search source."""
    feed = spec.feed
    if feed is None or _inside(chunk, state.backfill):
        return spec.source
    if (feed.since is not None and chunk.start < feed.since) or chunk.start < now - feed.reach:
        return spec.source
    return feed.source


def _margin(spec: FollowSpec, state: FollowState, chunk: Chunk, now: datetime) -> timedelta:
    feed = spec.feed
    return FEED_SETTLE_MARGIN if feed is not None and window_source(spec, state, chunk, now) == feed.source else ZERO


def _sample(spec: FollowSpec, state: FollowState, settle: list[Chunk], now: datetime) -> Chunk | None:
    """The window this cycle's reconcile reads again by search after the feed's last read of it, when one is due."""
    feed = spec.feed
    if feed is None or feed.reconcile_every is None or not feed.reconcile_source:
        return None
    if state.reconciled_at is not None and now < state.reconciled_at + feed.reconcile_every:
        return None
    read = [c for c in settle if window_source(spec, state, c, now) == feed.source]
    return read[0] if read else None


def day_scope(spec: FollowSpec, state: FollowState, day: date, retried: Iterable[Chunk], end: datetime) -> JsonDict:
    """What a pass over ``day`` proves: the day so far (to ``end``), its standing failures (those it retries
    aside), its provisional windows; a feed follower's day also its reconcile's samples."""
    again = set(retried)
    begin, until = max(spec.start, day_start(day)), min(day_start(day) + DAY, end)
    scope: JsonDict = {
        "ranges": [{"start": iso(begin), "end": iso(until)}],
        "failures": [
            f.manifest_json() for f in state.failures if day_of(f.chunk.start) == day and f.chunk not in again
        ],
        "provisional": [c.span_json() for c in state.provisional if day_of(c.start) == day],
    }
    if spec.feed is not None:
        scope["sampled"] = [c.to_json() for c in state.sampled.get(day.isoformat(), [])]
    return scope


def plan(spec: FollowSpec, state: FollowState, now: datetime) -> list[Pass]:
    """This cycle's passes: per day with work, oldest day first, a pass of the search source (the windows the feed
    cannot cover: older, before its subscription, unproved by it), then one of the feed, then the reconcile's (the
    day's sampled window read again by search)."""
    new = new_windows(spec, state, now)
    settle = [c for c in state.provisional if c.end + AUDIT_LATENCY + _margin(spec, state, c, now) <= now]
    settle += [c for c in state.backfill_due if c not in settle]
    retry = [f.chunk for f in state.failures if f.retry_at <= now]
    covered = max([state.covered_until, *(c.end for c in new)])
    sample = _sample(spec, state, settle, now)
    days = sorted({day_of(c.start) for c in (*new, *settle, *retry)})
    sources = [spec.source, *([spec.feed.source] if spec.feed is not None else [])]
    passes: list[Pass] = []
    for day in days:
        for source in sources:

            def mine(chunks: list[Chunk], source: str = source, day: date = day) -> list[Chunk]:
                return [c for c in chunks if day_of(c.start) == day and window_source(spec, state, c, now) == source]

            on, again, retried = mine(new), mine(settle), mine(retry)
            if not (on or again or retried):
                continue
            collection = day_collection_id(spec.follow_id, day)
            instance = f"{collection}-p{state.passes + len(passes)}"
            scope = day_scope(spec, state, day, retried, covered)
            passes.append(Pass(day, collection, instance, tuple(on), tuple(again), tuple(retried), scope, source))
        if sample is not None and spec.feed is not None and day_of(sample.start) == day:
            collection = day_collection_id(spec.follow_id, day)
            instance = f"{collection}-p{state.passes + len(passes)}"
            scope = day_scope(spec, state, day, (), covered)
            scope["sampled"] = [*scope["sampled"], sample.to_json()]
            source = spec.feed.reconcile_source
            passes.append(Pass(day, collection, instance, (), (sample,), (), scope, source, reconcile=True))
    return passes


def rescoped(spec: FollowSpec, state: FollowState, due: Pass) -> Pass:
    """``due`` with its scope as the passes before it in this cycle left the state (several passes of one day: each
    proves the day with what the ones before it read)."""
    end = parse_iso(due.scope["ranges"][0]["end"])
    scope = day_scope(spec, state, due.day, due.retry, end)
    if due.reconcile and spec.feed is not None:
        scope["sampled"] = [*scope["sampled"], *(c.to_json() for c in due.settle)]
    return replace(due, scope=scope)


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
    if spec.feed is not None:
        _apply_feed(spec, state, done, output, now)
    return True


def _apply_feed(spec: FollowSpec, state: FollowState, done: Pass, output: JsonDict, now: datetime) -> None:
    """A feed follower's bookkeeping: the windows a feed pass could not prove go to search; a search pass that read
    them takes them off the due list; a reconcile's sample is recorded; days that turned final are forgotten."""
    assert spec.feed is not None
    failed = [Chunk.from_json(f["chunk"]) for f in output.get("failures") or []]
    if done.source == spec.feed.source:
        for note in output.get("incompleteWindows") or []:
            window = note.get("window") if isinstance(note, dict) else None
            if not isinstance(window, dict):
                continue
            chunk = Chunk(parse_iso(window["start"]), parse_iso(window["end"]))
            if not _inside(chunk, state.backfill):
                state.backfill.append(chunk)
                state.backfill_due.append(chunk)
    else:
        read = [c for c in done.windows if not any(f.start < c.end and c.start < f.end for f in failed)]
        state.backfill_due = [c for c in state.backfill_due if not _inside(c, read)]
    if done.reconcile and not failed:
        day = done.day.isoformat()
        state.sampled[day] = [*state.sampled.get(day, []), *done.settle]
        state.reconciled_at, state.reconciles = now, state.reconciles + 1
    final = final_before(state)
    state.backfill = [c for c in state.backfill if c.start >= final or c in state.backfill_due]
    state.sampled = {d: cs for d, cs in state.sampled.items() if day_start(date.fromisoformat(d)) >= final}


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
        "reads": spec.reads(),
        "backfill": len(state.backfill_due),
        "reconciles": state.reconciles,
        "at": iso(now),
    }
