"""The identity half: app registrations, the OAuth2 client-credentials token endpoint and bearer-token checks.

Tokens are JWT-shaped (header.payload.signature, HMAC-signed with a per-process key) so clients that peek at
``exp`` work, but only this emulator can validate them. ``expire_all`` bumps a generation number carried in every
token, which invalidates all tokens issued so far in one step (token expiry mid-run).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from m365_emulator.config import (
    EXCHANGE_PERMISSION,
    EXCHANGE_SCOPE_RESOURCE,
    GRAPH_SCOPE_RESOURCE,
    MANAGE_SCOPE_RESOURCE,
    AppRegistration,
)
from m365_emulator.wire import Reply

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
RESOURCES = (GRAPH_SCOPE_RESOURCE, EXCHANGE_SCOPE_RESOURCE, MANAGE_SCOPE_RESOURCE)
_CERT_BLOCK = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class TokenClaims:
    tenant_id: str
    client_id: str
    audience: str
    roles: tuple[str, ...]


def aad_error(status: int, error: str, code: int, text: str, base_url: str) -> Reply:
    """An Entra ID (AADSTS) error in the token endpoint's JSON shape."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    trace, correlation = str(uuid.uuid4()), str(uuid.uuid4())
    body = {
        "error": error,
        "error_description": f"AADSTS{code}: {text} Trace ID: {trace} Correlation ID: {correlation} Timestamp: {now}",
        "error_codes": [code],
        "timestamp": now,
        "trace_id": trace,
        "correlation_id": correlation,
        "error_uri": f"{base_url}/error?code={code}",
    }
    return Reply(status, body)


def missing_service_principal(client_id: str, tenant_id: str) -> str:
    """AADSTS7000229's text: the app has no service principal (enterprise application) in the tenant."""
    return (
        f"The client application {client_id} is missing service principal in the tenant {tenant_id}. "
        "See instructions here: https://go.microsoft.com/fwlink/?linkid=2225119"
    )


def key_not_found(thumbprint: str, client_id: str) -> str:
    """AADSTS700027's text when the registration holds no key with the assertion's thumbprint."""
    return (
        "Client assertion contains an invalid signature. [Reason - The key was not found., Thumbprint of key used "
        f"by client: '{thumbprint}', Please visit the Azure Portal, Graph Explorer or directly use MS Graph to see "
        f"configured keys for app Id '{client_id}'.]"
    )


def _assertion_thumbprint(assertion: str) -> str:
    """The SHA-1 thumbprint (hex, upper case) a client assertion's header names, or '' when it names none."""
    try:
        header = json.loads(unb64url(assertion.split(".", maxsplit=1)[0]))
        thumb = header.get("x5t")
        return unb64url(thumb).hex().upper() if isinstance(thumb, str) else ""
    except (ValueError, json.JSONDecodeError, AttributeError):
        return ""


