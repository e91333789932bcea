"""End to end: the basic sample app served in a subprocess, driven over HTTP only."""

from __future__ import annotations

import json

import requests

from tests.host.conftest import ServedApp, start, wait_for_status

WEBHOOKS = "/runtime/webhooks/durabletask"


def test_chaining_with_history(basic_app: ServedApp) -> None:
    links = start(basic_app.base_url, "chaining")
    final = wait_for_status(links["statusQueryGetUri"])
    assert final["runtimeStatus"] == "Completed"
    assert final["output"] == ["Hello Tokyo!", "Hello Seattle!", "Hello London!"]
    shown = requests.get(links["statusQueryGetUri"] + "&showHistory=true&showHistoryOutput=true", timeout=10)
    assert shown.status_code == 200
    events = shown.json()["historyEvents"]
    completed = [e for e in events if e["EventType"] == "TaskCompleted"]
    assert [e["FunctionName"] for e in completed] == ["say_hello"] * 3
    assert [e["Result"] for e in completed] == final["output"]
    assert events[0]["EventType"] == "ExecutionStarted" and events[-1]["EventType"] == "ExecutionCompleted"


def test_wait_for_completion_returns_the_output(basic_app: ServedApp) -> None:
    response = requests.post(f"{basic_app.base_url}/api/wait/chaining", timeout=60)
    assert response.status_code == 200, response.text
    assert response.json() == ["Hello Tokyo!", "Hello Seattle!", "Hello London!"]


def test_timer(basic_app: ServedApp) -> None:
    links = start(basic_app.base_url, "timer", 0.3)
    running = requests.get(links["statusQueryGetUri"], timeout=10)
    assert running.status_code in (200, 202)
    final = wait_for_status(links["statusQueryGetUri"])
    assert (final["runtimeStatus"], final["output"]) == ("Completed", "timer fired")


def test_external_event_through_send_event_uri(basic_app: ServedApp) -> None:
    links = start(basic_app.base_url, "approval")
    waiting = wait_for_status(links["statusQueryGetUri"], statuses=("Running",))
    pending = requests.get(links["statusQueryGetUri"], timeout=10)
    assert pending.status_code == 202 and pending.headers["Location"] and pending.headers["Retry-After"] == "5"
    assert waiting["customStatus"] == "waiting"
    url = links["sendEventPostUri"].replace("{eventName}", "Approval")
    assert requests.post(url, json={"by": "alice"}, timeout=10).status_code == 202
    final = wait_for_status(links["statusQueryGetUri"])
    assert final["output"] == {"approved": {"by": "alice"}}
    assert requests.post(url, json=1, timeout=10).status_code == 410
    assert requests.post(url, data="x", headers={"Content-Type": "text/plain"}, timeout=10).status_code == 410


def test_raise_event_needs_json(basic_app: ServedApp) -> None:
    links = start(basic_app.base_url, "approval")
    wait_for_status(links["statusQueryGetUri"], statuses=("Running",))
    url = links["sendEventPostUri"].replace("{eventName}", "Approval")
    assert requests.post(url, data="x", headers={"Content-Type": "text/plain"}, timeout=10).status_code == 400
    assert requests.post(url, data="{bad", headers={"Content-Type": "application/json"}, timeout=10).status_code == 400
    deep = "[" * 100_000 + "]" * 100_000  # valid JSON that Python's decoder cannot recurse through
    assert requests.post(url, data=deep, headers={"Content-Type": "application/json"}, timeout=10).status_code == 400
    requests.post(links["terminatePostUri"].replace("{text}", "cleanup"), timeout=10)


def test_sub_orchestrations(basic_app: ServedApp) -> None:
    final = wait_for_status(start(basic_app.base_url, "parent")["statusQueryGetUri"])
    assert (final["runtimeStatus"], final["output"]) == ("Completed", [4, 10])


def test_continue_as_new(basic_app: ServedApp) -> None:
    final = wait_for_status(start(basic_app.base_url, "counter", 0)["statusQueryGetUri"])
    assert (final["runtimeStatus"], final["output"]) == ("Completed", 3)


def test_retries(basic_app: ServedApp) -> None:
    final = wait_for_status(start(basic_app.base_url, "retrying")["statusQueryGetUri"])
    assert (final["runtimeStatus"], final["output"]) == ("Completed", "succeeded after 3 attempts")


