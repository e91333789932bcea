"""A tenant whose unified auditing is off: Graph refuses every audit query alike, so one answer dooms the collection.

The shape is what public clients recognise (CIPP-API ``New-CippAuditLogSearch.ps1``): a 400 ``UnknownError`` whose
``error.message`` is a JSON string carrying ``"Status":"AuditingDisabledTenant"``, or that status at the top level.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.audit.config import AuditApiConfig
from shared.audit.graph import GRAPH_API
from shared.audit.http import AuditHttpClient
from shared.errors import AUDITING_FIX, AuditingDisabledError, PermanentApiError, TransientApiError
from shared.fixes import with_fix
from tests.audit.scripted_server import FakeTokens, Reply, replies, scripted_server

STATUS = {"TenantId": "8d1c6e6c-0b7a-4c55-9d8e-2f1f4a9c3b10", "Status": "AuditingDisabledTenant"}


def call(reply: Reply) -> tuple[Any, int]:
    with scripted_server(replies(reply)) as srv:
        config = AuditApiConfig(tenant_id="contoso.onmicrosoft.com", client_id="app", client_secret="s")
        client = AuditHttpClient(config, FakeTokens(), GRAPH_API, sleep=lambda _: None)
        try:
            result: Any = client.request_json("POST", f"{srv.base_url}/queries", json_body={})
        except Exception as exc:
            result = exc
    return result, len(srv.requests)


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"code": "UnknownError", "message": json.dumps(STATUS)}},
        STATUS,  # the status object at the top level
        {"error": {"code": "BadRequest", "message": "Status: AuditingDisabledTenant"}},
    ],
)
def test_auditing_turned_off_dooms_at_the_first_answer(body: dict[str, Any]) -> None:
    error, sent = call(Reply(400, body))
    assert isinstance(error, AuditingDisabledError), error
    assert error.dooms_collection and error.kind == "auditing_disabled" and sent == 1
    assert "unified auditing is turned off" in str(error)
    assert with_fix({"kind": error.kind})["fix"].startswith(AUDITING_FIX)
    assert "Set-AdminAuditLogConfig -UnifiedAuditLogIngestionEnabled $true" in AUDITING_FIX
    assert "Start recording user and admin activity" in AUDITING_FIX


def test_another_unknown_error_is_not_taken_for_auditing_off_and_is_retried() -> None:
    """Issue 25: any other 400 UnknownError is what CIPP-API retries: transient, sent again (before: permanent)."""
    error, sent = call(Reply(400, {"error": {"code": "UnknownError", "message": ""}}))
    assert isinstance(error, TransientApiError) and not isinstance(error, AuditingDisabledError | PermanentApiError)
    assert sent == 6 and error.status == 400  # every attempt, then the chunk's own retry decides


def test_an_unknown_error_then_success_is_a_success() -> None:
    with scripted_server(
        replies(Reply(400, {"error": {"code": "UnknownError", "message": "x"}}), Reply(201, {"id": "q"}))
    ) as srv:
        config = AuditApiConfig(tenant_id="contoso.onmicrosoft.com", client_id="app", client_secret="s")
        client = AuditHttpClient(config, FakeTokens(), GRAPH_API, sleep=lambda _: None)
        assert client.request_json("POST", f"{srv.base_url}/queries", json_body={}) == {"id": "q"}
    assert len(srv.requests) == 2