class TokenService:
    def __init__(self, lifetime_seconds: int, clock: Callable[[], float] = time.time) -> None:
        self._key = secrets.token_bytes(32)
        self._lifetime = lifetime_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._generation = 0
        self._apps: dict[tuple[str, str], AppRegistration] = {}
        self.tokens_issued = 0

    def register(self, app: AppRegistration) -> None:
        with self._lock:
            self._apps[(app.tenant_id.casefold(), app.client_id.casefold())] = app

    def expire_all(self) -> None:
        with self._lock:
            self._generation += 1

    # -- token endpoint -------------------------------------------------------------------------------------------

    def issue(self, tenant_id: str, form: dict[str, str], token_endpoint: str, base_url: str) -> Reply:
        """Answer a POST to ``/{tenant}/oauth2/v2.0/token`` for an already-resolved tenant."""
        if form.get("grant_type") != "client_credentials":
            return aad_error(
                400, "unsupported_grant_type", 70003, "The app requested an unsupported grant type.", base_url
            )
        client_id = form.get("client_id", "")
        if not client_id:
            text = "The request body must contain the following parameter: 'client_id'."
            return aad_error(400, "invalid_request", 900144, text, base_url)
        app = self._apps.get((tenant_id.casefold(), client_id.casefold()))
        if app is None:
            text = f"Application with identifier '{client_id}' was not found in the directory '{tenant_id}'."
            return aad_error(400, "unauthorized_client", 700016, text, base_url)
        if not app.service_principal:  # the app exists, its enterprise application in this tenant does not
            return aad_error(401, "invalid_client", 7000229, missing_service_principal(client_id, tenant_id), base_url)
        resource = self._resource(form.get("scope", ""))
        if resource is None:
            text = f"The provided value for scope {form.get('scope', '')!r} is not valid. Use '<resource>/.default'."
            return aad_error(400, "invalid_scope", 1002012, text, base_url)
        failure = self._authenticate(app, form, token_endpoint, base_url)
        if failure is not None:
            return failure
        roles: tuple[str, ...]
        if not app.admin_consent:  # requested, never granted: the token comes without roles
            roles = ()
        elif resource == GRAPH_SCOPE_RESOURCE:
            roles = tuple(app.graph_permissions)
        elif resource == MANAGE_SCOPE_RESOURCE:
            roles = tuple(app.feed_permissions)
        else:
            roles = (EXCHANGE_PERMISSION,) if app.exchange_manage_as_app else ()
        token = self._mint(app, resource, roles)
        body = {"token_type": "Bearer", "expires_in": self._lifetime, "ext_expires_in": self._lifetime,
                "access_token": token}  # fmt: skip
        return Reply(200, body)

    @staticmethod
    def _resource(scope: str) -> str | None:
        for item in scope.split():
            for resource in RESOURCES:
                if item.rstrip("/") in (f"{resource}/.default", f"{resource}//.default"):
                    return resource
        return None

    def _authenticate(self, app: AppRegistration, form: dict[str, str], endpoint: str, base_url: str) -> Reply | None:
        secret = form.get("client_secret")
        assertion = form.get("client_assertion")
        if secret is not None:
            if app.client_secret is not None and hmac.compare_digest(secret.encode(), app.client_secret.encode()):
                return None
            text = f"Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '{app.client_id}'."  # noqa: E501
            return aad_error(401, "invalid_client", 7000215, text, base_url)
        if assertion is not None:
            if form.get("client_assertion_type") != ASSERTION_TYPE:
                return aad_error(400, "invalid_request", 50027, "Invalid client_assertion_type.", base_url)
            problem = self._check_assertion(app, assertion, endpoint)
            if problem is None:
                return None
            return aad_error(401, "invalid_client", problem[0], problem[1], base_url)
        text = "The request body must contain the following parameter: 'client_assertion' or 'client_secret'."
        return aad_error(401, "invalid_client", 7000218, text, base_url)

    def _check_assertion(self, app: AppRegistration, assertion: str, endpoint: str) -> tuple[int, str] | None:
        """Validate a certificate client assertion (RFC 7523); returns (AADSTS code, message) when it fails."""
        if app.certificate_pem is None:
            return 700027, key_not_found(_assertion_thumbprint(assertion), app.client_id)
        try:
            head_b64, payload_b64, sig_b64 = assertion.split(".")
            header = json.loads(unb64url(head_b64))
            claims = json.loads(unb64url(payload_b64))
            signature = unb64url(sig_b64)
        except (ValueError, json.JSONDecodeError):
            return 50027, "JWT token is invalid or malformed."
        pem = app.certificate_pem.encode() if isinstance(app.certificate_pem, str) else app.certificate_pem
        block = _CERT_BLOCK.search(pem)
        if block is None:
            return 700027, "Client assertion contains an invalid signature. The registered certificate is unreadable."
        cert = x509.load_pem_x509_certificate(block.group(0))
        thumb256, thumb1 = header.get("x5t#S256"), header.get("x5t")
        if thumb256 is not None and unb64url(thumb256) != cert.fingerprint(hashes.SHA256()):
            return 700027, key_not_found(_assertion_thumbprint(assertion), app.client_id)
        if thumb1 is not None and unb64url(thumb1) != cert.fingerprint(hashes.SHA1()):  # noqa: S303 - x5t is SHA-1
            return 700027, key_not_found(_assertion_thumbprint(assertion), app.client_id)
        key = cert.public_key()
        alg = header.get("alg")
        if not isinstance(key, rsa.RSAPublicKey) or alg not in ("RS256", "PS256"):
            return 700027, f"Client assertion contains an invalid signature. [Reason - unsupported algorithm {alg}.]"
        pad: padding.AsymmetricPadding = (
            padding.PKCS1v15()
            if alg == "RS256"
            else padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.AUTO)
        )
        try:
            key.verify(signature, f"{head_b64}.{payload_b64}".encode(), pad, hashes.SHA256())
        except InvalidSignature:
            return 700027, "Client assertion contains an invalid signature. [Reason - The signature is invalid.]"
        now = self._clock()
        if claims.get("aud") != endpoint:
            return (
                700212,
                f"No matching federated identity record found for presented assertion audience '{claims.get('aud')}'.",
            )
        if claims.get("iss") != app.client_id or claims.get("sub") != app.client_id:
            return 700021, "Client assertion application identifier doesn't match 'client_id' parameter."
        if not isinstance(claims.get("exp"), int | float) or claims["exp"] <= now:
            return 700024, "Client assertion is not within its valid time range."
        if isinstance(claims.get("nbf"), int | float) and claims["nbf"] > now + 300:
            return 700024, "Client assertion is not within its valid time range."
        return None

    # -- tokens ---------------------------------------------------------------------------------------------------

    def _mint(self, app: AppRegistration, audience: str, roles: tuple[str, ...]) -> str:
        now = int(self._clock())
        with self._lock:
            generation = self._generation
            self.tokens_issued += 1
        claims = {
            "aud": audience,
            "iss": f"https://sts.windows.net/{app.tenant_id}/",
            "iat": now,
            "nbf": now,
            "exp": now + self._lifetime,
            "appid": app.client_id,
            "idtyp": "app",
            "tid": app.tenant_id,
            "gen": generation,
            "uti": secrets.token_urlsafe(8),
        }
        if roles:  # Entra leaves the claim out when no application permission is granted
            claims["roles"] = list(roles)
        head = b64url(json.dumps({"typ": "JWT", "alg": "HS256"}).encode())
        body = b64url(json.dumps(claims, separators=(",", ":")).encode())
        sig = b64url(hmac.new(self._key, f"{head}.{body}".encode(), hashlib.sha256).digest())
        return f"{head}.{body}.{sig}"

    def check_bearer(self, authorization: str | None, audience: str) -> TokenClaims | str:
        """Claims of a valid token for ``audience``, or the reason (a message) it is not acceptable."""
        if not authorization or not authorization.startswith("Bearer "):
            return "Access token is empty."
        token = authorization[len("Bearer ") :].strip()
        try:
            head, body, sig = token.split(".")
            expected = b64url(hmac.new(self._key, f"{head}.{body}".encode(), hashlib.sha256).digest())
            if not hmac.compare_digest(sig, expected):
                return "Access token validation failure. Invalid signature."
            claims = json.loads(unb64url(body))
        except (ValueError, json.JSONDecodeError):
            return "IDX14100: JWT is not well formed."
        with self._lock:
            generation = self._generation
        if claims.get("gen") != generation or claims.get("exp", 0) <= self._clock():
            return "Lifetime validation failed, the token is expired."
        if claims.get("aud") != audience:
            return "Access token validation failure. Invalid audience."
        return TokenClaims(claims["tid"], claims["appid"], claims["aud"], tuple(claims.get("roles", ())))
