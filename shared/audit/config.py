"""Settings of the audit API adapters (Graph audit queries and Exchange ``Search-UnifiedAuditLog``).

The collector's settings object builds :class:`AuditApiConfig`; the adapters only read it. Validation happens at
construction so a bad setting fails the HTTP starter with a message naming it, before any chunk runs.
"""

from __future__ import annotations

import ipaddress
import re
import uuid
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from shared.errors import ConfigError
from shared.values import is_tenant_guid as is_tenant_guid  # noqa: PLC0414 - re-exported: the audit layer checks it

GRAPH_API_VERSIONS = frozenset({"beta", "v1.0"})

# A DNS name such as contoso.onmicrosoft.com: labels of letters, digits and hyphens, at least one dot.
_DOMAIN_RE = re.compile(r"^(?=.{4,253}$)([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,62}$", re.IGNORECASE)
_THUMBPRINT_RE = re.compile(r"^[0-9a-fA-F]{40}$")


def _is_guid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return len(value) == 36


INITIAL_DOMAIN_SUFFIXES = (".onmicrosoft.com", ".onmicrosoft.us")
"""A tenant's initial domain ends with one of these: worldwide/GCC, and US Government (GCC High/DoD)."""


def is_initial_domain(tenant: str) -> bool:
    """``contoso.onmicrosoft.com``: the domain every tenant gets at creation (one label before the suffix)."""
    text = tenant.strip().lower()
    for suffix in INITIAL_DOMAIN_SUFFIXES:
        name = text.removesuffix(suffix)
        if name != text and name and "." not in name and _DOMAIN_RE.fullmatch(text):
            return True
    return False


GLOBAL_CLOUD = "global"
CLOUD_NAMES = {
    "global": "the global (commercial) cloud",
    "usgovhigh": "GCC High",
    "usgovdod": "DoD",
    "china": "Microsoft 365 operated by 21Vianet",
}
EXCHANGE_HOSTS = {
    "outlook.office365.com": "global",
    "outlook.office365.us": "usgovhigh",
    "outlook-dod.office365.us": "usgovdod",
    "partner.outlook.cn": "china",
}
"""Exchange Online hosts per cloud (GCC uses the global endpoints); each is its own token audience
(cisagov/ScubaGear: GCC High ``https://outlook.office365.us/.default``, DoD ``https://outlook-dod.office365.us``)."""
GRAPH_HOSTS = {
    "graph.microsoft.com": "global",
    "graph.microsoft.us": "usgovhigh",
    "dod-graph.microsoft.us": "usgovdod",
    "microsoftgraph.chinacloudapi.cn": "china",
}
"""Microsoft Graph hosts per cloud (learn.microsoft.com/graph/deployments)."""
AUTHORITY_HOSTS = {
    "login.microsoftonline.us": "usgovhigh",
    "login.partner.microsoftonline.cn": "china",
    "login.chinacloudapi.cn": "china",
}


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def cloud_of(*, authority_host: str, graph_base_url: str, exchange_base_url: str) -> str:
    """The national cloud the configured endpoints name (``usgovhigh``, ``usgovdod``, ``china``), else ``global``
    (also for hosts this table does not know, such as the local emulator)."""
    for host, table in (
        (_host(exchange_base_url), EXCHANGE_HOSTS),
        (_host(graph_base_url), GRAPH_HOSTS),
        (_host(authority_host), AUTHORITY_HOSTS),
    ):
        cloud = table.get(host, GLOBAL_CLOUD)
        if cloud != GLOBAL_CLOUD:
            return cloud
    return GLOBAL_CLOUD


def is_loopback_host(host: str | None) -> bool:
    """True for localhost and loopback IP literals (the only hosts allowed over plain http)."""
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_url(setting: str, url: str) -> None:
    parts = urlsplit(url)
    if not parts.netloc or not parts.hostname:
        raise ConfigError(setting, f"must be an absolute URL such as https://host, got {url!r}")
    if parts.scheme == "http":
        if not is_loopback_host(parts.hostname):
            raise ConfigError(setting, "must use https (http is allowed only for a loopback host)")
    elif parts.scheme != "https":
        raise ConfigError(setting, f"must use https, got scheme {parts.scheme!r}")
    if parts.query or parts.fragment:
        raise ConfigError(setting, "must not carry a query string or fragment")


CREDENTIAL_FIELDS = ("client_secret", "certificate", "certificate_path")
"""The app's credential: exactly one of these is set."""
_CREDENTIAL_SETTINGS = (
    "client_secret (AUDIT_CLIENT_SECRET), certificate (AUDIT_CERTIFICATE) or certificate_path (AUDIT_CERTIFICATE_PATH)"
)


def _check_credential(config: AuditApiConfig) -> None:
    given = [name for name in CREDENTIAL_FIELDS if getattr(config, name)]
    if not given:
        raise ConfigError("client_secret", f"set exactly one of {_CREDENTIAL_SETTINGS}")
    if len(given) > 1:
        raise ConfigError(", ".join(given), f"set exactly one of {_CREDENTIAL_SETTINGS}, not {len(given)}")
    if config.certificate_password and config.client_secret:
        raise ConfigError("certificate_password", "applies only to a certificate, not to a client secret")


