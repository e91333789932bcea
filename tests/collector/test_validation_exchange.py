"""Request rules that only the Exchange source has: the tenant must be its GUID or its initial domain (the anchor
mailbox of an app-only InvokeCommand call names it), and ``highCompleteness`` is an Exchange search option."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from shared.requests.validation import InvalidRequest
from shared.settings import Settings
from shared.sources.registry import validate_collection_request

NOW = datetime(2024, 11, 18, 12, 0, tzinfo=UTC)


def body(**overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "tenantId": "contoso.onmicrosoft.com",
        "startDate": "2024-11-17T10:00:00Z",
        "endDate": "2024-11-18T10:00:00Z",
        "intervalMinutes": 240,
        "source": "exchange",
    }
    request.update(overrides)
    return request


@pytest.mark.parametrize(
    "tenant", ["contoso.com", "mail.contoso.onmicrosoft.com.evil.net", "sub.contoso.onmicrosoft.com"]
)
def test_exchange_needs_the_tenant_guid_or_initial_domain(tenant: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        validate_collection_request(body(tenantId=tenant), Settings(), NOW)
    assert (info.value.field, info.value.rule) == ("tenantId", "initial_domain")
    assert "onmicrosoft.com" in info.value.message and "X-AnchorMailbox" in info.value.message
    assert "GUID" in info.value.message


@pytest.mark.parametrize(
    "tenant",
    [
        "contoso.onmicrosoft.com",
        "Fabrikam.OnMicrosoft.com",
        "agency.onmicrosoft.us",
        "72f988bf-86f1-41af-91ab-2d7cd011db47",
        "72F988BF-86F1-41AF-91AB-2D7CD011DB47",
    ],
)
def test_exchange_accepts_a_tenant_guid_or_an_initial_domain(tenant: str) -> None:
    """Public app-only clients anchor by the tenant GUID too (CIPP since 2025-02, ExoHelper): no 400 for it."""
    request = validate_collection_request(body(tenantId=tenant), Settings(), NOW)
    assert request.tenant_id == tenant.lower()


def test_graph_still_accepts_a_guid_or_any_domain() -> None:
    for tenant in ("72f988bf-86f1-41af-91ab-2d7cd011db47", "contoso.com"):
        assert validate_collection_request(body(tenantId=tenant, source="graph"), Settings(), NOW).source == "graph"


def test_high_completeness_is_an_exchange_option() -> None:
    assert validate_collection_request(body(highCompleteness=True), Settings(), NOW).high_completeness is True
    assert validate_collection_request(body(), Settings(), NOW).high_completeness is False
    with pytest.raises(InvalidRequest) as info:
        validate_collection_request(body(highCompleteness=True, source="graph"), Settings(), NOW)
    assert (info.value.field, info.value.rule) == ("highCompleteness", "exchange_only")
    with pytest.raises(InvalidRequest) as info:
        validate_collection_request(body(highCompleteness="yes"), Settings(), NOW)
    assert (info.value.field, info.value.rule) == ("highCompleteness", "type")


def test_high_completeness_round_trips_through_the_request_json() -> None:
    from shared.requests.validation import CollectionRequest

    request = validate_collection_request(body(highCompleteness=True), Settings(), NOW)
    assert CollectionRequest.from_json(request.to_json()).high_completeness is True
