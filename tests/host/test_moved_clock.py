"""The local host on a moved clock (``--clock-file``): durable timers, timestamps and the management API follow the
file's time, so a test runs a day of timers in a second."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from durable_local.clock import OffsetFileClock
from tests.host.conftest import ServedApp, start, wait_for_status


def test_a_timer_a_day_ahead_fires_when_the_clock_file_moves(
    serve_app: Callable[..., ServedApp], tmp_path: Path
) -> None:
    clock = OffsetFileClock(tmp_path / "clock")
    clock.advance(timedelta(days=30))  # the host starts a month ahead of the wall clock
    served = serve_app("basic", store="memory", extra=["--clock-file", str(clock.path)])
    started = start(served.base_url, "timer", 86400)  # a timer due a day after the orchestration started
    status = wait_for_status(started["statusQueryGetUri"], statuses=("Running",))  # its timer is scheduled
    created = datetime.fromisoformat(status["createdTime"].replace("Z", "+00:00"))
    assert abs((created - clock.now()).total_seconds()) < 60, "the instance is stamped with the moved time"
    clock.advance(timedelta(days=1))
    done = wait_for_status(started["statusQueryGetUri"], timeout=30)
    assert done["runtimeStatus"] == "Completed"
    assert done["output"] == "timer fired"
