"""The live page's chunk grid: what the orchestrator publishes in custom status, and the cell states the API serves.

The window is driven by the real state machine (``shared.window.machine``); the grid is checked against what the window
itself knows (lanes, failures, re-queued halves, counters) and against a cell-by-cell reference decoder.
"""

from __future__ import annotations

import itertools
import json
import re
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from http_api.grid_cells import Cells, encode
from shared.models import ActivityError, ActivityResult, Chunk, ChunkSummary
from shared.sources.exchange.lanes import COLLECT
from shared.sources.registry import window_for
from shared.timeline.planning import ChunkPlan
from shared.window import progress_grid
from shared.window.machine import CollectionSpec, CollectionWindow
from shared.window.state import CallActivity, Carried, Failure, Lane, RunOptions

T0 = datetime(2024, 11, 17, tzinfo=UTC)


def spec(n: int, k: int = 2, *, minutes: int = 60, min_split: int = 60) -> CollectionSpec:
    return CollectionSpec(
        collection_id="c1",
        tenant_id="contoso.onmicrosoft.com",
        source="exchange",
        filters={},
        options=RunOptions(max_concurrency=k, chunks_per_execution=100_000, min_split_seconds=min_split),
        plan=ChunkPlan(T0, T0 + timedelta(minutes=minutes * n), timedelta(minutes=minutes)),
    )


def expand(states: str) -> str:
    """The run-length string as one letter per cell."""
    return "".join(letter * int(run) for letter, run in re.findall(r"([a-z])(\d+)", states))


def grid_of(window: CollectionWindow) -> dict[str, object]:
    published = json.loads(json.dumps(window.status()))["grid"]  # what really crosses custom status
    return encode(Cells.of(window.spec), published)


def done(step: CallActivity, *, incomplete: bool = False, records: int = 3) -> ActivityResult:
    chunk = Chunk.from_json(step.input["chunk"])
    summary = ChunkSummary(chunk, records, 0, 0, 0, "b", "h", 1, incomplete).to_json()
    return ActivityResult.success({"summary": summary})  # an Exchange lane's last call, which committed its chunk


def test_cells_follow_the_plan_and_turn_done_as_chunks_finish() -> None:
    window = window_for(spec(7, k=2))
    steps = window.fill()
    grid = grid_of(window)
    assert grid["cells"] == 7 and expand(str(grid["states"])) == "rrppppp"
    first = steps[0]
    assert isinstance(first, CallActivity)
    window.on_result(first.lane, done(first))
    window.fill()
    assert expand(str(grid_of(window)["states"])) == "drrpppp"
    while window.lanes:
        lane_id = min(window.lanes)
        window.on_result(lane_id, done(window.call(window.lanes[lane_id])))
        window.fill()
    final = encode(Cells.of(window.spec), json.loads(json.dumps(window.output(None)))["grid"])
    assert final["states"] == "d7" and final["counts"] == {"d": 7}


def test_a_split_cell_shows_its_halves_inside_it_and_becomes_done_when_they_finish() -> None:
    window = window_for(spec(3, k=1))
    (step,) = window.fill()
    assert isinstance(step, CallActivity)
    window.on_result(step.lane, ActivityResult.split({"limit": 50}))
    (first_half,) = window.fill()
    grid = grid_of(window)
    assert expand(str(grid["states"])) == "spp"
    assert grid["parts"] == {"0": [[0.0, 1800.0, "r"], [1800.0, 3600.0, "p"]]}
    assert isinstance(first_half, CallActivity)
    window.on_result(first_half.lane, done(first_half))
    window.fill()
    assert grid_of(window)["parts"] == {"0": [[0.0, 1800.0, "d"], [1800.0, 3600.0, "r"]]}
    lane_id = next(iter(window.lanes))
    window.on_result(lane_id, done(window.call(window.lanes[lane_id])))
    window.fill()
    assert expand(str(grid_of(window)["states"])) == "drp"


def test_failed_and_incomplete_windows_keep_their_cells_across_continue_as_new() -> None:
    window = window_for(spec(4, k=4, min_split=3600))  # a 60-minute window cannot be halved: incomplete
    steps = window.fill()
    assert [isinstance(s, CallActivity) for s in steps] == [True] * 4
    bad = ActivityResult(False, error=ActivityError("permanent", "Exchange POST failed: <script>x</script>"))
    window.on_result(0, bad)
    assert steps[1].input["allowIncomplete"]  # a minimum window is collected as far as the source allows
    window.on_result(1, done(steps[1], incomplete=True))
    for lane_id in (2, 3):
        window.on_result(lane_id, done(window.call(window.lanes[lane_id])))
    carried = Carried.from_json(json.loads(json.dumps(window.carry().to_json())))
    assert carried.incomplete_windows == [window.spec.planned_chunk(1)]
    resumed = window_for(window.spec, carried)
    grid = grid_of(resumed)
    assert grid["states"] == "f1i1d2" and grid["counts"] == {"f": 1, "i": 1, "d": 2}
    published = resumed.status()["grid"]
    assert published["recent"] == [
        {"w": [0, 3600], "kind": "permanent", "reason": "Exchange POST failed: <script>x</script>", "attempts": 1}
    ]


def test_lane_phases_show_running_unknown_phases_included_and_budget_waits_apart() -> None:
    window = window_for(spec(3, k=3))
    window.fill()
    window.lanes[1].phase = "waiting_for_tenant_budget"
    window.lanes[2].phase = "some-future-phase"
    grid = grid_of(window)
    assert expand(str(grid["states"])) == "rbr"
    assert window.status()["grid"]["lanes"][1] == [3600, 7200, "waiting_for_tenant_budget", 1]


