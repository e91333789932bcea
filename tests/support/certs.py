"""Throw-away self-signed certificates for app-credential (client assertion) tests, in the forms Azure hands them
to an app: PEM text, a PKCS#12 (PFX) blob with or without a password, and the base64 of one (a Key Vault
certificate's secret)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID


def self_signed(common_name: str = "collector-app") -> tuple[rsa.RSAPrivateKey, x509.Certificate]:
    """A new RSA key and its self-signed certificate, valid from a few minutes ago for a day."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return key, cert


def key_pem(key: rsa.RSAPrivateKey, password: bytes | None = None) -> str:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    )
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption).decode()


def cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def self_signed_pem(common_name: str = "collector-app") -> tuple[str, str]:
    """(private key PEM, certificate PEM), valid from a few minutes ago for a day."""
    key, cert = self_signed(common_name)
    return key_pem(key), cert_pem(cert)


def pfx(key: rsa.RSAPrivateKey | None, cert: x509.Certificate | None, password: bytes | None = None) -> bytes:
    """A PKCS#12 blob holding ``key`` and ``cert`` (either may be left out), password-protected when given one."""
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    )
    return pkcs12.serialize_key_and_certificates(b"collector-app", key, cert, None, encryption)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def sha1_thumbprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA1()).hex()  # the x5t thumbprint Entra registers
