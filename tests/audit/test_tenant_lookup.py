"""The tenant's GUID from the authority's public OpenID configuration document, against the emulator over HTTPS."""

from __future__ import annotations

import pytest

from shared.audit.tenant_lookup import CACHE_SIZE, TenantDirectory, TenantNotFoundError, guid_of_document
from shared.errors import ConfigError, TransientApiError
from tests.audit.conftest import DOMAIN, TENANT, Emu


def directory(emu: Emu) -> TenantDirectory:
    return TenantDirectory(emu.handle.authority_host, ca_bundle=str(emu.handle.ca_bundle))


def test_a_domain_resolves_to_the_tenant_guid_and_is_asked_once(emu: Emu) -> None:
    found = directory(emu)
    assert found.guid(DOMAIN) == found.guid(DOMAIN.upper()) == TENANT
    assert found.lookups == 1  # cached per process, whatever the letter case
    assert found.guid(TENANT.upper()) == TENANT and found.lookups == 1  # a GUID needs no look-up


def test_an_unknown_domain_is_tenant_not_found_naming_the_aadsts_code(emu: Emu) -> None:
    with pytest.raises(TenantNotFoundError) as raised:
        directory(emu).guid("no-such-tenant.onmicrosoft.com")
    assert (raised.value.field, raised.value.rule) == ("tenantId", "not_found")
    assert "AADSTS90002" in raised.value.message


def test_an_untrusted_authority_certificate_names_the_setting_and_an_unreachable_one_is_transient(emu: Emu) -> None:
    with pytest.raises(ConfigError) as raised:
        TenantDirectory(emu.handle.authority_host).guid(DOMAIN)  # the emulator's CA is not trusted
    assert raised.value.setting == "ca_bundle"
    with pytest.raises(TransientApiError):
        TenantDirectory("https://127.0.0.1:9", timeout=2).guid(DOMAIN)


def test_the_cache_is_bounded(emu: Emu, monkeypatch: pytest.MonkeyPatch) -> None:
    found = directory(emu)
    monkeypatch.setattr(found, "_fetch", lambda domain: TENANT)
    for index in range(CACHE_SIZE + 10):
        found.guid(f"d{index}.example.com")
    assert len(found._cache) == CACHE_SIZE and "d0.example.com" not in found._cache


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (  # the public cloud's v2.0 document
            {
                "token_endpoint": f"https://login.microsoftonline.com/{TENANT}/oauth2/v2.0/token",
                "issuer": f"https://login.microsoftonline.com/{TENANT}/v2.0",
            },
            TENANT,
        ),
        (  # a national cloud: the host is the cloud's, the GUID is read from the path
            {"token_endpoint": f"https://login.chinacloudapi.cn/{TENANT.upper()}/oauth2/v2.0/token"},
            TENANT,
        ),
        ({"token_endpoint": "https://login.microsoftonline.com/common/oauth2/v2.0/token"}, None),
        (  # an issuer naming another tenant than the endpoints: not trusted
            {
                "token_endpoint": f"https://login.microsoftonline.com/{TENANT}/oauth2/v2.0/token",
                "issuer": "https://login.microsoftonline.com/00000000-0000-4000-8000-000000000000/v2.0",
            },
            None,
        ),
        ({"issuer": f"https://login.microsoftonline.com/{TENANT}/v2.0"}, None),
        ("not a document", None),
    ],
)
def test_the_guid_is_the_token_endpoints_first_segment_agreeing_with_the_issuer(
    document: object, expected: str | None
) -> None:
    assert guid_of_document(document) == expected
