"""Reading an error body and the HTTP retry policy: the rules a hand mutation showed no other test held
(docs/testing.md, "Mutation"). Bodies are parsed as the client parses them; the policy runs over real loopback HTTP."""

from __future__ import annotations

import json

import pytest

from shared.audit.error_body import Problem, classify, parse_error_body
from shared.audit.http import AmbiguousResponseError
from shared.errors import PermanentApiError
from tests.audit.scripted_server import Reply, replies, scripted_server
from tests.audit.test_http_policy import OK, make_client


def exchange_error(*details: str) -> dict[str, object]:
    return {"error": {"code": "InternalServerError", "message": "Error executing cmdlet",
                      "details": [{"code": "Context", "message": m} for m in details]}}  # fmt: skip


def test_a_failing_cmdlet_is_told_by_the_text_after_code_and_exception_type() -> None:
    body = exchange_error("ManagementObjectNotFound|Microsoft.Exchange.Management|The mailbox could not be found.")
    assert parse_error_body(body, "").message == "Error executing cmdlet: The mailbox could not be found."


def test_a_json_detail_is_read_for_its_message_in_either_letter_case() -> None:
    inner = json.dumps({"message": "The search is still running."})
    assert parse_error_body(exchange_error(inner), "").message == "Error executing cmdlet: The search is still running."


def test_a_generic_web_api_message_is_followed_by_its_detail() -> None:
    body = {"Message": "An error has occurred.", "MessageDetail": "No query with that id."}
    assert parse_error_body(body, "").message == "An error has occurred.: No query with that id."


def test_a_bare_status_object_saying_auditing_is_off_is_recognised() -> None:
    assert classify(parse_error_body({"Status": "AuditingDisabledTenant"}, "")) is Problem.AUDITING_DISABLED


def test_an_oauth_style_error_is_told_by_its_description() -> None:
    body = {"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."}
    parsed = parse_error_body(body, "")
    assert (parsed.code, parsed.message) == ("invalid_client", "AADSTS7000215: Invalid client secret provided.")
    assert classify(parse_error_body({"error": "x", "error_description": "Insufficient privileges: AccessDenied"}, ""))


def test_the_inner_code_stands_in_for_a_missing_outer_one() -> None:
    body = {"error": {"message": "Bad request", "innerError": {"code": "InvalidQueryFilter"}}}
    assert parse_error_body(body, "").code == "InvalidQueryFilter"


def test_a_task_cancelled_by_exchange_is_transient() -> None:
    assert classify(parse_error_body(exchange_error("A task was canceled."), "")) is Problem.TRANSIENT


# --- the HTTP policy ----------------------------------------------------------------------------------------------
def test_a_408_is_retried_and_a_505_is_not() -> None:
    with scripted_server(replies(Reply(408, {"error": {"code": "RequestTimeout"}}), OK)) as srv:
        client, _, _ = make_client(srv.base_url)
        assert client.request_json("GET", f"{srv.base_url}/x") == {"ok": True}
    with scripted_server(replies(Reply(505, None), OK)) as srv:
        client, _, _ = make_client(srv.base_url)
        with pytest.raises(PermanentApiError, match="505"):
            client.request_json("GET", f"{srv.base_url}/x")
        assert len(srv.requests) == 1


def test_a_throttled_call_that_must_not_be_sent_twice_is_still_retried() -> None:
    """A 429 is refused before any work: sending it again is safe even for a call that advances a session."""
    with scripted_server(replies(Reply(429, {"error": {"code": "TooManyRequests"}}), OK)) as srv:
        client, _, _ = make_client(srv.base_url)
        assert client.request_json("POST", f"{srv.base_url}/x", resend_if_ambiguous=False) == {"ok": True}
        assert len(srv.requests) == 2


def test_a_200_that_fails_in_disguise_is_retried_or_ambiguous() -> None:
    warned = Reply(200, {"value": [], "@adminapi.warnings": ["The task was canceled."]})

    def failed(body: dict[str, object]) -> str | None:
        return "cancelled" if body.get("@adminapi.warnings") else None

    with scripted_server(replies(warned, OK)) as srv:
        client, _, _ = make_client(srv.base_url)
        assert client.request_json("POST", f"{srv.base_url}/x", failed_if=failed) == {"ok": True}
    with scripted_server(replies(warned, OK)) as srv:
        client, _, _ = make_client(srv.base_url)
        with pytest.raises(AmbiguousResponseError, match="cancelled"):
            client.request_json("POST", f"{srv.base_url}/x", failed_if=failed, resend_if_ambiguous=False)
        assert len(srv.requests) == 1


def test_a_429_is_throttling_whatever_its_body_says() -> None:
    throttled = Reply(429, {"error": {"code": "AccessDenied", "message": "Access denied: too many requests"}})
    with scripted_server(replies(throttled, OK)) as srv:
        client, _, _ = make_client(srv.base_url)
        assert client.request_json("GET", f"{srv.base_url}/x") == {"ok": True}


def test_json_that_is_not_an_object_is_read_again() -> None:
    with scripted_server(replies(Reply(200, [1, 2]), OK)) as srv:
        client, _, _ = make_client(srv.base_url)
        assert client.request_json("GET", f"{srv.base_url}/x") == {"ok": True}
        assert len(srv.requests) == 2
