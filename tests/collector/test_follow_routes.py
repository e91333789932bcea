"""``follow_routes.refuse``: the collections routes given a follower's, a pass's or a day collection's id answer 4xx
naming what to use; a plain collection (or a pass's own summary) goes through."""

from __future__ import annotations

from typing import Any

from azure.durable_functions.models.DurableOrchestrationStatus import DurableOrchestrationStatus

from http_api.follow_routes import refuse
from shared import names

FOLLOW = "follow-graph-0123456789ab"
PASS = f"{FOLLOW}-20241118-p3"


def status(instance: str, name: str, payload: Any = None) -> DurableOrchestrationStatus:
    return DurableOrchestrationStatus(
        name=name, instanceId=instance, createdTime="2024-11-18T00:00:00Z", runtimeStatus="Completed", input=payload
    )


FOLLOWER = status(FOLLOW, names.ORCHESTRATOR_FOLLOW, {"spec": {"followId": FOLLOW}})
A_PASS = status(PASS, names.ORCHESTRATOR_COLLECT, {"spec": {}, "request": {"follow": FOLLOW}})
COLLECTION = status("incident-4711", names.ORCHESTRATOR_COLLECT, {"spec": {}, "request": {"tenantId": "t"}})
MISSING = DurableOrchestrationStatus()


def answer(instance: str, found: Any, route: Any) -> tuple[int, str, str] | None:
    refused = refuse(instance, found, route)
    if refused is None:
        return None
    return refused.status, refused.body["error"]["rule"], refused.body["error"]["message"]


def test_a_followers_id() -> None:
    code, rule, message = answer(FOLLOW, FOLLOWER, "cancel") or (0, "", "")
    assert (code, rule) == (409, "follower") and f"POST /api/follows/{FOLLOW}/stop" in message
    code, rule, message = answer(FOLLOW, FOLLOWER, "retry-failed") or (0, "", "")
    assert (code, rule) == (409, "follower") and "retries its failed windows itself" in message
    code, rule, message = answer(FOLLOW, FOLLOWER, "summary") or (0, "", "")
    assert (code, rule) == (404, "follower") and f"GET /api/follows/{FOLLOW}" in message


def test_a_passs_id() -> None:
    assert answer(PASS, A_PASS, "summary") is None, "a pass's summary and live page are its own"
    code, rule, message = answer(PASS, A_PASS, "retry-failed") or (0, "", "")
    assert (code, rule) == (409, "follower_pass") and f"GET /api/follows/{FOLLOW}" in message
    code, rule, message = answer(PASS, A_PASS, "cancel") or (0, "", "")
    assert (code, rule) == (409, "follower_pass") and f"POST /api/follows/{FOLLOW}/stop" in message


def test_a_day_collections_id_and_plain_collections() -> None:
    code, rule, message = answer(f"{FOLLOW}-20241118", MISSING, "cancel") or (0, "", "")
    assert (code, rule) == (404, "follower_day") and f"GET /api/follows/{FOLLOW}" in message
    assert answer("incident-4711", COLLECTION, "cancel") is None
    assert answer("incident-4711", MISSING, "retry-failed") is None, "an unknown id stays the route's own 404"
