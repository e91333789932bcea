"""The real DurableOrchestrationClient's management calls, from HTTP functions of the served app."""

from __future__ import annotations

from collections.abc import Callable

import requests

from tests.host.conftest import ServedApp, start, wait_for_status


def _sdk(served: ServedApp, op: str, instance_id: str = "") -> object:
    response = requests.post(f"{served.base_url}/api/sdk/{op}/{instance_id}", timeout=30)
    assert response.status_code == 200, (op, response.status_code, response.text, served.log()[-3000:])
    return response.json()["result"]


def test_suspend_resume_restart_purge_and_queries(serve_app: Callable[..., ServedApp]) -> None:
    served = serve_app("basic", store="memory")
    links = start(served.base_url, "approval", instance_id="sdk-ops")
    wait_for_status(links["statusQueryGetUri"], statuses=("Running",))
    assert _sdk(served, "status_by") == ["sdk-ops"]
    _sdk(served, "suspend", "sdk-ops")
    wait_for_status(links["statusQueryGetUri"], statuses=("Suspended",))
    _sdk(served, "resume", "sdk-ops")
    wait_for_status(links["statusQueryGetUri"], statuses=("Running",))
    payload = _sdk(served, "payload", "sdk-ops")
    assert isinstance(payload, dict) and payload["statusQueryGetUri"] == links["statusQueryGetUri"]
    requests.post(links["sendEventPostUri"].replace("{eventName}", "Approval"), json=1, timeout=10)
    assert wait_for_status(links["statusQueryGetUri"])["output"] == {"approved": 1}
    _sdk(served, "restart", "sdk-ops")
    restarted = wait_for_status(links["statusQueryGetUri"], statuses=("Running",))
    assert restarted["output"] is None
    requests.post(links["sendEventPostUri"].replace("{eventName}", "Approval"), json=2, timeout=10)
    assert wait_for_status(links["statusQueryGetUri"])["output"] == {"approved": 2}
    assert _sdk(served, "purge", "sdk-ops") == 1
    assert requests.get(links["statusQueryGetUri"], timeout=10).status_code == 404
    other = [wait_for_status(start(served.base_url, "chaining")["statusQueryGetUri"]) for _ in range(2)]
    assert all(s["runtimeStatus"] == "Completed" for s in other)
    assert _sdk(served, "purge_by") == 2


def test_orchestrator_logs_are_dropped_during_replay_unless_asked(serve_app: Callable[..., ServedApp]) -> None:
    quiet = serve_app("basic", store="memory")
    wait_for_status(start(quiet.base_url, "logged")["statusQueryGetUri"])
    assert quiet.log().count("logged-orchestrator step 0") == 1
    assert quiet.log().count("logged-orchestrator step 2") == 1
    loud = serve_app("basic", store="memory", extra=["--replay-logs"])
    wait_for_status(start(loud.base_url, "logged")["statusQueryGetUri"])
    assert loud.log().count("logged-orchestrator step 0") > 1
