"""The collections and follows APIs' answers: URLs from the host's configured base (never the request's ``Host``), and
every JSON answer with ``X-Content-Type-Options: nosniff``. Real ``DurableOrchestrationClient`` over the local host's
binding."""

from __future__ import annotations

import asyncio
import json

import azure.durable_functions as df
import azure.functions as func

from durable_local.host.client_binding import client_binding_json
from durable_local.host.keys import HostKeys
from http_api import collections, doctor, follows, view
from http_api.common import ApiResponse
from shared.errors import ConfigError

CONFIGURED = "https://collector.example.net"
FORGED_URL = "http://evil.example:666/api/collections"


def _binding() -> str:
    # The binding the host hands the function: its URLs come from WEBSITE_HOSTNAME (or the local host's own base).
    return client_binding_json(CONFIGURED, "UalCollector", HostKeys(required=True))


def _client() -> df.DurableOrchestrationClient:
    return df.DurableOrchestrationClient(_binding())


def _request(url: str, *, route_id: str = "", params: dict[str, str] | None = None) -> func.HttpRequest:
    # What the Functions host builds from the request it received: the URL carries the Host header the caller sent.
    return func.HttpRequest("POST", url, headers={"host": "evil.example:666"}, params=params or {},
                            route_params={"id": route_id}, body=b"")  # fmt: skip


def test_links_and_summary_uri_come_from_the_configured_base_not_the_request() -> None:
    answer = ApiResponse(202, {"collectionId": "c1"}, instance_id="c1")
    response = collections._respond(_request(FORGED_URL), _client(), answer)
    body = json.loads(response.get_body())
    urls = {key: value for key, value in body.items() if isinstance(value, str) and "://" in value}
    assert urls["summaryUri"] == f"{CONFIGURED}/api/collections/c1"
    assert urls["statusQueryGetUri"].startswith(f"{CONFIGURED}/runtime/webhooks/durabletask/instances/c1?")
    assert {key for key, value in urls.items() if not value.startswith(CONFIGURED + "/")} == set()
    assert "evil.example" not in response.get_body().decode()


def test_a_followers_links_come_from_the_configured_base_not_the_request() -> None:
    answer = ApiResponse(202, {"followId": "follow-graph-1"}, instance_id="follow-graph-1")
    response = follows._respond(_request("http://evil.example:666/api/follows"), _client(), answer)
    body = json.loads(response.get_body())
    urls = {key: value for key, value in body.items() if isinstance(value, str) and "://" in value}
    assert urls["summaryUri"] == f"{CONFIGURED}/api/follows/follow-graph-1"
    assert {key for key, value in urls.items() if not value.startswith(CONFIGURED + "/")} == set()
    assert "evil.example" not in response.get_body().decode()


def _nosniff(response: func.HttpResponse) -> bool:
    return response.mimetype == "application/json" and response.headers.get("X-Content-Type-Options") == "nosniff"


def test_every_json_answer_says_nosniff() -> None:
    answers = [
        collections._respond(_request(FORGED_URL), _client(), ApiResponse(202, {"ok": True}, instance_id="c1")),
        collections._respond(_request(FORGED_URL), _client(), ApiResponse(400, {"error": {}})),
        collections._config_error(ConfigError("AUDIT_CLIENT_ID", "missing")),
        follows._respond(_request(FORGED_URL), _client(), ApiResponse(202, {"ok": True}, instance_id="follow-x")),
        follows._respond(_request(FORGED_URL), _client(), ApiResponse(400, {"error": {}})),
        follows._config_error(ConfigError("AUDIT_CLIENT_ID", "missing")),
        view.collection_page._function.get_user_function()(req=_request("http://127.0.0.1/x", route_id="../etc")),
    ]
    recent = view.collections_list._function.get_user_function()
    answers.append(asyncio.run(recent(req=_request("http://127.0.0.1/api/collections", params={"top": "0"}),
                                      client=_binding())))  # fmt: skip
    doctor_fn = doctor.doctor._function.get_user_function()
    answers.append(asyncio.run(doctor_fn(req=_request("http://127.0.0.1/api/doctor"), client=_binding())))
    assert [(r.status_code, _nosniff(r)) for r in answers] == [(r.status_code, True) for r in answers]
