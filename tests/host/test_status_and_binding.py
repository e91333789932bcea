from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime, timedelta

import azure.functions as func
import pytest
from aiohttp.test_utils import make_mocked_request
from azure.durable_functions import DurableOrchestrationClient

from durable_local import history
from durable_local.engine_api import InstanceStatus
from durable_local.host.client_binding import client_binding_json
from durable_local.host.invoke import AsyncRunner, make_activity
from durable_local.host.keys import HostKeys, keys_equal
from durable_local.host.loader import ActivityFunction
from durable_local.host.query import query_float as _float
from durable_local.host.status_json import history_payload, status_payload
from durable_local.host.webhooks import DurableHttpApi
from durable_local.model import EventType, RuntimeStatus

T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)


def _history() -> list[dict[str, object]]:
    started = history.execution_started(timestamp=T0, name="chain", instance_id="i1", execution_id="e1", input='"x"')
    scheduled = {
        "EventType": int(EventType.TASK_SCHEDULED),
        "EventId": 0,
        "IsPlayed": True,
        "Timestamp": history.format_timestamp(T0),
        "Name": "say_hello",
        "Version": "",
        "Input": '"x"',
    }
    completed = history.task_completed(timestamp=T0 + timedelta(seconds=1), task_scheduled_id=0, result='"Hello x!"')
    done = {
        "EventType": int(EventType.EXECUTION_COMPLETED),
        "EventId": 1,
        "IsPlayed": False,
        "Timestamp": history.format_timestamp(T0 + timedelta(seconds=2)),
        "OrchestrationStatus": 1,
        "Result": '["Hello x!"]',
    }
    return [
        history.orchestrator_started(timestamp=T0),
        started,
        scheduled,
        history.orchestrator_completed(timestamp=T0),
        history.orchestrator_started(timestamp=T0 + timedelta(seconds=1)),
        completed,
        done,
        history.orchestrator_completed(timestamp=T0 + timedelta(seconds=2)),
    ]


def test_history_is_formatted_like_the_extension() -> None:
    events = history_payload(_history(), show_history_output=True)
    assert [e["EventType"] for e in events] == ["ExecutionStarted", "TaskCompleted", "ExecutionCompleted"]
    assert events[0]["FunctionName"] == "chain" and events[0]["Input"] == '"x"'  # the stored text, unparsed
    assert events[1]["FunctionName"] == "say_hello" and events[1]["Input"] == '"x"'  # its TaskScheduled's input
    assert events[1]["ScheduledTime"] == history.format_timestamp(T0)
    assert events[1]["Result"] == "Hello x!"
    assert "TaskScheduledId" not in events[1] and "EventId" not in events[1] and "IsPlayed" not in events[1]
    assert events[2]["OrchestrationStatus"] == "Completed" and events[2]["Result"] == ["Hello x!"]
    hidden = history_payload(_history(), show_history_output=False)
    assert "Result" not in hidden[1] and "Result" not in hidden[2]
    assert all("Input" not in e for e in history_payload(_history(), show_history_output=True, show_input=False))


def test_status_payload_parses_json_text_and_formats_times() -> None:
    status = InstanceStatus(
        instance_id="i1",
        name="chain",
        runtime_status=RuntimeStatus.FAILED,
        created_time=T0,
        last_updated_time=T0 + timedelta(seconds=3),
        input='{"a": 1}',
        output='"boom"',
        custom_status="not json",
    )
    body = status_payload(status)
    assert body == {
        "name": "chain",
        "instanceId": "i1",
        "runtimeStatus": "Failed",
        "input": {"a": 1},
        "customStatus": "not json",
        "output": "boom",
        "createdTime": "2024-05-01T12:00:00Z",
        "lastUpdatedTime": "2024-05-01T12:00:03Z",
    }
    assert status_payload(status, show_input=False)["input"] is None


