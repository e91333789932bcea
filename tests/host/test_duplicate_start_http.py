"""A start with the id of a running instance: the extension answers 500 (DTFx's OrchestrationAlreadyExistsException
reaches HttpApiHandler's catch-all), over real HTTP.

An in-process ``LocalHost`` serving the basic app; the SDK client runs inside the app's own starter function.
"""

from __future__ import annotations

import requests

from durable_local.host import LocalHost
from tests.host.conftest import hook as _hook
from tests.host.conftest import wait_for_status

SOMETHING_WENT_WRONG = "Something went wrong while processing your request"


def test_duplicate_start_of_a_running_instance_answers_500_like_the_extension(host: LocalHost) -> None:
    first = requests.post(_hook(host, "orchestrators/long_wait/dup-1"), timeout=30)
    assert first.status_code == 202, first.text
    wait_for_status(first.json()["statusQueryGetUri"], statuses=("Running",))
    again = requests.post(_hook(host, "orchestrators/long_wait/dup-1"), timeout=30)
    assert again.status_code == 500, again.text
    body = again.json()
    assert body["Message"] == SOMETHING_WENT_WRONG
    assert body["ExceptionMessage"] == "An Orchestration instance with the status Running already exists."
    assert body["ExceptionType"] == "DurableTask.Core.Exceptions.OrchestrationAlreadyExistsException"
    restarted = requests.post(_hook(host, "instances/dup-1/restart?restartWithNewInstanceId=false"), timeout=30)
    assert restarted.status_code == 500, restarted.text
    assert restarted.json()["ExceptionMessage"] == body["ExceptionMessage"]
    # The SDK raises on the 500 as it does on a 400: the collector's start path relies on that.
    through_sdk = requests.post(f"{host.base_url}/api/orchestrators/long_wait/dup-1", timeout=30)
    assert through_sdk.status_code == 500, through_sdk.text
    requests.post(_hook(host, "instances/dup-1/terminate"), timeout=10)