@dataclass(frozen=True)
class AuditApiConfig:
    """How to reach and authenticate to the audit APIs of one tenant."""

    tenant_id: str
    client_id: str
    client_secret: str | None = field(default=None, repr=False)  # never logged
    certificate: str | None = field(default=None, repr=False)  # base64 PKCS#12 or PEM text (shared.audit.certificate)
    certificate_path: str | None = None  # PEM or PKCS#12 file with the private key and its certificate
    certificate_password: str | None = field(default=None, repr=False)  # opens a protected PKCS#12 / PEM key
    certificate_thumbprint: str | None = None  # hex SHA-1 thumbprint (computed from the cert if None)
    authority_host: str = "https://login.microsoftonline.com"
    graph_base_url: str = "https://graph.microsoft.com"
    graph_api_version: str = "beta"  # "beta" | "v1.0"
    exchange_base_url: str = "https://outlook.office365.com"
    ca_bundle: str | None = None  # extra CA bundle (the local emulator's); None = system CAs
    http_timeout_seconds: float = 60.0
    page_size: int = 1000
    max_attempts: int = 6  # per HTTP call, for 429/5xx/timeouts
    max_retry_wait_seconds: float = 120.0
    transient_403_attempts: int = 3
    exchange_session_cap: int = 50_000
    """Records one ReturnLargeSet session can page (the service's 50,000; lower only to test splitting)."""
    feed_base_url: str = "https://manage.office.com"
    """The Office 365 Management Activity API's host for the tenant's cloud (``shared.audit.feed_cloud``)."""
    feed_publisher_id: str | None = None
    """``PublisherIdentifier`` sent with every feed call (the publisher's tenant GUID; None: the collected tenant's)."""

    def __post_init__(self) -> None:
        tenant = self.tenant_id.strip() if isinstance(self.tenant_id, str) else ""
        if not tenant:
            raise ConfigError(
                "tenant_id", "is required (the directory GUID or a domain such as contoso.onmicrosoft.com)"
            )
        if not (_is_guid(tenant) or _DOMAIN_RE.fullmatch(tenant)):
            raise ConfigError("tenant_id", "must be a GUID or a domain name such as contoso.onmicrosoft.com")
        if not isinstance(self.client_id, str) or not self.client_id.strip():
            raise ConfigError("client_id", "is required (the application (client) id of the app registration)")
        _check_credential(self)
        if self.certificate_thumbprint is not None and not _THUMBPRINT_RE.fullmatch(self.certificate_thumbprint):
            raise ConfigError("certificate_thumbprint", "must be the 40 hex digits of the SHA-1 thumbprint")
        _check_url("authority_host", self.authority_host)
        _check_url("graph_base_url", self.graph_base_url)
        _check_url("exchange_base_url", self.exchange_base_url)
        _check_url("feed_base_url", self.feed_base_url)
        if self.feed_publisher_id is not None and not _is_guid(self.feed_publisher_id):
            raise ConfigError("feed_publisher_id", "must be a tenant GUID (the publisher's directory id)")
        if self.graph_api_version not in GRAPH_API_VERSIONS:
            raise ConfigError("graph_api_version", f"must be one of {sorted(GRAPH_API_VERSIONS)}")
        if not self.http_timeout_seconds > 0:
            raise ConfigError("http_timeout_seconds", "must be > 0")
        if not 1 <= self.page_size <= 10_000:
            raise ConfigError("page_size", "must be between 1 and 10000")
        if self.max_attempts < 1:
            raise ConfigError("max_attempts", "must be >= 1")
        if self.max_retry_wait_seconds < 0:
            raise ConfigError("max_retry_wait_seconds", "must be >= 0")
        if not 1 <= self.exchange_session_cap <= 50_000:
            raise ConfigError("exchange_session_cap", "must be between 1 and 50000")
        if self.transient_403_attempts < 1:
            raise ConfigError("transient_403_attempts", "must be >= 1")

    @property
    def credential_setting(self) -> str:
        """The field holding the credential in use: ``client_secret``, ``certificate`` or ``certificate_path``."""
        return next(name for name in CREDENTIAL_FIELDS if getattr(self, name))

    @property
    def authority(self) -> str:
        return f"{self.authority_host.rstrip('/')}/{self.tenant_id}"

    @property
    def cloud(self) -> str:
        """``global``, ``usgovhigh``, ``usgovdod`` or ``china``: what the configured endpoints name."""
        return cloud_of(
            authority_host=self.authority_host,
            graph_base_url=self.graph_base_url,
            exchange_base_url=self.exchange_base_url,
        )

    @property
    def exchange_scope(self) -> str:
        """The Exchange token scope: the configured Exchange host's own where it is a known cloud's (a GCC High or DoD
        token is issued for its own audience), else the global one (which the local emulator answers to)."""
        host = _host(self.exchange_base_url)
        return f"https://{host}/.default" if host in EXCHANGE_HOSTS else "https://outlook.office365.com/.default"

    @property
    def graph_scope(self) -> str:
        """The Graph token scope, by the same rule."""
        host = _host(self.graph_base_url)
        return f"https://{host}/.default" if host in GRAPH_HOSTS else "https://graph.microsoft.com/.default"

    @property
    def graph_root(self) -> str:
        """``https://graph.microsoft.com/beta`` (no trailing slash)."""
        return f"{self.graph_base_url.rstrip('/')}/{self.graph_api_version}"

    @property
    def exchange_root(self) -> str:
        return self.exchange_base_url.rstrip("/")

    @property
    def feed_root(self) -> str:
        """``https://manage.office.com`` (no trailing slash); the API is under ``/api/v1.0/{tenant GUID}``."""
        return self.feed_base_url.rstrip("/")
