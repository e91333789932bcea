"""Query parameter names and route literals in any case, as the extension and ASP.NET routing accept them.

An in-process ``LocalHost`` serving the basic app; the SDK client runs inside the app's own starter function.
"""

from __future__ import annotations

import requests

from durable_local.host import LocalHost
from tests.host.conftest import hook as _hook
from tests.host.conftest import wait_for_status


def test_query_parameter_names_are_case_insensitive(host: LocalHost) -> None:
    done = requests.post(_hook(host, "orchestrators/chaining/case-done"), json="x", timeout=30)
    assert done.status_code == 202, done.text
    wait_for_status(done.json()["statusQueryGetUri"])
    running = requests.post(_hook(host, "orchestrators/long_wait/case-running"), timeout=30)
    wait_for_status(running.json()["statusQueryGetUri"], statuses=("Running",))

    shown = requests.get(_hook(host, "instances/case-done?SHOWHISTORY=true&showhistoryoutput=TRUE"), timeout=10)
    events = shown.json()["historyEvents"]
    assert any("Result" in event for event in events if event["EventType"] == "TaskCompleted")
    hidden = requests.get(_hook(host, "instances/case-done?showinput=false"), timeout=10).json()
    assert hidden["input"] is None

    listed = requests.get(_hook(host, "instances?runtimestatus=Running&INSTANCEIDPREFIX=case-"), timeout=10)
    assert [item["instanceId"] for item in listed.json()] == ["case-running"]
    requests.post(_hook(host, "instances/case-running/terminate"), timeout=10)


def test_webhook_path_literals_and_the_function_prefix_are_case_insensitive(host: LocalHost) -> None:
    started = requests.post(_hook(host, "Orchestrators/chaining/upper-1"), json="x", timeout=30)
    assert started.status_code == 202, started.text
    wait_for_status(started.json()["statusQueryGetUri"])
    assert requests.get(_hook(host, "INSTANCES/upper-1"), timeout=10).status_code == 200
    assert requests.get(_hook(host, "Instances"), timeout=10).status_code == 200
    mixed = f"{host.base_url}/RUNTIME/Webhooks/DurableTask/instances/upper-1"
    assert requests.get(mixed, timeout=10).status_code == 200
    assert requests.get(_hook(host, "Entities"), timeout=10).status_code == 200
    echoed = requests.get(f"{host.base_url}/Api/ECHO/3", timeout=10)
    assert echoed.status_code == 200, echoed.text
    assert echoed.json()["route"]["n"] == "3"
