"""The live page's grid as the window publishes it, held where hand mutations of ``shared.window.progress_grid``
survived (``scripts/mutations/window.toml``; docs/testing.md, "Mutation"): the finished grid's incomplete windows, lanes
beyond the limit counted, the newest failures' reasons shown.
"""

from __future__ import annotations

from datetime import timedelta

from shared.models import Chunk
from shared.sources.exchange.lanes import COLLECT
from shared.sources.registry import window_for
from shared.window import progress_grid
from shared.window.state import Carried, Failure, Lane
from tests.collector.window_sim import T0, spec

HOUR = 3600


def chunk(i: int) -> Chunk:
    return Chunk(T0 + timedelta(hours=i), T0 + timedelta(hours=i + 1))


def test_the_finished_grid_shows_every_incomplete_and_failed_window() -> None:
    state = Carried(
        cursor=6,
        completed=5,
        failed=1,
        incomplete=2,
        incomplete_windows=[chunk(1), chunk(2), chunk(4)],
        failures=[Failure(chunk(5), "bad_request", "refused", 1)],
    )
    window = window_for(spec(6, 2, "exchange"), state)
    grid = window.output(None)["grid"]
    assert grid["incomplete"] == [[1 * HOUR, 3 * HOUR], [4 * HOUR, 5 * HOUR]]  # adjacent windows merged
    assert grid["failed"] == [[5 * HOUR, 6 * HOUR]]
    assert window.status()["grid"]["incomplete"] == grid["incomplete"]  # the live page showed the same


def test_lanes_beyond_the_limit_are_counted_as_omitted() -> None:
    k = progress_grid.LANE_LIMIT + 3
    window = window_for(spec(k, k, "exchange"), Carried(cursor=k))
    for i in range(k):
        window.lanes[i] = Lane(i, chunk(i), COLLECT, attempts=1)
    grid = window.status()["grid"]
    assert len(grid["lanes"]) == progress_grid.LANE_LIMIT
    assert grid["omitted"] == {"lanes": 3}
    assert window.status()["inFlight"] == k  # the count of lanes is never cut


def test_the_recent_failures_are_the_newest_with_their_reasons() -> None:
    n = progress_grid.RECENT_FAILURES + 2
    failures = [Failure(chunk(i), "bad_request", f"refused #{i}", 1) for i in range(n)]
    window = window_for(spec(n, 1, "exchange"), Carried(cursor=n, failed=n, failures=failures))
    recent = window.status()["grid"]["recent"]
    assert [r["reason"] for r in recent] == [f"refused #{i}" for i in range(2, n)]
    assert recent[-1]["w"] == [(n - 1) * HOUR, n * HOUR]