def test_sdk_client_builds_check_status_urls_from_the_binding() -> None:
    keys = HostKeys(required=True)
    binding = client_binding_json("http://127.0.0.1:7071", "MyHub", keys)
    client = DurableOrchestrationClient(binding)
    request = func.HttpRequest("POST", "http://127.0.0.1:7071/api/start", body=b"")
    response = client.create_check_status_response(request, "abc")
    payload = json.loads(response.get_body())
    assert response.status_code == 202
    assert payload["id"] == "abc"
    assert payload["statusQueryGetUri"] == (
        f"http://127.0.0.1:7071/runtime/webhooks/durabletask/instances/abc?taskHub=MyHub&connection=Storage"
        f"&code={keys.system_key}"
    )
    assert payload["sendEventPostUri"].startswith("http://127.0.0.1:7071/runtime/webhooks/durabletask/instances/abc/")
    assert response.headers["Location"] == payload["statusQueryGetUri"]
    # RPC calls carry the per-process token in the path (the SDK appends no query string to them).
    assert client._orchestration_bindings.rpc_base_url == (
        f"http://127.0.0.1:7071/runtime/webhooks/durabletask/rpc/{keys.rpc_token}/"
    )


def test_keys_by_auth_level() -> None:
    keys = HostKeys(required=True)
    assert keys.allows("anonymous", {}, {})
    assert not keys.allows("function", {}, {})
    assert keys.allows("function", {"code": keys.function_key}, {})
    assert keys.allows("function", {}, {"x-functions-key": keys.master_key})
    assert not keys.allows("admin", {"code": keys.function_key}, {})
    assert keys.allows("system", {"code": keys.system_key}, {})
    assert not keys.allows("system", {"code": keys.function_key}, {})
    assert HostKeys(required=False).allows("admin", {}, {})


class Point:
    def __init__(self, x: int) -> None:
        self.x = x

    def to_json(self) -> str:
        return json.dumps({"x": self.x})

    @classmethod
    def from_json(cls, text: str) -> Point:
        return cls(json.loads(text)["x"])


def test_activity_codec_matches_the_worker_including_custom_objects() -> None:
    def move(point: Point) -> Point:
        return Point(point.x + 1)

    async def shout(text: str) -> str:
        await asyncio.sleep(0)
        return text.upper()

    run = make_activity(ActivityFunction("move", "point", move, False), AsyncRunner(), ".")
    encoded = json.dumps({"__class__": "Point", "__module__": __name__, "__data__": json.dumps({"x": 1})})
    result = json.loads(run(encoded) or "null")
    assert result["__class__"] == "Point" and json.loads(result["__data__"]) == {"x": 2}
    async_run = make_activity(ActivityFunction("shout", "text", shout, True), AsyncRunner(), ".")
    assert async_run('"hi"') == '"HI"'
    # Not JSON: the worker falls back to the raw string.
    assert async_run("plain words") == '"PLAIN WORDS"'


def test_non_ascii_keys_are_refused_not_raised() -> None:
    # hmac.compare_digest raises TypeError for non-ASCII str: a junk key must give 401, not a 500.
    keys = HostKeys(required=True)
    assert not keys.allows("function", {"code": "clé-invalide"}, {})
    assert not keys.allows("system", {}, {"x-functions-key": "ключ"})
    assert keys_equal("é", "é") and not keys_equal("é", "e")


class _BrokenEngine:
    hub_name = "Hub"

    def get_status(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("store unavailable")


def test_api_failure_log_does_not_contain_the_rpc_token(caplog: pytest.LogCaptureFixture) -> None:
    keys = HostKeys(required=True)
    api = DurableHttpApi(_BrokenEngine(), base_url=lambda: "http://127.0.0.1:1", keys=keys)  # type: ignore[arg-type]
    request = make_mocked_request("GET", f"/runtime/webhooks/durabletask/rpc/{keys.rpc_token}/instances/abc")
    with caplog.at_level(logging.ERROR, logger="durable_local.host.webhooks"):
        response = asyncio.run(api.handle(request, "instances/abc"))
    assert response.status == 500
    assert "instances/abc" in caplog.text
    assert keys.rpc_token not in caplog.text


def test_wait_parameters_must_be_finite_seconds() -> None:
    # timeout=nan or inf would keep a wait_for_completion thread busy forever.
    assert [_float(v) for v in ("nan", "inf", "-inf", "abc", None)] == [None] * 5
    assert _float("2.5") == 2.5
