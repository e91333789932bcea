"""Durable entities on the local host, over HTTP only: Microsoft's two entity samples (unmodified), the
``entities`` routes of the Durable HTTP API, and the real SDK client's ``signal_entity``/``read_entity_state``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from tests.host.conftest import ServedApp, start, wait_for_status

WEBHOOK = "/runtime/webhooks/durabletask"


def _until(read: Callable[[], Any], expected: Any, timeout: float = 60) -> Any:
    """Poll ``read`` until it returns ``expected``; returns the last value read."""
    deadline = time.monotonic() + timeout
    value = read()
    while value != expected and time.monotonic() < deadline:
        time.sleep(0.05)
        value = read()
    return value


def _state_of(url: str) -> Any:
    """The entity's state, or None while it does not exist yet (a signal is delivered after its 202)."""
    found = requests.get(url, timeout=10)
    return found.json() if found.status_code == 200 else None


@pytest.fixture(scope="module")
def counter_sample(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApp]:
    from tests.host.conftest import start_app

    served = start_app("entity_counter", tmp_path_factory.mktemp("counter"), store="memory")
    yield served
    served.stop()


@pytest.fixture(scope="module")
def entities_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApp]:
    from tests.host.conftest import start_app

    served = start_app("entities", tmp_path_factory.mktemp("entities"), store="memory")
    yield served
    served.stop()


def test_the_counter_sample_runs_unmodified(counter_sample: ServedApp) -> None:
    base = counter_sample.base_url
    read = lambda: requests.get(f"{base}/api/entityreadvalue", timeout=10).text  # noqa: E731
    assert read() == "No state found"
    with ThreadPoolExecutor(5) as pool:  # five clients signal at once (http_set adds 1 each)
        answers = list(pool.map(lambda _: requests.post(f"{base}/api/entitysetvalue", timeout=30), range(5)))
    assert [(a.status_code, a.text) for a in answers] == [(200, "Done")] * 5
    assert _until(read, "5") == "5"
    started = requests.post(f"{base}{WEBHOOK}/orchestrators/orchestrator", timeout=30)
    assert started.status_code == 202, started.text
    final = wait_for_status(started.json()["statusQueryGetUri"])
    # The orchestrator signals add 3, then calls get: one sender's requests run in order, so get sees the 3.
    assert (final["runtimeStatus"], final["output"]) == ("Completed", 8)
    assert read() == "8"


def test_http_api_reads_lists_and_signals_entities(counter_sample: ServedApp) -> None:
    base = f"{counter_sample.base_url}{WEBHOOK}"
    requests.post(f"{counter_sample.base_url}/api/entitysetvalue", timeout=30)
    state = _until(lambda: requests.get(f"{base}/entities/Counter/api-key", timeout=10).status_code, 404)
    assert state == 404  # never signalled: it does not exist
    # The SDK client posts json.dumps(value) as JSON, i.e. a JSON string; the entity's get_input decodes both.
    assert requests.post(f"{base}/entities/Counter/api-key?op=add", json="2", timeout=10).status_code == 202
    entity_url = f"{base}/entities/counter/api-key"  # entity names are case-insensitive
    assert _until(lambda: _state_of(entity_url), 2) == 2
    # A bare JSON number reaches get_input() as a number, which the Python SDK cannot decode: the operation
    # fails inside the entity (202 all the same, as on Azure) and the state does not change.
    assert requests.post(f"{base}/entities/Counter/api-key?op=add", json=5, timeout=10).status_code == 202
    assert requests.post(f"{base}/entities/Counter/api-key?op=add", json="1", timeout=10).status_code == 202
    assert _until(lambda: _state_of(entity_url), 3) == 3
    listed = requests.get(f"{base}/entities/Counter?fetchState=true", timeout=10)
    assert listed.status_code == 200
    by_key = {e["entityId"]["key"]: e for e in listed.json()}
    assert by_key["api-key"]["entityId"] == {"name": "counter", "key": "api-key"} and by_key["api-key"]["state"] == 3
    assert {"myCounter", "api-key"} <= set(by_key) and by_key["myCounter"]["lastOperationTime"].endswith("Z")
    page = requests.get(f"{base}/entities?top=1", timeout=10)
    assert len(page.json()) == 1 and page.json()[0]["state"] is None  # state only with fetchState=true
    token = page.headers["x-ms-continuation-token"]
    rest = requests.get(f"{base}/entities", headers={"x-ms-continuation-token": token}, timeout=10).json()
    assert {e["entityId"]["key"] for e in page.json() + rest} == set(by_key)
    assert listed.headers["x-ms-continuation-token"] == ""  # the last page still carries the header
    assert requests.get(f"{base}/entities/Counter/none-such", timeout=10).status_code == 404
    unknown = requests.post(f"{base}/entities/Nope/k?op=add", json="1", timeout=10)
    assert unknown.status_code == 400 and "'nope'" in unknown.json()["Message"]
    assert requests.post(f"{base}/entities/Counter/a%2Fb?op=add", json="1", timeout=10).status_code == 400
    bad_json = requests.post(
        f"{base}/entities/Counter/k?op=add", data="{", headers={"Content-Type": "application/json"}, timeout=10
    )
    assert bad_json.status_code == 400 and "Could not parse JSON content" in bad_json.json()["Message"]
    status = requests.get(f"{base}/instances/@counter@api-key", timeout=10).json()
    assert status["name"] == "@counter@api-key" and status["runtimeStatus"] == "Running"
    assert status["customStatus"] == {"entityExists": True} and status["input"]["state"] == "3"


