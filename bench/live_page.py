"""The live page's costs, side by side: what publishing the grid adds to the orchestrator, how big custom status
gets, and the page's script time per refresh in headless Chromium for growing collections.

1. ``CollectionWindow.status()`` per call with the grid and with the grid publisher stubbed out, on a running window
   with no failures, with 50 failures, and on the worst 10,000-chunk state (every other chunk failed);
2. the orchestrator's whole SDK call on the longest episode of one recorded Graph collection, with and without the
   grid (the orchestrator sets custom status before every yield, so a replayed episode publishes hundreds of times);
3. the collection page fed synthetic summaries (``tests/support/live_summaries.py``) in Chromium: first render and
   mean script time per refresh, for each size.

    .venv/bin/python bench/live_page.py [--cells 1000 10000] [--steps 12] [--chunks 50]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shared.hosting import sdk_timestamps
from shared.sources.exchange.lanes import COLLECT
from shared.sources.registry import window_for
from shared.window import progress_grid
from shared.window.machine import CollectionWindow
from shared.window.state import Carried, Failure, Lane
from tests.support.browser import chromium
from tests.support.live_summaries import measure_in_browser, spec


def _stub(_self: object, *_args: object, **_kwargs: object) -> dict[str, object]:
    return {}


def per_call_us(window: CollectionWindow, repeat: int) -> tuple[float, float]:
    """status() in microseconds with the grid, then with the publisher stubbed (interleaved)."""
    real = progress_grid.GridPublisher.publish
    times = [0.0, 0.0]
    for _ in range(3):
        for index, publish in enumerate((real, _stub)):
            progress_grid.GridPublisher.publish = publish  # type: ignore[method-assign]
            began = time.perf_counter()
            for _ in range(repeat):
                window.status()
            times[index] += time.perf_counter() - began
    progress_grid.GridPublisher.publish = real  # type: ignore[method-assign]
    return times[0] / (3 * repeat) * 1e6, times[1] / (3 * repeat) * 1e6


def windows(k: int) -> dict[str, CollectionWindow]:
    running = window_for(spec(200))
    running.fill()
    failing = window_for(spec(200))
    failing.fill()
    failing.state.failures = [Failure(failing.spec.planned_chunk(i), "permanent", "x" * 300, 4) for i in range(50)]
    n = 10_000
    worst_spec = spec(n)
    chunks = [worst_spec.planned_chunk(i) for i in range(n)]
    state = Carried(
        cursor=n,
        failures=[Failure(c, "permanent", "échec " * 80, 4) for c in chunks[::2]],
        incomplete_windows=chunks[1::4],
        requeued=[h for c in chunks[3::4][:400] for h in c.halves()],
    )
    worst = window_for(worst_spec, state)
    for index in range(k):
        worst.lanes[index] = Lane(index, chunks[index * 7 + 3].halves()[0], COLLECT, attempts=3)
    return {"running, no failures": running, "running, 50 failures": failing, "10,000 chunks, 5,000 failed": worst}


def episode_ms(chunks: int, repeat: int) -> tuple[int, int, float, float]:
    from bench.sdk_replay_cost import orchestrator_handle, record_contexts, time_call

    contexts = record_contexts(chunks)
    longest = max(contexts, key=lambda c: len(json.loads(c)["history"]))
    events = len(json.loads(longest)["history"])
    module = importlib.import_module(sdk_timestamps.HISTORY_EVENT_MODULE)
    module.dt_parse = sdk_timestamps.parse_history_timestamp
    handle = orchestrator_handle()
    real = progress_grid.GridPublisher.publish
    calls = 0

    def counting(self: progress_grid.GridPublisher, *args: object, **kwargs: object) -> dict[str, object]:
        nonlocal calls
        calls += 1
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    progress_grid.GridPublisher.publish = counting  # type: ignore[method-assign]
    handle(longest)
    with_grid = without = 0.0
    for _ in range(3):
        progress_grid.GridPublisher.publish = real  # type: ignore[method-assign]
        with_grid += time_call(handle, longest, repeat)
        progress_grid.GridPublisher.publish = _stub  # type: ignore[method-assign]
        without += time_call(handle, longest, repeat)
    progress_grid.GridPublisher.publish = real  # type: ignore[method-assign]
    return events, calls, with_grid / 3 * 1000, without / 3 * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, nargs="+", default=[1000, 10_000], help="collection sizes for the page")
    parser.add_argument("--steps", type=int, default=12, help="refreshes per page run")
    parser.add_argument("--chunks", type=int, default=50, help="chunks of the recorded collection (episode length)")
    parser.add_argument("--repeat", type=int, default=2000, help="status() calls per measurement")
    args = parser.parse_args()

    print("CollectionWindow.status(), microseconds per call")
    print(f"{'state':<30} {'with grid':>10} {'without':>8} {'ratio':>6}")
    for label, window in windows(10).items():
        with_grid, without = per_call_us(window, max(10, args.repeat // (20 if "10,000" in label else 1)))
        print(f"{label:<30} {with_grid:>10.1f} {without:>8.1f} {with_grid / without:>5.2f}x")
    worst = windows(10)["10,000 chunks, 5,000 failed"].status()
    units = len(json.dumps(worst).encode("utf-16-le")) // 2
    print(f"worst custom status: {units:,} UTF-16 units of the 8,192 allowed; omitted {worst['grid'].get('omitted')}")

    events, calls, with_grid, without = episode_ms(args.chunks, max(1, args.repeat // 400))
    print(
        f"longest episode ({events} events, {calls} status updates): {with_grid:.2f} ms with the grid, "
        f"{without:.2f} ms without ({with_grid / without:.3f}x)"
    )

    print("\ncollection page in headless Chromium, script time")
    print(f"{'cells':>7} {'first ms':>9} {'per refresh ms':>15} {'max ms':>7} {'summary bytes':>14}")
    first = None
    with chromium() as context:
        for cells in args.cells:
            figures = measure_in_browser(context, cells, args.steps)
            first = first or figures
            print(
                f"{cells:>7,} {figures['first_ms']:>9.1f} {figures['refresh_mean_ms']:>15.2f} "
                f"{figures['refresh_max_ms']:>7.1f} {figures['bytes_per_summary']:>14,}"
            )
    if first and len(args.cells) > 1:
        print(f"per refresh, {args.cells[-1]:,} vs {args.cells[0]:,} cells: "
              f"{figures['refresh_mean_ms'] / max(first['refresh_mean_ms'], 0.01):.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
