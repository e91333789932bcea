"""App-only tokens for the audit APIs through an MSAL confidential client (client secret or certificate; the
certificate is read by :mod:`shared.audit.certificate`).

One ``msal.ConfidentialClientApplication`` is kept per (authority, client id, credential) for the life of the process,
so its in-memory token cache is reused across activity invocations and msal refreshes tokens before they expire.
A 401 from an API calls :meth:`MsalTokenProvider.invalidate`, which drops the cached access token so the next
:meth:`get_token` fetches a fresh one.

Errors become :class:`AuthenticationError` naming the setting to fix; secrets never reach a message or a log.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from typing import Any, Protocol
from urllib.parse import urlsplit

import msal
import requests

from shared.audit.certificate import content_digest, load_certificate
from shared.audit.config import AuditApiConfig
from shared.audit.session import PinnedSession, tls_config_error
from shared.errors import AuthenticationError, TransientApiError

logger = logging.getLogger(__name__)

GRAPH_SCOPE = "https://graph.microsoft.com/.default"
EXCHANGE_SCOPE = "https://outlook.office365.com/.default"

# Entra sign-in hosts msal already knows; any other host (the local emulator) is trusted as given.
_MICROSOFT_AUTHORITY_HOSTS = frozenset(
    {
        "login.microsoftonline.com",
        "login.microsoft.com",
        "login.windows.net",
        "sts.windows.net",
        "login.microsoftonline.us",
        "login.usgovcloudapi.net",
        "login.partner.microsoftonline.cn",
        "login.chinacloudapi.cn",
        "login-us.microsoftonline.com",
    }
)

_CERTIFICATE = "the certificate"  # stands for whichever certificate setting is in use

# AADSTS code -> (setting to fix, hint). Codes from Entra's error reference.
_AADSTS_SETTINGS: dict[str, tuple[str, str]] = {
    "AADSTS7000215": ("client_secret", "the client secret is invalid (copy the secret value, not its id)"),
    "AADSTS7000222": ("client_secret", "the client secret has expired"),
    "AADSTS700016": ("client_id", "no application with this client id exists in the tenant"),
    "AADSTS90002": ("tenant_id", "the tenant was not found"),
    "AADSTS900023": ("tenant_id", "the tenant identifier is not valid"),
    "AADSTS700027": (_CERTIFICATE, "the client assertion (certificate) was rejected"),
    "AADSTS700024": (_CERTIFICATE, "the client assertion is outside its validity window"),
    "AADSTS7000274": ("certificate_thumbprint", "the certificate thumbprint is not registered for the app"),
}
# Where the collector app takes each adapter setting from, so a failure names what the operator must change.
_APP_SETTINGS = {
    "client_secret": "AUDIT_CLIENT_SECRET",
    "client_id": "AUDIT_CLIENT_ID",
    "certificate": "AUDIT_CERTIFICATE",
    "certificate_path": "AUDIT_CERTIFICATE_PATH",
    "certificate_thumbprint": "AUDIT_CERTIFICATE_THUMBPRINT",
    "tenant_id": "the request's tenantId",
}
_AADSTS_RE = re.compile(r"AADSTS\d+")


class TokenProvider(Protocol):
    """What the HTTP layer needs: a bearer token per scope, and a way to discard a rejected one."""

    def get_token(self, scope: str) -> str: ...

    def invalidate(self, scope: str) -> None: ...


def is_microsoft_authority(authority_host: str) -> bool:
    return (urlsplit(authority_host).hostname or "").lower() in _MICROSOFT_AUTHORITY_HOSTS


def _credential_key(config: AuditApiConfig) -> str:
    # A digest, so a rotated secret or certificate (new content in the setting or in the file) builds a new app,
    # while neither the secret, the certificate nor its password is ever kept in a key or logged.
    parts = (
        config.client_secret or "",
        config.certificate or "",
        config.certificate_password or "",
        config.certificate_path or "",
        content_digest(config) if config.certificate_path else "",
        config.certificate_thumbprint or "",
    )
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()


def _auth_error_from_text(text: str, *, default_setting: str, credential_setting: str) -> AuthenticationError:
    match = _AADSTS_RE.search(text)
    code = match.group(0) if match else None
    setting, hint = _AADSTS_SETTINGS.get(code or "", (default_setting, "sign-in was rejected"))
    if setting == _CERTIFICATE:
        setting = credential_setting
    where = _APP_SETTINGS.get(setting)
    named = f"{setting} ({where})" if where else setting
    return AuthenticationError(f"{code or 'authentication failed'}: {hint}; check setting {named}")


class MsalTokenProvider:
    """Token provider for one tenant/app, shared by every client built from the same config."""

    def __init__(self, config: AuditApiConfig) -> None:
        self._config = config
        self._lock = threading.Lock()
        self._app: msal.ConfidentialClientApplication | None = None

    def _build_app(self) -> msal.ConfidentialClientApplication:
        config = self._config
        credential: Any = config.client_secret if config.client_secret else load_certificate(config)
        extra: dict[str, Any] = {}
        if not is_microsoft_authority(config.authority_host):
            # msal would otherwise ask login.microsoftonline.com whether the authority is known (instance discovery)
            # and refuse an unknown host; the emulator's host is trusted because the operator configured it.
            extra = {"instance_discovery": False, "validate_authority": False}
        try:
            return msal.ConfidentialClientApplication(
                config.client_id,
                client_credential=credential,
                authority=config.authority,
                http_client=PinnedSession(
                    verify=config.ca_bundle if config.ca_bundle else True, timeout=config.http_timeout_seconds
                ),
                **extra,
            )
        except ValueError as exc:
            # Tenant discovery failed (unknown tenant) or the authority URL is malformed.
            raise _auth_error_from_text(
                str(exc), default_setting="tenant_id", credential_setting=config.credential_setting
            ) from None
        except requests.exceptions.SSLError:
            raise tls_config_error(config.authority_host) from None
        except (requests.ConnectionError, requests.Timeout, requests.HTTPError) as exc:
            raise TransientApiError(
                f"cannot reach the authority {config.authority_host}: {type(exc).__name__}"
            ) from None

    def _get_app(self) -> msal.ConfidentialClientApplication:
        with self._lock:
            if self._app is None:
                self._app = self._build_app()
            return self._app

    def get_token(self, scope: str) -> str:
        app = self._get_app()
        try:
            result = app.acquire_token_for_client(scopes=[scope])
        except requests.exceptions.SSLError:
            raise tls_config_error(self._config.authority_host) from None
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise TransientApiError(f"cannot reach the token endpoint: {type(exc).__name__}") from None
        token = result.get("access_token") if isinstance(result, dict) else None
        if isinstance(token, str) and token:
            return token
        error = str(result.get("error", "")) if isinstance(result, dict) else ""
        description = str(result.get("error_description", "")) if isinstance(result, dict) else ""
        if error in {"temporarily_unavailable", "server_error"} or "AADSTS50196" in description:
            raise TransientApiError(f"token endpoint unavailable: {error}")
        used = self._config.credential_setting
        if error == "invalid_scope":
            raise AuthenticationError(f"invalid_scope for {scope}; check the API base URL settings")
        failure = _auth_error_from_text(f"{error} {description}", default_setting=used, credential_setting=used)
        logger.warning("token request for %s failed: %s", scope, failure)
        raise failure

    def invalidate(self, scope: str) -> None:
        """Drops cached access tokens for ``scope`` so the next request signs in again."""
        app = self._get_app()
        cache = app.token_cache
        for item in list(cache.search(msal.TokenCache.CredentialType.ACCESS_TOKEN, target=[scope])):
            cache.remove_at(item)


_providers: dict[tuple[str, str, str], MsalTokenProvider] = {}
_providers_lock = threading.Lock()


def token_provider_for(config: AuditApiConfig) -> MsalTokenProvider:
    """The process-wide provider for this (authority, client, credential): one msal app and token cache each."""
    key = (config.authority, config.client_id, _credential_key(config) + "|" + (config.ca_bundle or ""))
    with _providers_lock:
        provider = _providers.get(key)
        if provider is None:
            provider = MsalTokenProvider(config)
            _providers[key] = provider
        return provider
