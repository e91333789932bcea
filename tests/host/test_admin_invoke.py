"""``POST /admin/functions/{name}``: run a function by hand, as Microsoft's "Manually run a non HTTP-triggered
function" describes it (``{"input": "..."}``, ``Content-Type: application/json``, the master key, 202 Accepted; no key
needed locally) and as the Functions host's ``FunctionsController.Invoke`` answers.

The timer sample app (``apps/timers``) records each invocation in ``INVOCATIONS``; its ``yearly`` timer never fires
during a test, so every invocation of it is a manual one.
"""

from __future__ import annotations

import json
import logging
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from durable_local.host import LocalHost

from .conftest import APPS

APP = APPS / "timers"


def _wait(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _runs(host: LocalHost, name: str) -> list[dict[str, Any]]:
    assert host.app is not None
    return list(host.app.module.INVOCATIONS.get(name, []))


def _run(
    host: LocalHost, name: str, body: bytes | None, content_type: str | None = "application/json", **headers: str
) -> requests.Response:
    if content_type:
        headers["Content-Type"] = content_type
    return requests.post(f"{host.base_url}/admin/functions/{name}", data=body, headers=headers, timeout=10)


@pytest.fixture
def timer_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalHost]:
    monkeypatch.setenv("TICK_SCHEDULE", "0 0 0 1 1 *")
    host = LocalHost(APP, port=0, store=str(tmp_path / "timers.sqlite"), drain_timeout=10)
    host.start()
    yield host
    host.stop()


def test_a_timer_function_runs_by_hand_with_the_documented_request(timer_host: LocalHost) -> None:
    response = _run(timer_host, "yearly", json.dumps({"input": "test"}).encode())
    assert response.status_code == 202 and response.content == b""
    assert _wait(lambda: len(_runs(timer_host, "yearly")) == 1)
    run = _runs(timer_host, "yearly")[0]
    # TimerTriggerBinding.BindAsync: not past due, the schedule monitor's recorded status.
    assert run["past_due"] is False
    assert set(run["status"]) == {"Last", "Next", "LastUpdated"}
    # Function names match in any case, as the host's GetFunctionOrNull compares them.
    assert _run(timer_host, "YEARLY", b'{"input": "again"}').status_code == 202
    assert _wait(lambda: len(_runs(timer_host, "yearly")) == 2)


def test_the_body_is_read_as_the_hosts_json_formatter_reads_it(timer_host: LocalHost) -> None:
    refused = {
        "no content type": _run(timer_host, "yearly", b'{"input": "x"}', content_type=None),
        "text/plain": _run(timer_host, "yearly", b'{"input": "x"}', content_type="text/plain"),
        "empty body": _run(timer_host, "yearly", b""),
        "invalid JSON": _run(timer_host, "yearly", b"{input"),
        "null": _run(timer_host, "yearly", b"null"),
        "an array": _run(timer_host, "yearly", b'[{"input": "x"}]'),
        "an object input": _run(timer_host, "yearly", b'{"input": {"a": 1}}'),
        "unknown function": _run(timer_host, "no_such_function", b'{"input": "x"}'),
    }
    codes = {case: response.status_code for case, response in refused.items()}
    assert codes == {
        "no content type": 415,
        "text/plain": 415,
        "empty body": 400,
        "invalid JSON": 400,
        "null": 400,
        "an array": 400,
        "an object input": 400,
        "unknown function": 404,
    }
    accepted = [
        _run(timer_host, "yearly", b"{}"),  # no input: null
        _run(timer_host, "yearly", b'{"Input": 5}'),  # any case; a number is read as text
        _run(timer_host, "yearly", b'{"input": true}', content_type="application/json; charset=utf-8"),
    ]
    assert [response.status_code for response in accepted] == [202, 202, 202]
    assert _wait(lambda: len(_runs(timer_host, "yearly")) == 3)
    time.sleep(0.3)
    assert len(_runs(timer_host, "yearly")) == 3  # the refused requests ran nothing


def test_with_keys_required_only_the_master_key_runs_a_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICK_SCHEDULE", "0 0 0 1 1 *")
    with LocalHost(APP, port=0, store="memory", require_keys=True, drain_timeout=5) as host:
        body = b'{"input": ""}'
        assert _run(host, "yearly", body).status_code == 401
        assert _run(host, "yearly", body, **{"x-functions-key": host.keys.function_key}).status_code == 401
        assert _run(host, "yearly", body, **{"x-functions-key": host.keys.master_key}).status_code == 202
        assert _wait(lambda: len(_runs(host, "yearly")) == 1)


ACTIVITY_APP = """
import azure.functions as func
import azure.durable_functions as df

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)
RECEIVED = []


@app.activity_trigger(input_name="city")
def say_hello(city):
    RECEIVED.append(city)
    return f"Hello {city}!"


@app.orchestration_trigger(context_name="context")
def hello(context):
    return (yield context.call_activity("say_hello", "Tokyo"))
"""


def test_an_activity_reads_the_input_as_its_serialized_input(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The Durable extension's ActivityTrigger binding takes a string from the admin API as the activity's serialized
    (JSON) input, "mainly used for the Azure Portal execution scenario"."""
    (tmp_path / "function_app.py").write_text(textwrap.dedent(ACTIVITY_APP))
    with LocalHost(tmp_path, port=0, store="memory", drain_timeout=5) as host:
        assert host.app is not None
        received: list[Any] = host.app.module.RECEIVED
        assert _run(host, "say_hello", json.dumps({"input": '"Seattle"'}).encode()).status_code == 202
        assert _run(host, "say_hello", json.dumps({"input": "5"}).encode()).status_code == 202
        assert _wait(lambda: len(received) == 2)
        assert sorted(received, key=str) == [5, "Seattle"]
        # Input that is not one JSON value (the extension wraps it as [<input>]), or none: 202, failed in the log.
        # An orchestration trigger cannot bind a string: 202, and the invocation fails in the log (as on Azure).
        with caplog.at_level(logging.ERROR):
            assert _run(host, "say_hello", b'{"input": "Paris"}').status_code == 202
            assert _run(host, "say_hello", b"{}").status_code == 202
            assert _run(host, "hello", b'{"input": "x"}').status_code == 202
            assert _wait(lambda: "Don't know how to bind to String" in caplog.text)
        assert caplog.text.count("expected to be an object array with one element") == 2
        time.sleep(0.3)
        assert len(received) == 2
