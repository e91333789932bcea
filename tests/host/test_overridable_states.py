"""``overridableExistingInstanceStates`` (host.json ``extensions.durableTask``): with ``AnyState`` the extension
gives DTFx no dedupe statuses, so a start with the id of an existing instance replaces it whatever its state (a new
execution, the old one's remaining messages discarded); with ``NonRunningStates`` (the default) a start over a
Pending, Running, Suspended or ContinuedAsNew instance answers 500 (``tests/host/test_duplicate_start_http.py``).

The Durable extension's own end-to-end app for Python sets ``AnyState`` and its test
``DedupeStatusesTests.CanStartOrchestration_WithSameId_ForAllStatuses_ForEmptyDedupeStatuses`` starts each id twice:
completed, failed, terminated, running and suspended instances all start again (202) and run. The same, here, over
the basic sample app with that host.json setting.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from durable_local.host import LocalHost
from durable_local.host.config import HostConfigError
from tests.host.conftest import APPS, WEBHOOKS, wait_for_status


def _app_with(tmp_path: Path, states: object) -> Path:
    shutil.copy(APPS / "basic" / "function_app.py", tmp_path / "function_app.py")
    durable = {
        "hubName": "OverrideHub",
        "overridableExistingInstanceStates": states,
        "storageProvider": {"maxQueuePollingInterval": "00:00:01"},
    }
    (tmp_path / "host.json").write_text(json.dumps({"version": "2.0", "extensions": {"durableTask": durable}}))
    return tmp_path


@pytest.fixture
def any_state(tmp_path: Path) -> Iterator[LocalHost]:
    fields: dict[str, Any] = {"max_queue_polling_interval": timedelta(milliseconds=100)}
    host = LocalHost(
        _app_with(tmp_path, "AnyState"), port=0, store="memory", settings_overrides=fields, drain_timeout=5
    )
    host.start()
    yield host
    host.stop()


def _start(host: LocalHost, orchestrator: str, instance_id: str) -> requests.Response:
    return requests.post(f"{host.base_url}{WEBHOOKS}/orchestrators/{orchestrator}/{instance_id}", timeout=30)


def _started(host: LocalHost, orchestrator: str, instance_id: str, state: str) -> dict[str, Any]:
    response = _start(host, orchestrator, instance_id)
    assert response.status_code == 202, response.text
    return wait_for_status(response.json()["statusQueryGetUri"], statuses=(state,))


def _wait(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _execution(host: LocalHost, instance_id: str) -> str | None:
    status = host.engine.get_status(instance_id, show_input=False)
    assert status is not None
    return status.execution_id


def test_any_state_starts_an_existing_id_again_whatever_its_state(any_state: LocalHost) -> None:
    host = any_state
    _started(host, "chaining", "completed-1", "Completed")
    _started(host, "failing", "failed-1", "Failed")
    _started(host, "long_wait", "running-1", "Running")
    _started(host, "long_wait", "suspended-1", "Running")
    _started(host, "long_wait", "terminated-1", "Running")
    assert requests.post(f"{host.base_url}{WEBHOOKS}/instances/suspended-1/suspend", timeout=10).status_code == 202
    assert requests.post(f"{host.base_url}{WEBHOOKS}/instances/terminated-1/terminate", timeout=10).status_code == 202
    url = f"{host.base_url}{WEBHOOKS}/instances/"
    wait_for_status(url + "suspended-1", statuses=("Suspended",))
    wait_for_status(url + "terminated-1", statuses=("Terminated",))
    before = {i: _execution(host, i) for i in ("completed-1", "failed-1", "running-1", "suspended-1", "terminated-1")}

    again = {
        "completed-1": _started(host, "chaining", "completed-1", "Completed"),
        "failed-1": _started(host, "failing", "failed-1", "Failed"),
        "running-1": _started(host, "long_wait", "running-1", "Running"),
        "suspended-1": _started(host, "long_wait", "suspended-1", "Running"),
        "terminated-1": _started(host, "long_wait", "terminated-1", "Running"),
    }
    assert again["completed-1"]["output"] == ["Hello Tokyo!", "Hello Seattle!", "Hello London!"]
    for instance_id, previous in before.items():
        assert _execution(host, instance_id) != previous, instance_id  # a new execution of the same id
    for instance_id in ("running-1", "suspended-1", "terminated-1"):
        requests.post(f"{url}{instance_id}/terminate", timeout=10)


def test_a_running_instance_replaced_by_a_new_start_runs_the_new_execution_only(any_state: LocalHost) -> None:
    host = any_state
    first = _started(host, "approval", "approval-1", "Running")
    assert first["customStatus"] == "waiting"
    executions = [_execution(host, "approval-1")]

    def replaced_and_running() -> bool:
        status = host.engine.get_status("approval-1", show_input=False)
        return (
            status is not None
            and status.execution_id not in executions
            and status.runtime_status.display == ("Running")
        )

    # The app's own starter (the SDK client's start_new) and the restart route both replace it.
    through_sdk = requests.post(f"{host.base_url}/api/orchestrators/approval/approval-1", timeout=30)
    assert through_sdk.status_code == 202, through_sdk.text
    assert _wait(replaced_and_running)
    executions.append(_execution(host, "approval-1"))
    restarted = requests.post(
        f"{host.base_url}{WEBHOOKS}/instances/approval-1/restart?restartWithNewInstanceId=false", timeout=30
    )
    assert restarted.status_code == 202, restarted.text
    assert _wait(replaced_and_running)
    status_url = restarted.json()["statusQueryGetUri"]
    event = requests.post(f"{host.base_url}{WEBHOOKS}/instances/approval-1/raiseEvent/Approval", json="yes", timeout=10)
    assert event.status_code == 202
    done = wait_for_status(status_url)
    assert done["runtimeStatus"] == "Completed" and done["output"] == {"approved": "yes"}
    assert _execution(host, "approval-1") not in executions


def test_the_setting_is_read_like_the_hosts_configuration(tmp_path: Path) -> None:
    from durable_local.host.config import load_host_json

    assert load_host_json(_app_with(tmp_path, "anystate")).overridable_existing_instance_states == "AnyState"
    assert load_host_json(_app_with(tmp_path, 0)).overridable_existing_instance_states == "AnyState"
    assert load_host_json(_app_with(tmp_path, "1")).overridable_existing_instance_states == "NonRunningStates"
    with pytest.raises(HostConfigError, match="OverridableStates"):
        load_host_json(_app_with(tmp_path, "Always"))