def test_failing_activity_fails_the_orchestration(basic_app: ServedApp) -> None:
    links = start(basic_app.base_url, "failing")
    final = wait_for_status(links["statusQueryGetUri"])
    assert final["runtimeStatus"] == "Failed"
    assert "kaboom" in str(final["output"])
    assert requests.get(links["statusQueryGetUri"], timeout=10).status_code == 200
    failed = requests.get(links["statusQueryGetUri"] + "&returnInternalServerErrorOnFailure=true", timeout=10)
    assert failed.status_code == 500


def test_webhook_start_with_timeout_answers_a_failure_with_the_full_status(basic_app: ServedApp) -> None:
    # The extension answers a terminal, not-completed wait with its GET-status response: input included.
    url = f"{basic_app.base_url}{WEBHOOKS}/orchestrators/failing?timeout=60&pollingInterval=1&showHistory=true"
    response = requests.post(url, json={"why": "input shown"}, timeout=90)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["runtimeStatus"] == "Failed"
    assert body["input"] == {"why": "input shown"}
    assert any(event["EventType"] == "TaskFailed" for event in body["historyEvents"])


def test_terminate(basic_app: ServedApp) -> None:
    links = start(basic_app.base_url, "long_wait")
    wait_for_status(links["statusQueryGetUri"], statuses=("Running",))
    url = links["terminatePostUri"].replace("{text}", "no longer needed")
    assert requests.post(url, timeout=10).status_code == 202
    final = wait_for_status(links["statusQueryGetUri"])
    assert (final["runtimeStatus"], final["output"]) == ("Terminated", "no longer needed")
    assert requests.post(url, timeout=10).status_code == 410


def test_suspend_and_resume(basic_app: ServedApp) -> None:
    links = start(basic_app.base_url, "approval")
    wait_for_status(links["statusQueryGetUri"], statuses=("Running",))
    # Resuming a running instance is an error in the extension (InvalidOperationException -> 500).
    not_suspended = requests.post(links["resumePostUri"].replace("{text}", "early"), timeout=10)
    assert not_suspended.status_code == 500
    assert "Running" in not_suspended.json()["ExceptionMessage"]
    assert requests.post(links["suspendPostUri"].replace("{text}", "pause"), timeout=10).status_code == 202
    suspended = wait_for_status(links["statusQueryGetUri"], statuses=("Suspended",))
    assert suspended["runtimeStatus"] == "Suspended"
    assert requests.post(links["suspendPostUri"].replace("{text}", "again"), timeout=10).status_code == 500
    assert requests.post(links["resumePostUri"].replace("{text}", "go"), timeout=10).status_code == 202
    wait_for_status(links["statusQueryGetUri"], statuses=("Running",))
    requests.post(links["sendEventPostUri"].replace("{eventName}", "Approval"), json="yes", timeout=10)
    assert wait_for_status(links["statusQueryGetUri"])["output"] == {"approved": "yes"}


def test_unknown_instance_is_404(basic_app: ServedApp) -> None:
    base = f"{basic_app.base_url}{WEBHOOKS}/instances/does-not-exist"
    assert requests.get(base, timeout=10).status_code == 404
    assert requests.post(f"{base}/raiseEvent/x", json=1, timeout=10).status_code == 404
    assert requests.post(f"{base}/terminate?reason=x", timeout=10).status_code == 404
    assert requests.delete(base, timeout=10).status_code == 404
    assert requests.get(f"{basic_app.base_url}/api/status/does-not-exist", timeout=10).status_code == 404
    # Restart is the exception: the extension's RestartAsync throws ArgumentException, answered with 400.
    restarted = requests.post(f"{base}/restart", timeout=10)
    assert restarted.status_code == 400
    assert restarted.json()["Message"] == "InstanceId does not match a valid orchestration instance."


