"""Retry policies (``@app.retry`` and host.json ``retry``) and ``context.retry_context`` on the local host.

The Functions host runs every invocation through the WebJobs SDK's retry loop (``FunctionExecutorExtensions.
TryExecuteAsync``): a failed invocation is run again after the policy's delay until it succeeds or ``max_retry_count``
retries have failed, and the worker receives ``RetryContext`` (retry count, max retry count, the previous failure).
The samples are Microsoft's documented retry examples (``apps/retry_fixed``, ``apps/retry_exponential``, see their
SOURCE.md), checked as the Python worker's own end-to-end test checks them: in the host's output.
"""

from __future__ import annotations

import json
import re
import textwrap
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import requests

from durable_local.host import LocalHost
from durable_local.model import RuntimeStatus
from tests.host.conftest import ServedApp


def _wait_for(condition: Callable[[], bool], timeout: float = 45.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def _retry_waits(log: str) -> list[str]:
    return re.findall(r"Waiting for `([0-9:.]+)` before retrying function execution\. Next attempt: '(\d+)'", log)


# -- the documented samples, served by the CLI ---------------------------------------------------------------------


def test_the_fixed_delay_sample_is_retried_three_times_a_second_apart(serve_app: Callable[..., ServedApp]) -> None:
    served = serve_app("retry_fixed", store="memory")
    # The worker's test of this sample first checks that the host answers GET / (its home page).
    assert requests.get(served.base_url + "/", timeout=10).ok
    reached = "Max retries of 3 for function mytimer has been reached"
    assert _wait_for(lambda: reached in served.log()), served.log()
    log = served.log()
    assert re.findall(r"Current retry count: (\d+)", log)[:4] == ["0", "1", "2", "3"]
    assert _retry_waits(log)[:3] == [("00:00:01", "1"), ("00:00:01", "2"), ("00:00:01", "3")]
    assert "Max retry count: '3'." in log


def test_the_exponential_backoff_sample_waits_the_minimum_then_doubles_up_to_the_maximum(
    serve_app: Callable[..., ServedApp],
) -> None:
    served = serve_app("retry_exponential", store="memory")
    reached = "Max retries of 3 for function mytimer has been reached"
    assert _wait_for(lambda: reached in served.log()), served.log()
    log = served.log()
    assert re.findall(r"Current retry count: (\d+)", log)[:4] == ["0", "1", "2", "3"]
    waits = _retry_waits(log)[:3]
    assert [attempt for _, attempt in waits] == ["1", "2", "3"]
    # RandomizedExponentialBackoffStrategy: the minimum first, then minimum + (0.8..1.2) x 2^(n-1) x minimum, capped
    # at the maximum (2 s): the second wait is 1.8 to 2 s, the third the maximum.
    assert waits[0][0] == "00:00:01"
    assert "00:00:01.8" <= waits[1][0] <= "00:00:02"
    assert waits[2][0] == "00:00:02"


# -- HTTP, activities, host.json: in process -----------------------------------------------------------------------

APP = """
import json
import azure.functions as func
import azure.durable_functions as df

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)
SEEN = {}


def _seen(context):
    retry = context.retry_context
    SEEN.setdefault(context.function_name, []).append(
        (retry.retry_count, retry.max_retry_count, retry.exception.message, retry.rpc_exception.message))
    return retry.retry_count


@app.route(route="plain")
def plain(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    retry = context.retry_context
    body = {"retry_count": retry.retry_count, "max_retry_count": retry.max_retry_count,
            "message": retry.exception.message, "source": retry.exception.source}
    return func.HttpResponse(json.dumps(body), mimetype="application/json")


@app.route(route="flaky_http", methods=["POST"])
@app.retry(strategy="fixed_delay", max_retry_count="1", delay_interval="00:00:00")
def flaky_http(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    if _seen(context) == 0:
        raise ValueError("first attempt fails")
    return func.HttpResponse(req.get_body())


@app.route(route="policy_from_host_json")
def policy_from_host_json(req: func.HttpRequest, context: func.Context) -> str:
    if _seen(context) < 2:
        raise ValueError("fails twice")
    return "third attempt"


@app.route(route="own_policy")
@app.retry(strategy="fixed_delay", max_retry_count="0", delay_interval="00:00:00")
def own_policy(req: func.HttpRequest, context: func.Context) -> str:
    _seen(context)
    raise ValueError("no retry: the function's own policy wins over host.json")


@app.orchestration_trigger(context_name="context")
def run_flaky(context: df.DurableOrchestrationContext):
    return (yield context.call_activity("flaky", "x"))


@app.orchestration_trigger(context_name="context")
def run_hopeless(context: df.DurableOrchestrationContext):
    return (yield context.call_activity("hopeless", "x"))


@app.activity_trigger(input_name="value")
@app.retry(strategy="fixed_delay", max_retry_count="2", delay_interval="00:00:00")
def flaky(value: str, context: func.Context) -> str:
    count = _seen(context)
    if count < 2:
        raise KeyError(f"attempt {count} failed")
    return f"ok after {count} retries"


@app.activity_trigger(input_name="value")
@app.retry(strategy="fixed_delay", max_retry_count="1", delay_interval="00:00:00")
def hopeless(value: str, context: func.Context) -> str:
    _seen(context)
    raise RuntimeError("never works")
"""


@pytest.fixture
def retry_host(tmp_path: Path) -> Iterator[LocalHost]:
    (tmp_path / "function_app.py").write_text(textwrap.dedent(APP))
    retry = {"strategy": "fixedDelay", "maxRetryCount": 2, "delayInterval": "00:00:00"}
    (tmp_path / "host.json").write_text(json.dumps({"version": "2.0", "retry": retry}))
    host = LocalHost(
        tmp_path,
        port=0,
        store="memory",
        drain_timeout=5,
        settings_overrides={"max_queue_polling_interval": timedelta(milliseconds=100)},
    )
    host.start()
    yield host
    host.stop()


def _seen(host: LocalHost, name: str) -> list[tuple[int, int, str, str]]:
    assert host.app is not None
    return list(host.app.module.SEEN.get(name, []))


def test_without_a_policy_the_retry_context_is_zero_as_the_worker_builds_it(tmp_path: Path) -> None:
    (tmp_path / "function_app.py").write_text(textwrap.dedent(APP))
    with LocalHost(tmp_path, port=0, store="memory", drain_timeout=5) as host:
        body = requests.get(host.base_url + "/api/plain", timeout=10).json()
    assert body == {"retry_count": 0, "max_retry_count": 0, "message": "", "source": ""}


def test_an_http_function_is_retried_with_the_same_request(retry_host: LocalHost) -> None:
    response = requests.post(retry_host.base_url + "/api/flaky_http", data=b"same body", timeout=10)
    assert response.status_code == 200 and response.content == b"same body"
    first, second = _seen(retry_host, "flaky_http")
    assert first == (0, 1, "", "")
    assert second[:2] == (1, 1)
    assert "Exception while executing function: Functions.flaky_http" in second[2]
    assert "ValueError: first attempt fails" in second[2] and second[3] == second[2]


def test_host_json_retry_applies_to_functions_without_their_own(retry_host: LocalHost) -> None:
    response = requests.get(retry_host.base_url + "/api/policy_from_host_json", timeout=10)
    assert response.status_code == 200 and response.text == "third attempt"
    assert [seen[:2] for seen in _seen(retry_host, "policy_from_host_json")] == [(0, 2), (1, 2), (2, 2)]
    refused = requests.get(retry_host.base_url + "/api/own_policy", timeout=10)
    assert refused.status_code == 500
    assert [seen[:2] for seen in _seen(retry_host, "own_policy")] == [(0, 0)]


def test_an_activity_is_retried_before_its_failure_reaches_the_orchestration(retry_host: LocalHost) -> None:
    instance = retry_host.engine.start_new("run_flaky")
    status = retry_host.engine.wait_for_completion(instance, 30)
    assert status is not None and status.runtime_status is RuntimeStatus.COMPLETED, status
    assert json.loads(status.output or "null") == "ok after 2 retries"
    seen = _seen(retry_host, "flaky")
    assert [entry[:2] for entry in seen] == [(0, 2), (1, 2), (2, 2)]
    assert "KeyError: 'attempt 0 failed'" in seen[1][2] and "KeyError: 'attempt 1 failed'" in seen[2][2]


def test_an_activity_that_fails_every_retry_fails_the_orchestration(retry_host: LocalHost) -> None:
    instance = retry_host.engine.start_new("run_hopeless")
    status = retry_host.engine.wait_for_completion(instance, 30)
    assert status is not None and status.runtime_status is RuntimeStatus.FAILED, status
    assert "never works" in (status.output or "")
    assert [entry[:2] for entry in _seen(retry_host, "hopeless")] == [(0, 1), (1, 1)]
