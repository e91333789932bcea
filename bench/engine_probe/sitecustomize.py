"""For ``bench/realistic_cost.py``: counts what an engine without ``/admin/host/stats`` does (an older checkout).

Python imports ``sitecustomize`` at start-up from the path; the bench puts this folder first on the host's
``PYTHONPATH`` (then the checkout) and names a file in ``BENCH_ENGINE_PROBE``. This wraps the checkout's episode
functions where its orchestration dispatcher calls them and counts, as the engine's own counters do, orchestration and
entity episodes, the past events handed to each orchestration episode, and the operations each entity batch ran;
a thread writes the counts to that file four times a second. Nothing else changes. Without the variable it does
nothing.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

_TARGET = os.environ.get("BENCH_ENGINE_PROBE")


def _install(target: Path) -> None:
    from durable_local.dispatch import orchestration
    from durable_local.entities import scheduler

    counts = {"orchestration_episodes": 0, "entity_episodes": 0, "replayed_events": 0, "entity_operations": 0}
    lock = threading.Lock()
    run_episode, run_entity_episode, run_batch = (
        orchestration.run_episode,
        orchestration.run_entity_episode,
        scheduler.EntityScheduler.run,
    )

    def counted_episode(episode: Any) -> Any:
        result = run_episode(episode)
        with lock:
            counts["orchestration_episodes"] += 1
            counts["replayed_events"] += len(episode.past_events)
        return result

    def counted_entity_episode(episode: Any) -> Any:
        result = run_entity_episode(episode)
        with lock:
            counts["entity_episodes"] += 1
        return result

    def counted_batch(self: Any, *args: Any, **kwargs: Any) -> Any:
        outcome = run_batch(self, *args, **kwargs)
        with lock:
            counts["entity_operations"] += len(outcome.operations)
        return outcome

    orchestration.run_episode = counted_episode  # type: ignore[assignment]
    orchestration.run_entity_episode = counted_entity_episode  # type: ignore[assignment]
    scheduler.EntityScheduler.run = counted_batch  # type: ignore[method-assign]

    def write() -> None:
        while True:
            with lock:
                text = json.dumps(counts)
            partial = target.with_suffix(".tmp")
            partial.write_text(text, encoding="ascii")
            partial.replace(target)
            time.sleep(0.25)

    threading.Thread(target=write, name="bench-engine-probe", daemon=True).start()


if _TARGET:
    _install(Path(_TARGET))
