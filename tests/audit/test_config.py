"""AuditApiConfig validation: each bad setting raises ConfigError naming it."""

from __future__ import annotations

import pytest

from shared.audit.config import AuditApiConfig
from shared.errors import ConfigError

GUID = "8f0c3a52-1f6e-4f4b-9a51-2d6a7c0b1e11"


def make(**overrides: object) -> AuditApiConfig:
    settings: dict[str, object] = {"tenant_id": GUID, "client_id": "app-id", "client_secret": "hunter2-secret"}
    settings.update(overrides)
    return AuditApiConfig(**settings)  # type: ignore[arg-type]


@pytest.mark.parametrize("tenant", [GUID, "contoso.onmicrosoft.com", "fabrikam.com"])
def test_valid_tenants(tenant: str) -> None:
    assert make(tenant_id=tenant).authority == f"https://login.microsoftonline.com/{tenant}"


@pytest.mark.parametrize(
    ("overrides", "setting"),
    [
        ({"tenant_id": ""}, "tenant_id"),
        ({"tenant_id": "not a tenant"}, "tenant_id"),
        ({"tenant_id": "contoso"}, "tenant_id"),
        ({"tenant_id": "8f0c3a52-1f6e-4f4b-9a51"}, "tenant_id"),
        ({"client_id": " "}, "client_id"),
        ({"client_secret": None}, "client_secret"),
        ({"certificate_thumbprint": "xyz"}, "certificate_thumbprint"),
        ({"authority_host": "http://login.example.com"}, "authority_host"),
        ({"graph_base_url": "ftp://graph.microsoft.com"}, "graph_base_url"),
        ({"graph_base_url": "graph.microsoft.com"}, "graph_base_url"),
        ({"exchange_base_url": "https://outlook.office365.com?x=1"}, "exchange_base_url"),
        ({"graph_api_version": "v2"}, "graph_api_version"),
        ({"http_timeout_seconds": 0}, "http_timeout_seconds"),
        ({"page_size": 0}, "page_size"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_retry_wait_seconds": -1}, "max_retry_wait_seconds"),
        ({"transient_403_attempts": 0}, "transient_403_attempts"),
    ],
)
def test_invalid_setting_is_named(overrides: dict[str, object], setting: str) -> None:
    with pytest.raises(ConfigError) as info:
        make(**overrides)
    assert info.value.setting == setting
    assert setting in str(info.value)


def test_http_allowed_only_for_loopback() -> None:
    assert make(graph_base_url="http://127.0.0.1:8443").graph_root == "http://127.0.0.1:8443/beta"
    assert make(exchange_base_url="http://localhost:1/").exchange_root == "http://localhost:1"
    with pytest.raises(ConfigError):
        make(graph_base_url="http://10.0.0.1:8443")


def test_certificate_alone_is_a_credential_and_secret_never_in_repr() -> None:
    assert make(client_secret=None, certificate_path="/x.pem").certificate_path == "/x.pem"
    assert "hunter2-secret" not in repr(make())


@pytest.mark.parametrize(
    ("credentials", "named"),
    [
        ({"client_secret": "s", "certificate": "c"}, "client_secret, certificate"),
        ({"client_secret": "s", "certificate_path": "/x.p12"}, "client_secret, certificate_path"),
        ({"client_secret": None, "certificate": "c", "certificate_path": "/x.p12"}, "certificate, certificate_path"),
    ],
)
def test_only_one_credential_may_be_set(credentials: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError) as info:
        make(**credentials)
    assert info.value.setting == named
    assert "exactly one" in info.value.rule and "AUDIT_CERTIFICATE" in info.value.rule
    assert "hunter2-secret" not in str(info.value)


def test_no_credential_names_all_three() -> None:
    with pytest.raises(ConfigError) as info:
        make(client_secret=None)
    assert "AUDIT_CLIENT_SECRET" in info.value.rule and "AUDIT_CERTIFICATE_PATH" in info.value.rule
    assert "AUDIT_CERTIFICATE " in info.value.rule or "AUDIT_CERTIFICATE)" in info.value.rule


def test_certificate_content_alone_is_a_credential_and_a_password_needs_a_certificate() -> None:
    config = make(client_secret=None, certificate="MIIK...", certificate_password="pw")
    assert config.credential_setting == "certificate"
    assert make(client_secret=None, certificate_path="/x.p12").credential_setting == "certificate_path"
    assert make().credential_setting == "client_secret"
    with pytest.raises(ConfigError) as info:
        make(certificate_password="pw")
    assert info.value.setting == "certificate_password"


def test_graph_root_uses_version() -> None:
    assert make(graph_api_version="v1.0").graph_root == "https://graph.microsoft.com/v1.0"
