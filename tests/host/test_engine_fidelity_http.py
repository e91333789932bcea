"""Engine behaviours seen through the Durable HTTP API of an in-process ``LocalHost`` (real HTTP, real SDK)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from durable_local.host import LocalHost
from tests.host.conftest import APPS, wait_for_status

WEBHOOKS = "/runtime/webhooks/durabletask"


def _serve(app_dir: Path = APPS / "basic", **overrides: Any) -> LocalHost:
    fields: dict[str, Any] = {"max_queue_polling_interval": timedelta(milliseconds=100)}
    fields.update(overrides)
    host = LocalHost(app_dir, port=0, store="memory", settings_overrides=fields, drain_timeout=5)
    host.start()
    return host


@pytest.fixture
def plain_host() -> Iterator[LocalHost]:
    host = _serve()
    yield host
    host.stop()


@pytest.fixture
def inputs_host(tmp_path: Path) -> Iterator[LocalHost]:
    """The basic app with host.json ``storeInputsInOrchestrationHistory: true``."""
    app_dir = tmp_path / "app"
    shutil.copytree(APPS / "basic", app_dir)
    config = json.loads((app_dir / "host.json").read_text())
    config["extensions"]["durableTask"]["storeInputsInOrchestrationHistory"] = True
    (app_dir / "host.json").write_text(json.dumps(config))
    host = _serve(app_dir)
    yield host
    host.stop()


@pytest.fixture
def limited_host() -> Iterator[LocalHost]:
    host = _serve(max_history_events=6)
    yield host
    host.stop()


def _start(host: LocalHost, name: str, body: Any = None) -> dict[str, Any]:
    response = requests.post(f"{host.base_url}{WEBHOOKS}/orchestrators/{name}", json=body, timeout=30)
    assert response.status_code == 202, response.text
    return dict(response.json())


def test_max_history_events_terminates_without_a_terminate_event_in_history(limited_host: LocalHost) -> None:
    # The seed appends ExecutionTerminated to the prefetched history (a past event, never written): the replay
    # terminates the instance, and only the ExecutionCompleted(Terminated) decision reaches the History table.
    links = _start(limited_host, "chaining")
    final = wait_for_status(links["statusQueryGetUri"])
    reason = "Orchestrator exceeded maximum history size: 6"
    assert (final["runtimeStatus"], final["output"]) == ("Terminated", reason)
    shown = requests.get(links["statusQueryGetUri"] + "&showHistory=true&showHistoryOutput=true", timeout=10)
    assert shown.status_code == 200
    events = shown.json()["historyEvents"]
    assert "ExecutionTerminated" not in [e["EventType"] for e in events]
    (completed,) = [e for e in events if e["EventType"] == "ExecutionCompleted"]
    assert (completed["OrchestrationStatus"], completed["Result"]) == ("Terminated", reason)


def _history(links: dict[str, Any], query: str = "") -> list[dict[str, Any]]:
    shown = requests.get(links["statusQueryGetUri"] + "&showHistory=true" + query, timeout=10)
    assert shown.status_code == 200, shown.text
    return list(shown.json()["historyEvents"])


def test_history_events_keep_their_inputs_like_extension_2_9(plain_host: LocalHost) -> None:
    # DurableClient.GetDurableOrchestrationStatusAsync since extension 2.9.0 (PR #2267): Input stays on every
    # event unless showInput=false; completions carry the Input of their TaskScheduled (null here: without
    # storeInputsInOrchestrationHistory the TaskScheduled row is written without its input).
    links = _start(plain_host, "approval", {"who": "bob"})
    wait_for_status(links["statusQueryGetUri"], statuses=("Running",))
    send = links["sendEventPostUri"].replace("{eventName}", "Approval")
    assert requests.post(send, json={"by": "alice"}, timeout=10).status_code == 202
    wait_for_status(links["statusQueryGetUri"])
    events = {e["EventType"]: e for e in _history(links)}
    assert json.loads(events["ExecutionStarted"]["Input"]) == {"who": "bob"}  # the stored JSON text, as a string
    assert json.loads(events["EventRaised"]["Input"]) == {"by": "alice"}
    chained = _start(plain_host, "chaining")
    wait_for_status(chained["statusQueryGetUri"])
    completed = [e for e in _history(chained) if e["EventType"] == "TaskCompleted"]
    assert len(completed) == 3 and all("Input" in e and e["Input"] is None for e in completed)
    long_wait = _start(plain_host, "long_wait")
    wait_for_status(long_wait["statusQueryGetUri"], statuses=("Running",))
    terminate = long_wait["terminatePostUri"].replace("{text}", "enough")
    assert requests.post(terminate, timeout=10).status_code == 202
    wait_for_status(long_wait["statusQueryGetUri"])
    (terminated,) = [e for e in _history(long_wait) if e["EventType"] == "ExecutionTerminated"]
    assert terminated["Input"] == "enough"
    assert all("Input" not in e for e in _history(links, "&showInput=false") + _history(long_wait, "&showInput=false"))


def test_completions_carry_the_scheduled_input_when_inputs_are_stored(inputs_host: LocalHost) -> None:
    links = _start(inputs_host, "chaining")
    wait_for_status(links["statusQueryGetUri"])
    completed = [e for e in _history(links) if e["EventType"] == "TaskCompleted"]
    assert [(e["FunctionName"], e["Input"]) for e in completed] == [
        ("say_hello", '"Tokyo"'),
        ("say_hello", '"Seattle"'),
        ("say_hello", '"London"'),
    ]
    assert all("Input" not in e for e in _history(links, "&showInput=false"))


def test_list_always_answers_a_continuation_token_header(plain_host: LocalHost) -> None:
    # HttpApiHandler adds x-ms-continuation-token to every list response; with no next page the token is null,
    # which .NET's HttpHeaders.Add stores as an empty value: the header is present and empty.
    for name in ("chaining", "chaining"):
        wait_for_status(_start(plain_host, name)["statusQueryGetUri"])
    url = f"{plain_host.base_url}{WEBHOOKS}/instances"
    first = requests.get(url + "?top=1", timeout=10)
    token = first.headers.get("x-ms-continuation-token")
    assert first.status_code == 200 and len(first.json()) == 1 and token
    last = requests.get(url + "?top=5", headers={"x-ms-continuation-token": token}, timeout=10)
    assert last.status_code == 200 and len(last.json()) == 1
    assert last.headers.get("x-ms-continuation-token") == ""
    everything = requests.get(url, timeout=10)
    assert len(everything.json()) == 2 and everything.headers.get("x-ms-continuation-token") == ""


def test_purge_of_a_running_instance_deletes_it_like_the_extension(plain_host: LocalHost) -> None:
    # HttpApiHandler.HandleDeleteHistoryByIdRequestAsync: 404 for an unknown id, otherwise PurgeInstanceHistoryAsync
    # whatever the status; the Azure Storage tracking store deletes the row and the history of any instance.
    running = _start(plain_host, "long_wait")
    wait_for_status(running["statusQueryGetUri"], statuses=("Running",))
    purged = requests.delete(running["purgeHistoryDeleteUri"], timeout=10)
    assert (purged.status_code, purged.json()) == (200, {"instancesDeleted": 1})
    assert requests.get(running["statusQueryGetUri"], timeout=10).status_code == 404
    assert requests.delete(running["purgeHistoryDeleteUri"], timeout=10).status_code == 404


def test_time_range_purge_keeps_only_terminal_statuses_of_its_filter(plain_host: LocalHost) -> None:
    # AzureTableTrackingStore.PurgeInstanceHistoryAsync(createdTimeFrom, createdTimeTo, runtimeStatus) drops the
    # non-terminal statuses from the filter; an empty filter matches every status, running instances included.
    url = f"{plain_host.base_url}{WEBHOOKS}/instances?createdTimeFrom=2000-01-01T00:00:00Z"
    done = _start(plain_host, "chaining")
    wait_for_status(done["statusQueryGetUri"])
    running = _start(plain_host, "long_wait")
    wait_for_status(running["statusQueryGetUri"], statuses=("Running",))
    only_running = requests.delete(url + "&runtimeStatus=Running", timeout=10)  # no terminal status left: all
    assert only_running.status_code == 200, only_running.status_code
    assert only_running.json() == {"instancesDeleted": 2}
    again = _start(plain_host, "long_wait")
    wait_for_status(again["statusQueryGetUri"], statuses=("Running",))
    assert requests.delete(url + "&runtimeStatus=Completed", timeout=10).status_code == 404  # none Completed
    unfiltered = requests.delete(url, timeout=10)
    assert unfiltered.status_code == 200, unfiltered.status_code
    assert unfiltered.json() == {"instancesDeleted": 1}
