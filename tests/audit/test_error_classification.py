"""Error bodies as the audit services send them: the reason is often only in the nested parts of ``error``.

Public Exchange clients read ``error.details[].message`` and ``error.innererror.internalException.message`` because
``error.message`` says little ("Error executing cmdlet"); Graph puts codes in ``innerError``. The classification must
read all of them: a missing role stops the collection with its fix, a wrong anchor mailbox names the tenantId rule,
and a throttling answer with an unusual status is retried.
"""

from __future__ import annotations

from typing import Any

import pytest

from shared.audit.config import AuditApiConfig
from shared.audit.exchange import EXCHANGE_API
from shared.audit.http import AuditHttpClient
from shared.errors import MissingPermissionError, PermanentApiError, RoutingError, TransientApiError
from tests.audit.scripted_server import FakeTokens, Reply, replies, scripted_server

OK = Reply(200, {"ok": True})
ROLE_TEXT = (
    "[AuthZRequestId=0f3c][FailureCategory=AuthZ-CmdletAccessDeniedException] The role assigned to application "
    "6a1b9d2e-0c3f-4e5a-8b7c-9d0e1f2a3b4c isn't supported in this scenario. Please check online documentation for "
    "assigning correct Directory Roles to Azure AD Application for EXO App-Only Authentication."
)


def make_client(base_url: str) -> tuple[AuditHttpClient, list[float]]:
    config = AuditApiConfig(tenant_id="contoso.onmicrosoft.com", client_id="app", client_secret="s", max_attempts=5)
    waits: list[float] = []
    return AuditHttpClient(config, FakeTokens(), EXCHANGE_API, sleep=waits.append), waits


def call(reply: Reply, *more: Reply) -> tuple[Any, list[float], int]:
    with scripted_server(replies(reply, *more)) as srv:
        client, waits = make_client(srv.base_url)
        try:
            result: Any = client.request_json("POST", f"{srv.base_url}/InvokeCommand", json_body={})
        except Exception as exc:
            result = exc
    return result, waits, len(srv.requests)


def cmdlet_error(status: int, details: str | None = None, internal: str | None = None) -> Reply:
    error: dict[str, Any] = {"code": "BadRequest", "message": "Error executing cmdlet"}
    if details is not None:
        error["details"] = [{"code": "Ex6F9304", "target": "", "message": details}]
    if internal is not None:
        error["innererror"] = {
            "message": "Error executing cmdlet",
            "type": "x",
            "internalException": {"message": internal},
        }
    return Reply(status, {"error": error})


def test_a_missing_role_named_only_in_details_dooms_with_the_fix() -> None:
    details = f"Ex6F9304|Microsoft.Exchange.Configuration.Tasks.CmdletAccessDeniedException|{ROLE_TEXT}"
    error, waits, sent = call(cmdlet_error(400, details=details))
    assert isinstance(error, MissingPermissionError) and error.dooms_collection
    assert "View-Only Audit Logs" in str(error) and "isn't supported in this scenario" in str(error)
    assert sent == 1 and waits == []


def test_a_missing_role_named_only_in_the_internal_exception_dooms_with_the_fix() -> None:
    error, _, sent = call(cmdlet_error(403, internal=ROLE_TEXT))
    assert isinstance(error, MissingPermissionError), error
    assert sent == 1  # not mistaken for a transient 403


def test_a_cmdlet_the_role_does_not_grant_is_a_missing_role() -> None:
    text = "The term 'Search-UnifiedAuditLog' is not recognized as the name of a cmdlet, function, script file."
    error, _, _ = call(cmdlet_error(400, details=f"Ex0|System.Management.Automation.CommandNotFoundException|{text}"))
    assert isinstance(error, MissingPermissionError), error


def test_a_graph_code_in_inner_error_is_read() -> None:
    body = {
        "error": {
            "code": "Forbidden",
            "message": "Access is denied.",
            "innerError": {"code": "Authorization_RequestDenied"},
        }
    }
    error, _, sent = call(Reply(403, body))
    assert isinstance(error, MissingPermissionError), error
    assert sent == 1


def test_a_role_problem_behind_a_401_is_a_permission_not_a_credential_problem() -> None:
    body = {"error": {"code": "UnAuthorized", "message": ROLE_TEXT}}
    error, _, sent = call(Reply(401, body))
    assert isinstance(error, MissingPermissionError), error
    assert sent == 2  # a fresh token was tried once, as for any 401