def test_sdk_client_from_http_functions(basic_app: ServedApp) -> None:
    links = start(basic_app.base_url, "approval", instance_id="sdk-client-1")
    assert links["id"] == "sdk-client-1"
    wait_for_status(links["statusQueryGetUri"], statuses=("Running",))
    status = requests.get(f"{basic_app.base_url}/api/status/sdk-client-1", timeout=10).json()
    assert status["runtimeStatus"] == "Running"
    raised = requests.post(f"{basic_app.base_url}/api/events/sdk-client-1/Approval", json={"k": 1}, timeout=10)
    assert raised.status_code == 202
    final = wait_for_status(links["statusQueryGetUri"])
    assert final["runtimeStatus"] == "Completed"
    # The SDK client JSON-encodes event data before posting it, so the orchestrator receives text.
    assert final["output"]["approved"] in ({"k": 1}, '{"k": 1}')
    done = requests.get(f"{basic_app.base_url}/api/status/sdk-client-1", timeout=10).json()
    assert done["runtimeStatus"] == "Completed" and done["historyLength"] > 0
    listed = requests.get(f"{basic_app.base_url}/api/list", timeout=10).json()
    assert "sdk-client-1" in listed
    other = start(basic_app.base_url, "long_wait")
    wait_for_status(other["statusQueryGetUri"], statuses=("Running",))
    assert requests.post(f"{basic_app.base_url}/api/terminate/{other['id']}", timeout=10).status_code == 202
    assert wait_for_status(other["statusQueryGetUri"])["runtimeStatus"] == "Terminated"


def test_list_and_purge(basic_app: ServedApp) -> None:
    links = start(basic_app.base_url, "chaining")
    wait_for_status(links["statusQueryGetUri"])
    listed = requests.get(f"{basic_app.base_url}{WEBHOOKS}/instances?runtimeStatus=Completed", timeout=10)
    assert listed.status_code == 200
    assert links["id"] in [item["instanceId"] for item in listed.json()]
    assert {item["runtimeStatus"] for item in listed.json()} == {"Completed"}
    first = requests.get(f"{basic_app.base_url}{WEBHOOKS}/instances?top=1", timeout=10)
    assert len(first.json()) == 1 and first.headers.get("x-ms-continuation-token")
    running = start(basic_app.base_url, "long_wait")
    wait_for_status(running["statusQueryGetUri"], statuses=("Running",))
    purged = requests.delete(links["purgeHistoryDeleteUri"], timeout=10)
    assert (purged.status_code, purged.json()) == (200, {"instancesDeleted": 1})
    assert requests.get(links["statusQueryGetUri"], timeout=10).status_code == 404
    # Like the extension's handler, a running instance is purged too (no 412).
    assert requests.delete(running["purgeHistoryDeleteUri"], timeout=10).status_code == 200
    assert requests.get(running["statusQueryGetUri"], timeout=10).status_code == 404


def test_webhook_start_with_and_without_instance_id(basic_app: ServedApp) -> None:
    # Posted as the Python SDK client posts it (JSON text sent as a JSON string): the extension parses the stored
    # input once for the worker, so a raw non-object JSON body would not reach get_input() as a value.
    created = requests.post(
        f"{basic_app.base_url}{WEBHOOKS}/orchestrators/child/my-child-7", json=json.dumps(21), timeout=10
    )
    assert created.status_code == 202 and created.json()["id"] == "my-child-7"
    assert wait_for_status(created.headers["Location"])["output"] == 42
    fresh = requests.post(f"{basic_app.base_url}{WEBHOOKS}/orchestrators/child", json=1, timeout=10)
    assert fresh.status_code == 202 and fresh.json()["id"] != "my-child-7"
    bad = requests.post(f"{basic_app.base_url}{WEBHOOKS}/orchestrators/child", data="{nope", timeout=10)
    assert bad.status_code == 400
    deep = requests.post(f"{basic_app.base_url}{WEBHOOKS}/orchestrators/child", data="[" * 100_000, timeout=10)
    assert deep.status_code == 400, deep.text


def test_http_routing_and_invocation(basic_app: ServedApp) -> None:
    response = requests.post(
        f"{basic_app.base_url}/api/echo/5/more?q=1", data="payload", headers={"x-test": "yes"}, timeout=10
    )
    assert response.status_code == 200
    assert response.json() == {
        "method": "POST",
        "route": {"n": "5", "rest": "more"},
        "query": {"q": "1"},
        "header": "yes",
        "body": "payload",
        "function": "echo",
    }
    assert requests.get(f"{basic_app.base_url}/api/echo/5", timeout=10).json()["route"] == {"n": "5"}
    assert requests.get(f"{basic_app.base_url}/api/echo/abc", timeout=10).status_code == 404
    assert requests.delete(f"{basic_app.base_url}/api/echo/5", timeout=10).status_code == 404
    assert requests.get(f"{basic_app.base_url}/api/text?q=hi", timeout=10).text == "plain hi"
    assert requests.get(f"{basic_app.base_url}/api/boom", timeout=10).status_code == 500
    assert requests.get(f"{basic_app.base_url}/nothing-here", timeout=10).status_code == 404