def test_explicit_windows_of_a_retry_collection_are_the_cells() -> None:
    windows = (
        Chunk(T0, T0 + timedelta(hours=1)),
        Chunk(T0 + timedelta(hours=1), T0 + timedelta(hours=2)),
        Chunk(T0 + timedelta(hours=5), T0 + timedelta(hours=5, minutes=30)),
    )
    retry = CollectionSpec("r1", "contoso.onmicrosoft.com", "graph", {}, RunOptions(max_concurrency=1), None, windows)
    window = window_for(retry)
    window.fill()
    grid = grid_of(window)
    assert grid["cells"] == 3 and grid["windows"] == [[0.0, 3600.0, 2], [18000.0, 1800.0, 1]]
    assert expand(str(grid["states"])) == "rpp"
    assert "intervalSeconds" not in grid


def test_custom_status_stays_small_for_ten_thousand_chunks_whatever_fails() -> None:
    # The worst case: every other chunk of a 10,000-chunk plan failed (nothing merges), incomplete windows between
    # them, a deep re-queue, ten lanes, and long non-ASCII reasons (JSON escapes each such character to six).
    n = 10_000
    big = spec(n, k=10, minutes=1)
    chunks = [big.planned_chunk(i) for i in range(n)]
    state = Carried(
        cursor=n,
        failures=[Failure(c, "permanent", "échec " * 80, 4) for c in chunks[::2]],
        incomplete_windows=chunks[1::4],
        requeued=[h for c in chunks[3::4][:400] for h in c.halves()],
        failed=n // 2,
    )
    window = window_for(big, state)
    for index in range(10):
        window.lanes[index] = Lane(index, chunks[index * 7 + 3].halves()[0], COLLECT, attempts=3)
    status = window.status()
    units = len(json.dumps(status).encode("utf-16-le")) // 2
    assert units < 8192, units  # 16 KB of UTF-16 text
    grid = status["grid"]
    assert len(json.dumps(grid).encode("utf-16-le")) // 2 <= 5000
    omitted = grid["omitted"]
    assert omitted["failed"] >= n // 2 - progress_grid.SCAN_LIMIT
    assert omitted["incomplete"] > 0 and omitted["requeued"] > 0
    assert len(grid["lanes"]) == 10  # lanes in flight are never dropped for room
    encoded = encode(Cells.of(big), json.loads(json.dumps(grid)))
    assert len(expand(str(encoded["states"]))) == n and encoded["omitted"] == omitted
    # the output is not bounded: every failed window is in it, so the finished grid is exact
    final = encode(Cells.of(big), json.loads(json.dumps(window.output(None)))["grid"])
    cells = expand(str(final["states"]))
    assert cells.count("f") == n // 2 and cells[::2] == "f" * (n // 2)


def test_a_grid_with_nothing_to_drop_is_published_whole() -> None:
    window = window_for(spec(50, k=3))
    window.fill()
    window.state.failures = [Failure(window.spec.planned_chunk(i), "permanent", "x", 1) for i in (40, 41, 43)]
    grid = window.status()["grid"]
    assert grid["failed"] == [[144000, 151200], [154800, 158400]]  # 40-41 merged into one run, then 43
    assert "omitted" not in grid and len(grid["recent"]) == 3


def reference(cells: Cells, published: dict[str, list[list[float]]], cursor: int) -> str:
    """Cell by cell, the obvious way: a window covering a whole cell sets it, a partial one makes it split."""
    letters = ["d" if i < cursor else "p" for i in range(cells.count)]
    partial: set[int] = set()
    whole: dict[int, str] = {}
    for key, letter in (("failed", "f"), ("incomplete", "i"), ("requeued", "p")):
        for start, end in published[key]:
            for i in range(cells.count):
                low, high = cells.bounds(i)
                if max(start, low) < min(end, high):
                    if start <= low and end >= high:
                        whole.setdefault(i, letter)
                    else:
                        partial.add(i)
    for i in range(cells.count):
        if i in whole:
            letters[i] = whole[i]
        elif i in partial:
            letters[i] = "s"
    return "".join(letters)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 30),
    cursor_fraction=st.floats(0, 1),
    windows=st.lists(st.tuples(st.integers(0, 29), st.sampled_from([0, 1, 2]), st.sampled_from("fi")), max_size=12),
)
def test_run_length_states_match_a_cell_by_cell_reference(
    n: int, cursor_fraction: float, windows: list[tuple[int, int, str]]
) -> None:
    plan = spec(n)
    cells = Cells.of(plan)
    cursor = int(cursor_fraction * n)
    published: dict[str, list[list[float]]] = {"failed": [], "incomplete": [], "requeued": []}
    used: set[int] = set()
    for cell, shape, letter in windows:
        if cell >= cursor or cell in used:
            continue
        used.add(cell)
        low = cell * 3600.0
        window = {0: [low, low + 3600], 1: [low, low + 1800], 2: [low + 1800, low + 3600]}[shape]
        published["failed" if letter == "f" else "incomplete"].append(window)
    grid = encode(cells, {"origin": T0.isoformat(), "cursor": cursor, "lanes": [], **published})
    assert expand(str(grid["states"])) == reference(cells, published, cursor)
    for cell, parts in grid["parts"].items():  # a split cell's parts tile it exactly
        low, high = cells.bounds(int(cell))
        assert parts[0][0] == 0 and parts[-1][1] == high - low
        assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))
