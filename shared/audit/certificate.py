"""The app's certificate credential, read from the forms Azure hands a certificate to a function app.

* ``certificate`` (``AUDIT_CERTIFICATE``): the certificate's content. A Key Vault reference to a Key Vault
  certificate resolves to the certificate's secret: base64 of a PKCS#12 (PFX) blob without a password, or PEM text
  when the certificate was created with the PEM content type.
* ``certificate_path`` (``AUDIT_CERTIFICATE_PATH``): a file, PEM or PKCS#12 (App Service with
  ``WEBSITE_LOAD_CERTIFICATES`` writes private certificates as ``/var/ssl/private/<thumbprint>.p12``).

The format is told by content, never by a file name: PEM starts with ``-----BEGIN``, anything else must be PKCS#12.
``certificate_password`` opens a password-protected PKCS#12 or an encrypted PEM key. Every failure is a
:class:`ConfigError` naming the setting to fix; no message carries the content or the password.
(docs/real-services.md, "Certificate credentials", has the sources.)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from shared.audit.config import AuditApiConfig
from shared.errors import ConfigError

_PEM_START = b"-----BEGIN"
_KEY_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY)-----.+?-----END \1-----", re.DOTALL)
_CERT_BLOCK = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)
_KEY_VAULT_REFERENCE = "@Microsoft.KeyVault("
_PASSWORD = "certificate_password"  # noqa: S105 - the name of the setting, not a password


def certificate_bytes(config: AuditApiConfig) -> tuple[str, bytes]:
    """(the setting the certificate came from, its raw bytes: PEM text or PKCS#12 DER)."""
    if config.certificate:
        return "certificate", _decode_content(config.certificate)
    path = config.certificate_path or ""
    try:
        with open(path, "rb") as handle:
            return "certificate_path", handle.read()
    except OSError as exc:
        raise ConfigError("certificate_path", f"cannot read the certificate file ({exc.strerror})") from None


def content_digest(config: AuditApiConfig) -> str:
    """SHA-256 of the certificate's bytes (a changed certificate, a new digest); "" when there is none to read."""
    if not (config.certificate or config.certificate_path):
        return ""
    try:
        return hashlib.sha256(certificate_bytes(config)[1]).hexdigest()
    except ConfigError:
        return "unreadable"  # loading it reports why


def load_certificate(config: AuditApiConfig) -> dict[str, str]:
    """msal's certificate credential: the private key (PKCS#8 PEM) and the certificate's SHA-1 thumbprint."""
    setting, data = certificate_bytes(config)
    password = config.certificate_password.encode("utf-8") if config.certificate_password else None
    if data.lstrip().startswith(_PEM_START):
        key, certificates = _from_pem(data, password, setting)
    else:
        key, certificates = _from_pkcs12(data, password, setting)
    if key is None:
        raise ConfigError(setting, "holds no private key (a Key Vault certificate must have an exportable key)")
    if not certificates:
        raise ConfigError(setting, "holds no certificate, only a private key")
    cert = _certificate_of(key, certificates, setting)
    thumbprint = config.certificate_thumbprint or cert.fingerprint(hashes.SHA1()).hex()  # noqa: S303 - the x5t
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")
    return {"private_key": key_pem, "thumbprint": thumbprint}


def _decode_content(text: str) -> bytes:
    value = text.strip()
    if value.startswith(_KEY_VAULT_REFERENCE):
        raise ConfigError(
            "certificate",
            "holds an unresolved Key Vault reference: give the app's identity permission to get the certificate's "
            "secret, and check the reference's status in the portal",
        )
    if value.startswith(_PEM_START.decode()):
        return value.encode("utf-8")
    try:
        return base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(
            "certificate", "is neither PEM text nor base64 (of a PKCS#12/PFX file); the value cannot be read"
        ) from None


def _from_pem(data: bytes, password: bytes | None, setting: str) -> tuple[Any, list[x509.Certificate]]:
    block = _KEY_BLOCK.search(data)
    certificates = [x509.load_pem_x509_certificate(match.group(0)) for match in _CERT_BLOCK.finditer(data)]
    if block is None:
        return None, certificates
    try:
        key = serialization.load_pem_private_key(block.group(0), password=password)
    except TypeError:
        if password is None:
            raise ConfigError(_PASSWORD, "is required: the PEM private key is encrypted") from None
        raise ConfigError(_PASSWORD, "is set but the PEM private key is not encrypted; leave it empty") from None
    except ValueError:
        if password is not None:
            raise ConfigError(_PASSWORD, "does not decrypt the PEM private key (wrong password)") from None
        raise ConfigError(setting, "holds a PEM private key that cannot be read") from None
    return key, certificates


def _from_pkcs12(data: bytes, password: bytes | None, setting: str) -> tuple[Any, list[x509.Certificate]]:
    if not _looks_like_pkcs12(data):
        raise ConfigError(setting, "is neither PEM nor PKCS#12 (PFX) content")
    try:
        key, cert, more = pkcs12.load_key_and_certificates(data, password)
    except ValueError:
        if password is None:
            raise ConfigError(_PASSWORD, "is required: the PKCS#12 (PFX) is password-protected (or damaged)") from None
        if _opens_without_password(data):
            raise ConfigError(_PASSWORD, "is set but the PKCS#12 is not password-protected; leave it empty") from None
        raise ConfigError(_PASSWORD, "does not open the PKCS#12 (wrong password, or the file is damaged)") from None
    return key, ([cert] if cert is not None else []) + list(more)


def _looks_like_pkcs12(data: bytes) -> bool:
    """A DER ``PFX`` starts ``SEQUENCE { INTEGER 3, ...`` (RFC 7292 section 4: the version is always 3)."""
    if len(data) < 5 or data[0] != 0x30:
        return False
    length_bytes = data[1] & 0x7F if data[1] & 0x80 else 0
    start = 2 + length_bytes
    return data[start : start + 3] == b"\x02\x01\x03"


def _opens_without_password(data: bytes) -> bool:
    try:
        pkcs12.load_key_and_certificates(data, None)
    except ValueError:
        return False
    return True


def _certificate_of(key: Any, certificates: list[x509.Certificate], setting: str) -> x509.Certificate:
    """The certificate whose public key is the private key's (a PEM chain or a PFX may carry others)."""
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    wanted = key.public_key().public_bytes(*spki)
    for cert in certificates:
        if cert.public_key().public_bytes(*spki) == wanted:
            return cert
    raise ConfigError(setting, "holds no certificate for its private key (the key and certificate do not match)")
