"""The certificate credential in every form Azure hands one to an app: PEM text or base64 PKCS#12 in
``AUDIT_CERTIFICATE`` (what a Key Vault reference to a certificate fills in), or a PEM / PKCS#12 file at
``AUDIT_CERTIFICATE_PATH`` (``/var/ssl/private/<thumbprint>.p12`` with ``WEBSITE_LOAD_CERTIFICATES``).

Each failure is a ConfigError naming the setting to fix, and no message carries the certificate's content."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from shared.audit.auth import _credential_key
from shared.audit.certificate import load_certificate
from shared.audit.config import AuditApiConfig
from shared.errors import ConfigError
from tests.support.certs import b64, cert_pem, key_pem, pfx, self_signed, sha1_thumbprint

GUID = "8f0c3a52-1f6e-4f4b-9a51-2d6a7c0b1e11"
KEY, CERT = self_signed("loader-test")
OTHER_KEY, OTHER_CERT = self_signed("other")
PASSWORD = "pfx-Pass~word 1"


def config(**overrides: Any) -> AuditApiConfig:
    settings: dict[str, Any] = {"tenant_id": GUID, "client_id": "app-id"}
    settings.update(overrides)
    return AuditApiConfig(**settings)


def assert_is_key_and_thumbprint(credential: dict[str, str]) -> None:
    loaded = serialization.load_pem_private_key(credential["private_key"].encode(), password=None)
    assert loaded.private_numbers() == KEY.private_numbers()  # type: ignore[union-attr]
    assert credential["thumbprint"] == sha1_thumbprint(CERT)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b64(pfx(KEY, CERT)), id="base64 PKCS#12 without password (a Key Vault certificate's secret)"),
        pytest.param(key_pem(KEY) + cert_pem(CERT), id="PEM text, key first"),
        pytest.param(cert_pem(CERT) + key_pem(KEY), id="PEM text, certificate first"),
        pytest.param(cert_pem(OTHER_CERT) + cert_pem(CERT) + key_pem(KEY), id="PEM with another certificate first"),
        pytest.param("\n" + b64(pfx(KEY, CERT)) + "\n", id="base64 with surrounding whitespace"),
    ],
)
def test_certificate_content_gives_msal_the_key_and_the_thumbprint(content: str) -> None:
    assert_is_key_and_thumbprint(load_certificate(config(certificate=content)))


def test_base64_is_accepted_wrapped_over_lines() -> None:
    text = b64(pfx(KEY, CERT))
    wrapped = "\n".join(text[i : i + 64] for i in range(0, len(text), 64))
    assert_is_key_and_thumbprint(load_certificate(config(certificate=wrapped)))


def test_password_protected_pkcs12_and_pem_open_with_the_password() -> None:
    protected = b64(pfx(KEY, CERT, PASSWORD.encode()))
    assert_is_key_and_thumbprint(load_certificate(config(certificate=protected, certificate_password=PASSWORD)))
    pem = key_pem(KEY, PASSWORD.encode()) + cert_pem(CERT)
    assert_is_key_and_thumbprint(load_certificate(config(certificate=pem, certificate_password=PASSWORD)))


@pytest.mark.parametrize("name", ["app.p12", "app.pfx", "app.pem", "no-extension"])
def test_a_file_is_read_by_its_content_not_its_name(tmp_path: Path, name: str) -> None:
    pkcs12_file, pem_file = tmp_path / "pkcs12" / name, tmp_path / "pem" / name
    pkcs12_file.parent.mkdir()
    pem_file.parent.mkdir()
    pkcs12_file.write_bytes(pfx(KEY, CERT))
    pem_file.write_text(key_pem(KEY) + cert_pem(CERT))
    assert_is_key_and_thumbprint(load_certificate(config(certificate_path=str(pkcs12_file))))
    assert_is_key_and_thumbprint(load_certificate(config(certificate_path=str(pem_file))))


def test_a_password_protected_file(tmp_path: Path) -> None:
    path = tmp_path / "app.pfx"
    path.write_bytes(pfx(KEY, CERT, PASSWORD.encode()))
    credential = load_certificate(config(certificate_path=str(path), certificate_password=PASSWORD))
    assert_is_key_and_thumbprint(credential)


def test_a_configured_thumbprint_is_used_as_given() -> None:
    given = "ab" * 20
    credential = load_certificate(config(certificate=b64(pfx(KEY, CERT)), certificate_thumbprint=given))
    assert credential["thumbprint"] == given


PFX_PROTECTED = b64(pfx(KEY, CERT, PASSWORD.encode()))
PFX_PLAIN = b64(pfx(KEY, CERT))


@pytest.mark.parametrize(
    ("overrides", "setting", "rule"),
    [
        pytest.param({"certificate": "not base64 at all!"}, "certificate", "base64", id="unreadable base64"),
        pytest.param({"certificate": b64(b"plain bytes, no PKCS#12")}, "certificate", "PKCS#12", id="not PKCS#12"),
        pytest.param({"certificate": PFX_PROTECTED}, "certificate_password", "password", id="password missing"),
        pytest.param(
            {"certificate": PFX_PROTECTED, "certificate_password": "Not-the-Pa55word"},
            "certificate_password",
            "password",
            id="wrong PKCS#12 password",
        ),
        pytest.param(
            {"certificate": PFX_PLAIN, "certificate_password": PASSWORD},
            "certificate_password",
            "not password-protected",
            id="password for an unprotected PKCS#12",
        ),
        pytest.param(
            {"certificate": key_pem(KEY, PASSWORD.encode()) + cert_pem(CERT)},
            "certificate_password",
            "encrypted",
            id="PEM key encrypted, no password",
        ),
        pytest.param(
            {
                "certificate": key_pem(KEY, PASSWORD.encode()) + cert_pem(CERT),
                "certificate_password": "Not-the-Pa55word",
            },
            "certificate_password",
            "password",
            id="wrong PEM password",
        ),
        pytest.param(
            {"certificate": key_pem(KEY) + cert_pem(CERT), "certificate_password": PASSWORD},
            "certificate_password",
            "not encrypted",
            id="password for an unencrypted PEM key",
        ),
        pytest.param({"certificate": b64(pfx(None, CERT))}, "certificate", "no private key", id="PKCS#12 no key"),
        pytest.param({"certificate": b64(pfx(KEY, None))}, "certificate", "no certificate", id="PKCS#12 no cert"),
        pytest.param({"certificate": cert_pem(CERT)}, "certificate", "no private key", id="PEM without key"),
        pytest.param({"certificate": key_pem(KEY)}, "certificate", "no certificate", id="PEM without certificate"),
        pytest.param(
            {"certificate": key_pem(KEY) + cert_pem(OTHER_CERT)},
            "certificate",
            "no certificate for its private key",
            id="PEM key and someone else's certificate",
        ),
        pytest.param(
            {"certificate": "@Microsoft.KeyVault(SecretUri=https://v.vault.azure.net/secrets/app-cert/)"},
            "certificate",
            "Key Vault reference",
            id="unresolved Key Vault reference",
        ),
        pytest.param({"certificate_path": "/no/such/app.p12"}, "certificate_path", "cannot read", id="no file"),
    ],
)
def test_a_bad_certificate_names_the_setting_and_never_echoes_the_content(
    overrides: dict[str, str], setting: str, rule: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_certificate(config(**overrides))
    assert info.value.setting == setting
    assert rule in info.value.rule
    message = str(info.value)
    for value in overrides.values():
        if "KeyVault" not in value and not value.startswith("/"):
            assert value[:40] not in message and value.strip()[-40:] not in message
    assert PASSWORD not in message and "PRIVATE KEY" not in message


def test_a_file_that_is_neither_pem_nor_pkcs12_names_the_path_setting(tmp_path: Path) -> None:
    path = tmp_path / "app.p12"
    path.write_bytes(b"\x00\x01 not a certificate")
    with pytest.raises(ConfigError) as info:
        load_certificate(config(certificate_path=str(path)))
    assert info.value.setting == "certificate_path" and "PKCS#12" in info.value.rule


def test_the_cached_credential_changes_with_the_certificate_content_and_never_holds_it(tmp_path: Path) -> None:
    first, second = b64(pfx(KEY, CERT)), b64(pfx(OTHER_KEY, OTHER_CERT))
    key_first = _credential_key(config(certificate=first))
    assert key_first == _credential_key(config(certificate=first))
    assert key_first != _credential_key(config(certificate=second))
    assert first[:16] not in key_first
    assert _credential_key(config(certificate=PFX_PROTECTED, certificate_password=PASSWORD)) != _credential_key(
        config(certificate=PFX_PROTECTED, certificate_password=PASSWORD + "x")
    )
    # A file rotated in place (same path, new content) builds a new msal app too.
    path = tmp_path / "app.pem"
    path.write_text(key_pem(KEY) + cert_pem(CERT))
    before = _credential_key(config(certificate_path=str(path)))
    path.write_text(key_pem(OTHER_KEY) + cert_pem(OTHER_CERT))
    assert _credential_key(config(certificate_path=str(path))) != before


def test_certificate_content_and_password_stay_out_of_repr() -> None:
    shown = repr(config(certificate=PFX_PROTECTED, certificate_password=PASSWORD))
    assert PFX_PROTECTED[:40] not in shown and PASSWORD not in shown
