"""What the audit API saw of a collection, from the emulator's own event log (shared by the window benchmarks).

Definitions (used by ``window_busy.py``, ``switch_idle.py`` and ``graph_polling.py``):

* A chunk's **API-busy interval** runs from its first API call's start to its last API call's end, as the emulator
  logged them. Graph: the query's creation (the submit) to its last records page (the export's end). Exchange: the
  first ``InvokeCommand`` call of the chunk's window starting to the last one ending. Its length is ``d``.
* **API in-flight** at a moment is the number of chunks inside their API-busy interval.
* The **steady state** runs from the first chunk's start to the last chunk's start: while work is still waiting to
  start, every lane should be busy. The tail after the last start is ramp-down, whatever the scheduler does.
* **Lane idle time** is ``K x steady span - the area under API in-flight`` over the steady state: lane-seconds with
  no chunk at the API.
* A **refill gap** is the time from a chunk ending to the next chunk starting in the lane it freed (the i-th end is
  matched with the (K+i)-th start).
* The **zero-gap greedy makespan** is what K lanes would take for the same chunks (same d, same start order) if each
  chunk started the instant a lane freed: the makespan an online scheduler that cannot know d in advance reaches with
  no overhead at all. ``makespan / greedy`` is the scheduler's own overhead; ``greedy / bound`` is the tail that no
  such scheduler avoids (a lane still busy with a long chunk while the others have nothing left to start).
"""

from __future__ import annotations

import heapq
import statistics
from dataclasses import dataclass

from m365_emulator import Stats


@dataclass(frozen=True)
class Span:
    key: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def chunk_spans(stats: Stats, tenant_id: str, api: str) -> list[Span]:
    """Each chunk's API-busy interval (Graph: per query id; Exchange: per searched window), by start."""
    with stats.lock:
        events = [e for e in stats.query_events if e.tenant_id == tenant_id and e.api == api]
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    for event in events:
        if event.kind == "created":
            first.setdefault(event.query_id, event.moment)
        last[event.query_id] = max(last.get(event.query_id, event.moment), event.moment)
    return sorted((Span(k, first[k], last[k]) for k in first), key=lambda s: s.start)


@dataclass(frozen=True)
class WindowFigures:
    chunks: int
    k: int
    makespan: float
    sum_d: float
    max_d: float
    steady_mean: float
    """Time-weighted mean API in-flight over the steady state."""
    steady_span: float
    lane_idle: float
    """Lane-seconds without a chunk at the API during the steady state."""
    refill_gaps: list[float]
    greedy: float
    """Zero-gap greedy makespan of the same chunks in the same start order."""

    @property
    def bound(self) -> float:
        return max(self.sum_d / self.k, self.max_d)

    @property
    def makespan_ratio(self) -> float:
        return self.makespan / self.bound if self.bound else 0.0

    @property
    def busy_fraction(self) -> float:
        return self.steady_mean / self.k

    @property
    def median_gap(self) -> float:
        return statistics.median(self.refill_gaps) if self.refill_gaps else 0.0


def window_figures(spans: list[Span], k: int) -> WindowFigures:
    if not spans:
        raise ValueError("no chunk reached the API")
    begin = min(s.start for s in spans)
    finish = max(s.end for s in spans)
    last_start = max(s.start for s in spans)
    steps = sorted([(s.start, 0, 1) for s in spans] + [(s.end, 1, -1) for s in spans])
    area = 0.0
    live = 0
    previous = begin
    for moment, _, delta in steps:
        if moment > last_start:
            area += live * (last_start - previous)
            previous = last_start
            break
        area += live * (moment - previous)
        previous = moment
        live += delta
    span = last_start - begin
    starts = sorted(s.start for s in spans)
    ends = sorted(s.end for s in spans)
    gaps = [starts[k + i] - ends[i] for i in range(max(0, len(starts) - k))]
    return WindowFigures(
        chunks=len(spans),
        k=k,
        makespan=finish - begin,
        sum_d=sum(s.seconds for s in spans),
        max_d=max(s.seconds for s in spans),
        steady_mean=area / span if span > 0 else float(k),
        steady_span=span,
        lane_idle=k * span - area,
        refill_gaps=gaps,
        greedy=greedy_makespan([s.seconds for s in spans], k),
    )


def greedy_makespan(durations: list[float], k: int) -> float:
    """K lanes, each chunk started the moment a lane is free, in the given order."""
    lanes = [0.0] * k
    for duration in durations:
        heapq.heappush(lanes, heapq.heappop(lanes) + duration)
    return max(lanes)


def noticing_delays(stats: Stats, tenant_id: str) -> list[tuple[float, float, int]]:
    """Per Graph query: (its running time, the delay until the client's next status call, status calls made).

    The running time is from its creation to the moment the emulator turns it succeeded; the delay is from that
    moment to the first status call after it (the call that notices).
    """
    with stats.lock:
        events = [e for e in stats.query_events if e.tenant_id == tenant_id and e.api == "graph"]
        finishes = dict(stats.query_finishes)
    created: dict[str, float] = {}
    statuses: dict[str, list[float]] = {}
    for event in events:
        if event.call == "create":
            created.setdefault(event.query_id, event.moment)
        elif event.call == "status":
            statuses.setdefault(event.query_id, []).append(event.moment)
    out: list[tuple[float, float, int]] = []
    for query_id, born in created.items():
        done = finishes.get(query_id)
        polls = statuses.get(query_id, [])
        after = [m for m in polls if m >= done] if done is not None else []
        if done is None or not after:
            continue
        out.append((done - born, min(after) - done, len(polls)))
    return out
