"""Timer triggers on the local host (the sample app ``apps/timers``), in process, on real wall-clock time.

What each invocation saw is in the app module's ``INVOCATIONS``; schedules are a second apart at most, so the tests
wait a few seconds of real time, never for an exact count at an exact moment.
"""

from __future__ import annotations

import itertools
import json
import shutil
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from durable_local.host import LocalHost
from durable_local.host.config import HostConfigError
from durable_local.host.loader import AppLoadError, load_app

from .conftest import APPS

APP = APPS / "timers"


def _invocations(host: LocalHost, name: str) -> list[dict[str, Any]]:
    assert host.app is not None
    found: dict[str, list[dict[str, Any]]] = host.app.module.INVOCATIONS
    return list(found.get(name, []))


def _wait(condition: Any, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


@pytest.fixture
def timer_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalHost]:
    monkeypatch.setenv("TICK_SCHEDULE", "*/2 * * * * *")
    host = LocalHost(APP, port=0, store=str(tmp_path / "timers.sqlite"), drain_timeout=10)
    host.start()
    yield host
    host.stop()


def test_an_every_second_schedule_runs_one_invocation_at_a_time(timer_host: LocalHost) -> None:
    assert _wait(lambda: len(_invocations(timer_host, "every_second")) >= 3)
    runs = sorted(_invocations(timer_host, "every_second"), key=lambda r: r["started"])
    # Each run takes 1.5 s on a 1 s schedule: the next starts only after the previous ended.
    assert all(later["started"] >= earlier["ended"] for earlier, later in itertools.pairwise(runs))
    assert all(r["past_due"] is False for r in runs)
    # Sub-minute schedules run without the schedule monitor: no status for the function.
    assert runs[0]["status"] == {} and runs[0]["schedule"] == {"AdjustForDST": True}


def test_run_on_startup_runs_once_at_start_with_a_context(timer_host: LocalHost) -> None:
    assert _wait(lambda: len(_invocations(timer_host, "on_startup")) == 1)
    (run,) = _invocations(timer_host, "on_startup")
    assert run["function"] == "on_startup" and run["past_due"] is False
    assert _invocations(timer_host, "yearly") == []  # monitored, not past due (first start): waits for New Year


def test_a_timer_with_a_durable_client_starts_an_orchestration(timer_host: LocalHost) -> None:
    # The schedule comes from the TICK_SCHEDULE app setting (%TICK_SCHEDULE%).
    def completed() -> bool:
        status = timer_host.engine.get_status("from-timer")
        return status is not None and status.runtime_status.is_terminal

    assert _wait(completed)
    status = timer_host.engine.get_status("from-timer")
    assert status is not None and json.loads(status.output or "null") == "TIMER!"


def test_a_missed_occurrence_runs_at_start_with_past_due(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The schedule monitor's record from an earlier run: last updated mid-2020, so New Year 2021 was missed.
    monkeypatch.setenv("TICK_SCHEDULE", "*/2 * * * * *")
    store = tmp_path / "timers.sqlite"
    status_dir = Path(str(store) + ".timers")
    status_dir.mkdir()
    offset = datetime.now().astimezone().strftime("%z")
    local = f"{offset[:3]}:{offset[3:]}"
    earlier = {"Last": f"0001-01-01T00:00:00{local}", "Next": f"2021-01-01T00:00:00{local}",
               "LastUpdated": f"2020-06-01T00:00:00{local}"}  # fmt: skip
    (status_dir / "yearly.json").write_text(json.dumps(earlier))
    host = LocalHost(APP, port=0, store=str(store), drain_timeout=10)
    host.start()
    try:
        assert _wait(lambda: len(_invocations(host, "yearly")) == 1)
        (run,) = _invocations(host, "yearly")
        assert run["past_due"] is True
        assert run["status"]["Next"] == f"2021-01-01T00:00:00{local}"
    finally:
        host.stop()
    recorded = json.loads((status_dir / "yearly.json").read_text())
    assert recorded["Last"][:4] == str(datetime.now().year) and recorded["Next"].endswith(f"-01-01T00:00:00{local}")


def test_an_unresolved_schedule_setting_puts_the_function_in_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TICK_SCHEDULE", raising=False)
    with pytest.raises(HostConfigError) as refused:
        LocalHost(APP, port=0, store="memory").start()
    assert str(refused.value) == (
        "The 'starts_orchestration' function is in error: '%TICK_SCHEDULE%' does not resolve to a value."
    )


def test_an_invalid_schedule_is_refused_with_the_hosts_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICK_SCHEDULE", "every minute")
    with pytest.raises(HostConfigError, match="was not recognized as a valid cron expression or timespan string"):
        LocalHost(APP, port=0, store="memory").start()


def test_other_triggers_are_refused_saying_why_and_what_runs(tmp_path: Path) -> None:
    shutil.copy(APP / "host.json", tmp_path / "host.json")
    (tmp_path / "function_app.py").write_text(
        "import azure.functions as func\n"
        "app = func.FunctionApp()\n\n"
        '@app.queue_trigger(arg_name="msg", queue_name="work", connection="AzureWebJobsStorage")\n'
        "def on_message(msg: func.QueueMessage) -> None:\n"
        "    pass\n"
    )
    with pytest.raises(AppLoadError) as refused:
        load_app(tmp_path)
    message = str(refused.value)
    assert "'on_message'" in message and "queueTrigger" in message
    assert "runs httpTrigger, timerTrigger, orchestrationTrigger" in message and "no emulation of queues" in message
