"""Issue 25, national clouds: token scopes follow the configured endpoints, and a Graph collection outside the global
cloud is refused with a 400 naming the source (the Graph auditLogQuery API exists only in the global cloud).

Sources: cisagov/ScubaGear ``EXORestHelper.psm1`` (GCC High ``https://outlook.office365.us/.default``, DoD
``https://outlook-dod.office365.us/.default``); the Graph ``list``/``create`` auditLogQuery docs (US Government L4/L5
and China unavailable).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from shared.audit.config import AuditApiConfig
from shared.audit.exchange import ExchangeAuditClient
from shared.audit.graph import GraphAuditClient
from shared.requests.validation import InvalidRequest
from shared.settings import Settings
from shared.sources.registry import validate_collection_request
from tests.audit.scripted_server import FakeTokens, Reply, replies, scripted_server

CLOUDS = {
    "global": ("https://login.microsoftonline.com", "https://graph.microsoft.com", "https://outlook.office365.com"),
    "usgovhigh": ("https://login.microsoftonline.us", "https://graph.microsoft.us", "https://outlook.office365.us"),
    "usgovdod": (
        "https://login.microsoftonline.us",
        "https://dod-graph.microsoft.us",
        "https://outlook-dod.office365.us",
    ),
    "china": (
        "https://login.chinacloudapi.cn",
        "https://microsoftgraph.chinacloudapi.cn",
        "https://partner.outlook.cn",
    ),
}


def config(cloud: str, **overrides: Any) -> AuditApiConfig:
    authority, graph, exchange = CLOUDS[cloud]
    settings: dict[str, Any] = {
        "tenant_id": "contoso.onmicrosoft.us" if cloud.startswith("usgov") else "contoso.onmicrosoft.com",
        "client_id": "app",
        "client_secret": "s",
        "authority_host": authority,
        "graph_base_url": graph,
        "exchange_base_url": exchange,
    }
    settings.update(overrides)
    return AuditApiConfig(**settings)


@pytest.mark.parametrize(
    ("cloud", "exchange_scope", "graph_scope"),
    [
        ("global", "https://outlook.office365.com/.default", "https://graph.microsoft.com/.default"),
        ("usgovhigh", "https://outlook.office365.us/.default", "https://graph.microsoft.us/.default"),
        ("usgovdod", "https://outlook-dod.office365.us/.default", "https://dod-graph.microsoft.us/.default"),
        ("china", "https://partner.outlook.cn/.default", "https://microsoftgraph.chinacloudapi.cn/.default"),
    ],
)
def test_token_scopes_follow_the_configured_endpoints(cloud: str, exchange_scope: str, graph_scope: str) -> None:
    """Before: every cloud asked for the global audiences (outlook.office365.com, graph.microsoft.com)."""
    settings = config(cloud)
    assert (settings.cloud, settings.exchange_scope, settings.graph_scope) == (cloud, exchange_scope, graph_scope)


class ScopeTokens(FakeTokens):
    def __init__(self) -> None:
        super().__init__()
        self.scopes: list[str] = []

    def get_token(self, scope: str) -> str:
        self.scopes.append(scope)
        return super().get_token(scope)


def test_the_adapters_ask_for_the_configured_clouds_audience_and_the_emulator_gets_the_global_one() -> None:
    assert GraphAuditClient(config("usgovhigh"))._http._api.scope == "https://graph.microsoft.us/.default"
    assert ExchangeAuditClient(config("usgovdod"))._http._api.scope == "https://outlook-dod.office365.us/.default"
    tokens = ScopeTokens()
    with scripted_server(replies(Reply(200, {"id": "q", "status": "running"}))) as srv:
        # A host that is no cloud's (the local emulator): the global audience, which the emulator answers to.
        local = config("usgovhigh", graph_base_url=srv.base_url, exchange_base_url=srv.base_url)
        GraphAuditClient(local, tokens=tokens, sleep=lambda _: None).get_query("q")
    assert tokens.scopes == ["https://graph.microsoft.com/.default"]


def _settings(cloud: str) -> Settings:
    authority, graph, exchange = CLOUDS[cloud]
    env = {
        "AUDIT_CLIENT_ID": "app",
        "AUDIT_CLIENT_SECRET": "s",
        "AUDIT_AUTHORITY_HOST": authority,
        "AUDIT_GRAPH_BASE_URL": graph,
        "AUDIT_EXCHANGE_BASE_URL": exchange,
    }
    return Settings.from_env(env)


NOW = datetime(2026, 12, 4, tzinfo=UTC)
REQUEST = {"tenantId": "contoso.onmicrosoft.us", "startDate": "2026-12-01", "endDate": "2026-12-02"}


@pytest.mark.parametrize("cloud", ["usgovhigh", "usgovdod", "china"])
def test_a_graph_collection_outside_the_global_cloud_is_a_400_naming_the_source(cloud: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        validate_collection_request({**REQUEST, "source": "graph"}, _settings(cloud), NOW)
    assert (info.value.field, info.value.rule) == ("source", "national_cloud")
    assert "use source exchange" in info.value.message and "global cloud" in info.value.message
    exchange = validate_collection_request({**REQUEST, "source": "exchange"}, _settings(cloud), NOW)
    assert exchange.source == "exchange"


def test_a_graph_collection_in_the_global_cloud_is_accepted() -> None:
    accepted = validate_collection_request({**REQUEST, "source": "graph"}, _settings("global"), NOW)
    assert accepted.source == "graph"
