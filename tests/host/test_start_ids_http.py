"""The extension's HTTP answers for instance ids it refuses on start, over real HTTP.

An in-process ``LocalHost`` serving the basic app; the SDK client runs inside the app's own starter function.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
import requests

from durable_local.host import LocalHost
from tests.host.conftest import exists as _exists
from tests.host.conftest import hook as _hook

SOMETHING_WENT_WRONG = "Something went wrong while processing your request"


# -- Finding: instance ids on start ------------------------------------------------------------------------

_CHAR_RULE = "instanceId (Parameter 'Orchestration instance ids must not contain /, \\, #, ?, or control characters.')"


@pytest.mark.parametrize(
    ("instance_id", "message"),
    [
        ("@counter@x", "instanceId (Parameter 'Orchestration instance ids must not start with @.')"),
        ("a/b", _CHAR_RULE),
        ("a\\b", _CHAR_RULE),
        ("a#b", _CHAR_RULE),
        ("a?b", _CHAR_RULE),
        ("a\x01b", _CHAR_RULE),
        ("b" * 257, "Instance ID lengths must not exceed 256 characters."),
    ],
    ids=["at", "slash", "backslash", "hash", "question", "control", "long"],
)
def test_webhook_start_answers_400_for_an_id_the_extension_refuses(
    host: LocalHost, instance_id: str, message: str
) -> None:
    response = requests.post(_hook(host, "orchestrators/chaining/" + quote(instance_id, safe="")), timeout=30)
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["Message"] == "One or more of the arguments submitted is incorrect"
    assert (body["ExceptionMessage"], body["ExceptionType"]) == (message, "System.ArgumentException")
    assert not _exists(host, instance_id)


def test_sdk_start_new_raises_for_an_at_id_and_starts_nothing(host: LocalHost) -> None:
    # The app's starter awaits client.start_new, which raises on the 400, so the function itself fails.
    response = requests.post(f"{host.base_url}/api/orchestrators/chaining/@sdk", json="x", timeout=30)
    assert response.status_code == 500, response.text
    assert not _exists(host, "@sdk")
    listed = requests.get(_hook(host, "entities"), timeout=10).json()
    assert listed == []
