"""kill -9 the host while orchestrations call an entity; a new host on the same SQLite store finishes them.

What survives: every orchestration completes, every answer it got is one the entity really gave (strictly
increasing per caller), and the entity's state is exactly the number of operations, except that a request sent by an
orchestration episode whose checkpoint the kill prevented is sent again with a new id by the retried episode, so each
caller can add at most one extra (at-least-once, like an activity). Messages the dead host had taken reappear after
the visibility timeout (``--visibility-timeout``).

A value is given to one caller only, except for the entity batch the kill interrupted: DTFx commits a work item's
outbound messages before its checkpoint, so that batch's answers may already have been sent when it runs again from
the last checkpoint, and a request the dead host had not taken is visible before the ones it had (hidden until their
visibility timeout), so the re-run may apply them in another order and give an already-sent value to another caller.
Each caller has at most one request in that batch (its calls are sequential), so at most ``CALLERS`` values repeat.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import requests

from tests.host.conftest import ServedApp, start, wait_for_status

FAST_RECOVERY = ["--visibility-timeout", "2"]
CALLERS, CALLS = 4, 8


def _entity(served: ServedApp) -> int | None:
    found = requests.get(f"{served.base_url}/runtime/webhooks/durabletask/entities/tally/shared", timeout=10)
    return int(found.json()) if found.ok else None


def test_kill_9_while_entities_are_called_then_restart_completes_everything(
    tmp_path: Path, serve_app: Callable[..., ServedApp]
) -> None:
    store = str(tmp_path / "entities.sqlite")
    first = serve_app("entities", store=store, extra=FAST_RECOVERY)
    spec = {"key": "shared", "n": CALLS}
    ids = [start(first.base_url, "count_up", spec, f"caller-{i}")["id"] for i in range(CALLERS)]
    deadline = time.monotonic() + 60
    while (_entity(first) or 0) < CALLERS and time.monotonic() < deadline:
        time.sleep(0.02)  # wait until the entity ran some operations, so the kill lands mid-run
    progress = _entity(first) or 0
    first.stop(signal.SIGKILL)
    assert progress < CALLERS * CALLS, "everything finished before the kill; the test proves nothing"

    second = serve_app("entities", store=store, extra=FAST_RECOVERY)
    answers: list[int] = []
    for instance_id in ids:
        final = wait_for_status(f"{second.base_url}/runtime/webhooks/durabletask/instances/{instance_id}", timeout=120)
        assert final["runtimeStatus"] == "Completed", final
        got = final["output"]
        assert len(got) == CALLS and got == sorted(set(got)), got  # each caller saw its own adds in order
        answers += got
    assert len(answers) - len(set(answers)) <= CALLERS  # only the interrupted batch's answers can repeat
    state = _entity(second)
    assert state is not None and CALLERS * CALLS <= state <= CALLERS * CALLS + CALLERS
    assert max(answers) <= state
