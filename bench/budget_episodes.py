"""Issue 28 item 2: where the tenant budget's cost per chunk comes from, counted rather than timed.

``bench/realistic_cost.py`` measures CPU and episodes per chunk on the local host, but the status checks' count moves
between runs by more than the budget's own episodes, so it cannot say which episodes the budget adds. This script
plays one Graph collection of ``--chunks`` hourly chunks at K = 3 with the deployed defaults (lease 600 s, renewal
every 200 s, polls from 30 s) against the real ``shared.budget.machine``, in the simulator of
``tests/collector/test_window_budget`` (queries run 30 s to 5 minutes of its time, ``test_window_ride.Realistic``),
and counts the events that wake the orchestration, by kind, per chunk: lane timers, activity results, the budget's
answers (``acquire``, renewal), renewal timers, and the timer awaited before each continue-as-new while the budget is
on (``orchestrators/collect.py``); and the entity's operations. Window versions 1 and 2 and the budget off, over
``--seeds`` seeds (the same queries for each)::

    .venv/bin/python bench/budget_episodes.py --chunks 30 --seeds 8

Each event is one episode here; the local host sometimes takes two in one (fewer episodes, same work).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shared.window.state import RENEW, CallEntity, SignalEntity, Step
from tests.collector.test_window_budget import Collection
from tests.collector.test_window_ride import Realistic, Watched, deployed

KINDS = ("lane timer", "activity result", "acquire answer", "renewal answer", "renewal timer", "timer before CAN")


class Counted(Watched):
    """The simulator, counting every event it hands the window by kind, and the entity's operations."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.kinds: Counter[str] = Counter()
        self.operations: Counter[str] = Counter()
        super().__init__(*args, **kwargs)

    def take(self, c: Collection, steps: list[Step]) -> None:
        for step in steps:
            if isinstance(step, CallEntity | SignalEntity):
                self.operations[step.operation] += 1
        super().take(c, steps)
        for window in self.watched:
            if not getattr(window, "_kinds", False):
                window._kinds = True  # type: ignore[attr-defined]
                window.on_result = self._wrap(window.on_result, "activity result")  # type: ignore[attr-defined]
                window.on_budget = self._answers(window.on_budget)  # type: ignore[attr-defined]
                window.on_timer = self._timers(window.on_timer)  # type: ignore[attr-defined]

    def _wrap(self, method: Callable[..., list[Step]], kind: str) -> Callable[..., list[Step]]:
        def counted(*args: object) -> list[Step]:
            self.kinds[kind] += 1
            return method(*args)

        return counted

    def _answers(self, method: Callable[..., list[Step]]) -> Callable[..., list[Step]]:
        def counted(lane_id: int, answer: object) -> list[Step]:
            self.kinds["renewal answer" if lane_id == RENEW else "acquire answer"] += 1
            return method(lane_id, answer)

        return counted

    def _timers(self, method: Callable[..., list[Step]]) -> Callable[..., list[Step]]:
        def counted(lane_id: int) -> list[Step]:
            self.kinds["renewal timer" if lane_id == RENEW else "lane timer"] += 1
            return method(lane_id)

        return counted


def run(version: int, budget: bool, chunks: int, seed: int) -> tuple[Counter[str], Counter[str]]:
    spec = deployed(version, n=chunks)
    if not budget:
        spec = replace(spec, options=replace(spec.options, budget_capacity=0, budget_quota=0))
    tenant = Counted([spec], 3 if budget else 0, seed, quota=1000 if budget else 0)
    tenant.run(Realistic(tenant, seed))
    window = tenant.collections[0].window
    assert window.state.completed == chunks, window.status()
    if budget:
        tenant.kinds["timer before CAN"] += tenant.collections[0].executions - 1
    return tenant.kinds, tenant.operations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args()
    rows = {"budget off": (1, False), "version 1": (1, True), "version 2": (2, True)}
    print(f"graph, {args.chunks} hourly chunks, K=3, queries 30..300 s, deployed defaults; events per chunk, ", end="")
    print(f"median of {args.seeds} seeds:")
    print(f"{'':>12}" + "".join(f"{kind:>17}" for kind in (*KINDS, "all", "entity ops")))
    for label, (version, budget) in rows.items():
        per_seed = [run(version, budget, args.chunks, seed) for seed in range(args.seeds)]
        cells = [statistics.median(kinds[kind] for kinds, _ in per_seed) / args.chunks for kind in KINDS]
        total = statistics.median(sum(kinds.values()) for kinds, _ in per_seed) / args.chunks
        ops = statistics.median(sum(operations.values()) for _, operations in per_seed) / args.chunks
        print(f"{label:>12}" + "".join(f"{cell:>17.2f}" for cell in (*cells, total, ops)))


if __name__ == "__main__":
    main()
