"""Sign-in and permission failures against the emulator: errors name the setting or permission, never the secret."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from shared.audit import build_query_api, build_search_api
from shared.audit.exchange import ExchangeAuditClient
from shared.audit.graph import GraphAuditClient
from shared.audit.ports import AuditFilters, QueryState
from shared.errors import AuthenticationError, MissingPermissionError
from tests.audit.conftest import FAST, TENANT, Emu, register, wait_for_query, window
from tests.support.certs import b64, cert_pem, pfx, self_signed, self_signed_pem

WIN = window(0.5, offset_hours=4.0)


def test_bad_secret_names_the_setting_without_the_secret(emu: Emu, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "Wrong~Secret-Value-987"
    client = GraphAuditClient(emu.config(client_secret=wrong), retry_wait_scale=FAST)
    with pytest.raises(AuthenticationError) as info:
        client.create_query(WIN, AuditFilters(), display_name="bad secret")
    assert "client_secret" in str(info.value) and "AADSTS7000215" in str(info.value)
    assert wrong not in str(info.value) and wrong not in caplog.text
    assert info.value.dooms_collection


def test_unknown_client_id_names_client_id(emu: Emu) -> None:
    client = build_search_api(emu.exchange_config(client_id="00000000-0000-0000-0000-00000000beef"))
    with pytest.raises(AuthenticationError, match="client_id"):
        client.probe(WIN)


def test_unknown_tenant_names_tenant_id(emu: Emu) -> None:
    client = build_query_api(emu.config(tenant_id="11111111-2222-3333-4444-555555555555"))
    with pytest.raises(AuthenticationError, match="tenant_id"):
        client.create_query(WIN, AuditFilters(), display_name="no tenant")


def test_missing_graph_permission_is_named(emu: Emu) -> None:
    client_id = "7b2c0e3f-1d4a-4f6b-9c8d-0e1f2a3b4c5d"
    register(emu.handle, client_id=client_id, graph_permissions=())
    client = GraphAuditClient(emu.config(client_id=client_id), retry_wait_scale=FAST)
    with pytest.raises(MissingPermissionError) as info:
        client.create_query(WIN, AuditFilters(), display_name="no permission")
    assert info.value.permission == "AuditLogsQuery.Read.All"
    assert "AuditLogsQuery.Read.All" in str(info.value)


def test_missing_exchange_role_is_named(emu: Emu) -> None:
    client_id = "8c3d1f4a-2e5b-4a7c-8d9e-1f2a3b4c5d6e"
    register(emu.handle, client_id=client_id, exchange_role=False)
    client = ExchangeAuditClient(emu.exchange_config(client_id=client_id), retry_wait_scale=FAST)
    with pytest.raises(MissingPermissionError) as info:
        client.probe(WIN)
    assert "Exchange.ManageAsApp" in str(info.value) and "View-Only Audit Logs" in str(info.value)


def test_transient_403_is_retried(emu: Emu) -> None:
    emu.handle.faults.transient_403_count = 2
    client = ExchangeAuditClient(emu.exchange_config(transient_403_attempts=3), retry_wait_scale=FAST)
    assert client.probe(WIN).rows == len(emu.handle.ground_truth_ids(TENANT, WIN.start, WIN.end))
    assert sum(emu.handle.stats.transient_403.values()) >= 2


def _certificate(path: Path) -> bytes:
    key_pem, cert_pem = self_signed_pem("ual-collector-test")
    path.write_text(key_pem + cert_pem)
    return cert_pem.encode()


def test_certificate_credential_signs_in(emu: Emu, tmp_path: Path) -> None:
    client_id = "9d4e2a5b-3f6c-4b8d-9e0f-2a3b4c5d6e7f"
    pem_path = tmp_path / "app.pem"
    register(emu.handle, client_id=client_id, client_secret=None, certificate_pem=_certificate(pem_path))
    config = emu.config(client_id=client_id, client_secret=None, certificate_path=str(pem_path))
    client = GraphAuditClient(config, retry_wait_scale=FAST)
    query_id = client.create_query(WIN, AuditFilters(), display_name="cert")
    assert wait_for_query(client, query_id).state is QueryState.SUCCEEDED
    client.delete_query(query_id)


def test_certificate_from_a_key_vault_reference_signs_in(emu: Emu) -> None:
    """AUDIT_CERTIFICATE holds what a Key Vault reference to a certificate resolves to: base64 PKCS#12, no password."""
    client_id = "0e5f3b6c-4a7d-4c9e-8f1a-3b4c5d6e7f80"
    key, cert = self_signed("ual-collector-kv")
    register(emu.handle, client_id=client_id, client_secret=None, certificate_pem=cert_pem(cert))
    config = emu.config(client_id=client_id, client_secret=None, certificate=b64(pfx(key, cert)))
    client = GraphAuditClient(config, retry_wait_scale=FAST)
    query_id = client.create_query(WIN, AuditFilters(), display_name="cert from key vault")
    assert wait_for_query(client, query_id).state is QueryState.SUCCEEDED
    client.delete_query(query_id)


def test_password_protected_pkcs12_file_signs_in(emu: Emu, tmp_path: Path) -> None:
    """AUDIT_CERTIFICATE_PATH at a PKCS#12 file, as App Service loads one to /var/ssl/private/<thumbprint>.p12."""
    client_id = "1f6a4c7d-5b8e-4daf-9a2b-4c5d6e7f8091"
    key, cert = self_signed("ual-collector-p12")
    path = tmp_path / "ABCDEF.p12"
    path.write_bytes(pfx(key, cert, b"p12-password"))
    register(emu.handle, client_id=client_id, client_secret=None, certificate_pem=cert_pem(cert))
    config = emu.exchange_config(
        client_id=client_id, client_secret=None, certificate_path=str(path), certificate_password="p12-password"
    )
    expected = len(emu.handle.ground_truth_ids(TENANT, WIN.start, WIN.end))
    probe = build_search_api(config).probe(WIN)  # type: ignore[attr-defined]
    assert probe.short and probe.rows == expected


def test_a_certificate_the_app_does_not_know_names_the_certificate_setting(emu: Emu) -> None:
    key, cert = self_signed("not-registered")
    client_id = "9d4e2a5b-3f6c-4b8d-9e0f-2a3b4c5d6e7f"  # registered with another certificate in the test above
    register(emu.handle, client_id=client_id, client_secret=None, certificate_pem=cert_pem(self_signed()[1]))
    config = emu.config(client_id=client_id, client_secret=None, certificate=b64(pfx(key, cert)))
    with pytest.raises(AuthenticationError) as info:
        GraphAuditClient(config, retry_wait_scale=FAST).create_query(WIN, AuditFilters(), display_name="wrong cert")
    assert "AADSTS700027" in str(info.value) and "certificate (AUDIT_CERTIFICATE)" in str(info.value)


def test_untrusted_tls_is_a_config_error_naming_ca_bundle(emu: Emu) -> None:
    from shared.errors import ConfigError

    client = GraphAuditClient(emu.config(ca_bundle=None), retry_wait_scale=FAST)
    with pytest.raises(ConfigError) as info:
        client.create_query(WIN, AuditFilters(), display_name="tls")
    assert info.value.setting == "ca_bundle"
