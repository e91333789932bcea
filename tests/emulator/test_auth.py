"""Token flows through the real msal client over HTTPS, and bearer checks on both APIs."""

from __future__ import annotations

import msal
import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from m365_emulator import AppRegistration, Emulator, run_emulator
from tests.emulator.helpers import (
    CLIENT,
    DOMAIN,
    EXCHANGE_SCOPE,
    GRAPH_SCOPE,
    TENANT,
    invoke_url,
    make_config,
    msal_app,
    queries_url,
    session_for,
)
from tests.support.certs import self_signed_pem


def _self_signed() -> tuple[str, str]:
    """(private key PEM, certificate PEM) for an app credential."""
    return self_signed_pem("collector-app")


def test_secret_grant_returns_bearer_token_usable_on_graph(emu: Emulator) -> None:
    result = msal_app(emu).acquire_token_for_client([GRAPH_SCOPE])
    assert result["token_type"] == "Bearer"
    assert result["expires_in"] > 0
    response = requests.get(
        queries_url(emu), headers={"Authorization": f"Bearer {result['access_token']}"}, verify=emu.ca_bundle
    )
    assert response.status_code == 200
    assert emu.stats.tokens_issued == 1


def test_domain_authority_and_instance_discovery_endpoint_work(emu: Emulator) -> None:
    app = msal.ConfidentialClientApplication(
        CLIENT,
        client_credential="emulator-test-secret",
        authority=f"{emu.authority_host}/{DOMAIN}",
        instance_discovery=f"{emu.base_url}/common/discovery/instance",
        verify=emu.ca_bundle,
    )
    result = app.acquire_token_for_client([EXCHANGE_SCOPE])
    assert "access_token" in result, result


@pytest.mark.parametrize("thumbprint", ["sha256", "sha1"])
def test_certificate_client_assertion_is_verified(emu: Emulator, thumbprint: str) -> None:
    key_pem, cert_pem = _self_signed()
    emu.register_app(AppRegistration(TENANT, "cert-app", certificate_pem=cert_pem))
    credential: dict[str, str] = {"private_key": key_pem}
    if thumbprint == "sha256":
        credential["public_certificate"] = cert_pem  # msal then signs PS256 with x5t#S256
    else:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
        credential["thumbprint"] = cert.fingerprint(hashes.SHA1()).hex()  # legacy RS256 with x5t
    result = msal_app(emu, "cert-app", credential).acquire_token_for_client([GRAPH_SCOPE])
    assert "access_token" in result, result


def test_certificate_signed_by_another_key_is_rejected(emu: Emulator) -> None:
    _, registered_cert = _self_signed()
    other_key, other_cert = _self_signed()
    emu.register_app(AppRegistration(TENANT, "cert-app", certificate_pem=registered_cert))
    result = msal_app(
        emu, "cert-app", {"private_key": other_key, "public_certificate": other_cert}
    ).acquire_token_for_client([GRAPH_SCOPE])
    assert result["error"] == "invalid_client"
    assert "AADSTS700027" in result["error_description"]


def test_wrong_secret_is_invalid_client_7000215_without_echoing_it(emu: Emulator) -> None:
    result = msal_app(emu, credential="not-the-secret").acquire_token_for_client([GRAPH_SCOPE])
    assert result["error"] == "invalid_client"
    assert result["error_codes"] == [7000215]
    assert "not-the-secret" not in str(result)


def test_unknown_client_and_bad_scope(emu: Emulator) -> None:
    result = msal_app(emu, client_id="no-such-app").acquire_token_for_client([GRAPH_SCOPE])
    assert result["error"] == "unauthorized_client" and "AADSTS700016" in result["error_description"]
    result = msal_app(emu).acquire_token_for_client(["https://management.azure.com/.default"])
    assert result["error"] == "invalid_scope"


def test_unknown_tenant_is_aadsts90002(emu: Emulator) -> None:
    other = "00000000-0000-4000-8000-000000000000"
    with pytest.raises(ValueError, match="tenant name or GUID"):
        msal_app(emu, tenant=other)  # msal hides the body of the failed OpenID discovery ...
    discovery = requests.get(f"{emu.base_url}/{other}/v2.0/.well-known/openid-configuration", verify=emu.ca_bundle)
    assert discovery.status_code == 400 and "AADSTS90002" in discovery.json()["error_description"]  # ... which says it
    assert discovery.json()["error"] == "invalid_tenant"  # as Entra's discovery endpoint names it
    response = requests.post(
        f"{emu.base_url}/{other}/oauth2/v2.0/token",
        data={"grant_type": "client_credentials", "client_id": CLIENT, "client_secret": "x", "scope": GRAPH_SCOPE},
        verify=emu.ca_bundle,
    )
    assert response.status_code == 400
    assert response.json()["error_codes"] == [90002]


def test_missing_invalid_and_wrong_audience_tokens_are_401(emu: Emulator) -> None:
    kwargs = {"verify": emu.ca_bundle}
    missing = requests.get(queries_url(emu), **kwargs)  # type: ignore[arg-type]
    garbage = requests.get(queries_url(emu), headers={"Authorization": "Bearer a.b.c"}, **kwargs)  # type: ignore[arg-type]
    exo = session_for(emu, EXCHANGE_SCOPE)
    wrong_audience = exo.get(queries_url(emu))
    for response in (missing, garbage, wrong_audience):
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "InvalidAuthenticationToken"
        assert "WWW-Authenticate" in response.headers
    assert "audience" in wrong_audience.json()["error"]["message"]
    graph = session_for(emu, GRAPH_SCOPE)
    assert graph.post(invoke_url(emu), json={}).status_code == 401


def test_expire_tokens_invalidates_issued_tokens_until_a_new_one_is_fetched(emu: Emulator) -> None:
    graph = session_for(emu, GRAPH_SCOPE)
    assert graph.get(queries_url(emu)).status_code == 200
    emu.expire_tokens()
    expired = graph.get(queries_url(emu))
    assert expired.status_code == 401
    assert "expired" in expired.json()["error"]["message"]
    assert session_for(emu, GRAPH_SCOPE).get(queries_url(emu)).status_code == 200


def test_token_lifetime_setting_is_what_the_token_endpoint_reports() -> None:
    config = make_config()
    config.token_lifetime_seconds = 120
    with run_emulator(config) as short_lived:
        short_lived.register_app(AppRegistration(TENANT, CLIENT, client_secret="s"))
        result = msal_app(short_lived, credential="s").acquire_token_for_client([GRAPH_SCOPE])
    assert result["expires_in"] == 120