def test_the_aggregator_sample_aggregates_fan_in_signals(serve_app: Callable[..., ServedApp]) -> None:
    served = serve_app("entity_aggregator", store="memory")
    # As published, the sample's client signals "Counter", an entity this app does not define: the extension's
    # HTTP API answers 400, the Python client raises, and the function fails.
    failed = requests.post(f"{served.base_url}/api/orchestrators/any", timeout=30)
    assert failed.status_code == 500
    assert "unexpected status code 400" in served.log()
    url = f"{served.base_url}{WEBHOOK}/entities/entity_function/myCounter"

    def send(source: int) -> list[int]:
        return [requests.post(f"{url}?op=add", json=json.dumps(1), timeout=30).status_code for _ in range(10)]

    with ThreadPoolExecutor(3) as pool:  # three sources fan in 30 signals
        codes = [code for batch in pool.map(send, range(3)) for code in batch]
    assert codes == [202] * 30

    def total() -> Any:
        found = requests.get(url, timeout=10)
        return found.json() if found.ok else None

    assert _until(total, 30) == 30


def test_the_sdk_client_signals_and_reads_and_orchestrations_call(entities_app: ServedApp) -> None:
    base = entities_app.base_url
    assert requests.get(f"{base}/api/entity/tally/sdk", timeout=10).json() == {"exists": False, "state": None}
    for value in (4, 5):
        assert requests.post(f"{base}/api/entity/tally/sdk/add", json=value, timeout=30).status_code == 202
    read = lambda: requests.get(f"{base}/api/entity/tally/sdk", timeout=10).json()  # noqa: E731
    assert _until(read, {"exists": True, "state": 9}) == {"exists": True, "state": 9}
    assert requests.post(f"{base}/api/entity/ledger/sdk/append", json="x", timeout=30).status_code == 202
    ledger = lambda: requests.get(f"{base}/api/entity/Ledger/sdk", timeout=10).json()  # noqa: E731
    assert _until(ledger, {"exists": True, "state": ["x"]}) == {"exists": True, "state": ["x"]}
    links = start(base, "count_up", {"key": "sdk", "n": 3})
    final = wait_for_status(links["statusQueryGetUri"])
    assert (final["runtimeStatus"], final["output"]) == ("Completed", [10, 11, 12])
    failing = wait_for_status(start(base, "calls_failing_operation")["statusQueryGetUri"])
    assert failing["output"] == "caught: tally refuses"  # an operation's error is raised in the caller