def test_tenant_throttling_with_a_400_is_retried() -> None:
    busy = cmdlet_error(
        400,
        details="You have reached the maximum number of concurrent requests per tenant. Please wait and try again.",
    )
    result, waits, sent = call(busy, OK)
    assert result == {"ok": True}
    assert sent == 2 and len(waits) == 1


def test_a_transient_failure_named_in_the_internal_exception_is_retried() -> None:
    result, _, sent = call(cmdlet_error(400, internal="This issue may be transient. Please retry."), OK)
    assert result == {"ok": True} and sent == 2


def test_a_wrong_anchor_mailbox_is_a_routing_error_that_names_the_tenant_rule() -> None:
    body = {
        "error": {
            "code": "ErrorIncorrectRoutingHint",
            "message": "The x-anchor mailbox 'SystemMailbox{bb558c35-97f1-4cb9-8ff7-d53741dc928c}' does not match the "
            "target of the request.",
        }
    }
    error, waits, sent = call(Reply(400, body))
    assert isinstance(error, RoutingError) and error.dooms_collection
    assert "onmicrosoft.com" in str(error) and "tenantId" in str(error)
    assert sent == 1 and waits == []


def test_an_unrelated_400_stays_a_plain_permanent_error() -> None:
    error, _, _ = call(cmdlet_error(400, details="Ex1|X.ParameterBindingException|Cannot bind parameter 'StartDate'."))
    assert type(error) is PermanentApiError
    assert "Cannot bind parameter" in str(error)  # the inner reason reaches the failure message


def test_transient_403_without_a_marker_is_still_transient() -> None:
    body = {"error": {"code": "Forbidden", "message": "The request is temporarily forbidden. Retry the request."}}
    result, _, sent = call(Reply(403, body), OK)
    assert result == {"ok": True} and sent == 2


@pytest.mark.parametrize("status", [404, 410])
def test_web_api_style_bodies_are_read(status: int) -> None:
    body = {"Message": "No HTTP resource was found that matches the request URI 'x'.", "MessageDetail": "none"}
    error, _, _ = call(Reply(status, body))
    assert isinstance(error, PermanentApiError) and not isinstance(error, TransientApiError)
    assert "No HTTP resource was found" in str(error)


TRANSIENT_CODES = (
    "CmdletProxyNotAvailableFailure",
    "ServerBusyException",
    "TransientException",
    "BackendCommunicationException",
)


@pytest.mark.parametrize("code", TRANSIENT_CODES)
@pytest.mark.parametrize("where", ["code", "details", "internal"])
def test_a_400_naming_a_transient_exchange_exception_is_retried(code: str, where: str) -> None:
    """jflieben/M365Permissions retries InvokeCommand 400s naming these; the name may sit in any part of the body."""
    if where == "code":
        reply = Reply(400, {"error": {"code": code, "message": "Error executing cmdlet"}})
    elif where == "details":
        reply = cmdlet_error(400, details=f"Ex0|Microsoft.Exchange.Data.{code}|The operation could not be completed.")
    else:
        reply = cmdlet_error(400, internal=f"Microsoft.Exchange.{code}: the backend did not answer in time")
    result, waits, sent = call(reply, OK)
    assert result == {"ok": True}, result
    assert sent == 2 and len(waits) == 1


@pytest.mark.parametrize(
    "text",
    [
        "You have reached the Maximum Number Of Concurrent Requests per tenant. Please wait and try again.",
        "YOU HAVE REACHED THE MAXIMUM NUMBER OF CONCURRENT REQUESTS PER TENANT.",
        "microsoft.exchange.serverbusyexception: try again later",
    ],
)
def test_markers_are_recognised_in_any_letter_case(text: str) -> None:
    """Issue 18.9: a throttle spelled in another case must stay a throttle (retried), never a permanent failure."""
    result, _, sent = call(cmdlet_error(400, details=text), OK)
    assert result == {"ok": True}, result
    assert sent == 2


@pytest.mark.parametrize(
    "text", ["The x-anchor mailbox 'x' DOES NOT MATCH THE TARGET OF THE REQUEST.", "CMDLETACCESSDENIED"]
)
def test_routing_and_permission_markers_are_recognised_in_any_letter_case(text: str) -> None:
    error, _, sent = call(cmdlet_error(400, details=text))
    assert isinstance(error, RoutingError | MissingPermissionError), error
    assert sent == 1
