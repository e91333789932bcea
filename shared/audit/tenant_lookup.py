"""The tenant's GUID for any spelling of it, from the Entra authority's public OpenID configuration document.

A tenant has one immutable GUID and any number of domains, and the audit APIs' limits belong to the tenant, so
whatever names one tenant must name one budget. ``GET {authority}/{domain}/v2.0/.well-known/openid-configuration``
needs no credential and no permission; Entra answers for a domain with the tenant's own document, whose endpoints
carry the tenant GUID (``token_endpoint``: ``https://login.microsoftonline.com/{tenant GUID}/oauth2/v2.0/token``;
``issuer``: ``https://login.microsoftonline.com/{tenant GUID}/v2.0``). An unknown tenant is answered 400
``invalid_tenant`` with ``AADSTS90002``. The authority host is the configured one (``AUDIT_AUTHORITY_HOST``), so a
national cloud (``login.microsoftonline.us``, ``login.chinacloudapi.cn``) answers for its own tenants, and the GUID is
read from the path, never from the host the document names.

Resolutions are cached per process (bounded, least recently used first out): a tenant's GUID never changes, and a
domain moving to another tenant is rare enough that a restart picks it up.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections import OrderedDict
from typing import Any
from urllib.parse import quote, urlsplit

import requests

from shared.audit.session import PinnedSession, tls_config_error
from shared.errors import RequestValidationError, TransientApiError

CACHE_SIZE = 1024
"""Domains whose GUID one process remembers."""
TIMEOUT_SECONDS = 10.0

_AADSTS = re.compile(r"\bAADSTS\d+\b")
_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class TenantNotFoundError(RequestValidationError):
    """The authority knows no tenant by this name (HTTP 400 naming ``tenantId``)."""

    def __init__(self, tenant: str, detail: str) -> None:
        super().__init__("tenantId", "not_found")
        self.message = (
            f"no tenant {tenant!r} is known to the sign-in authority ({detail}); check the domain, or give the "
            "tenant's GUID"
        )


def is_guid(tenant: str) -> bool:
    return bool(_GUID.fullmatch(tenant))


def guid_of_document(document: Any) -> str | None:
    """The tenant GUID an OpenID configuration document names: the first path segment of its ``token_endpoint``,
    which its ``issuer`` must agree with when it names one. None when the document names no GUID."""
    if not isinstance(document, dict):
        return None
    found = _first_segment(document.get("token_endpoint"))
    if found is None or not is_guid(found):
        return None
    issuer = _first_segment(document.get("issuer"))
    if issuer is not None and is_guid(issuer) and issuer.lower() != found.lower():
        return None
    return str(uuid.UUID(found))


def _first_segment(url: Any) -> str | None:
    if not isinstance(url, str):
        return None
    segments = [s for s in urlsplit(url).path.split("/") if s]
    return segments[0] if segments else None


class TenantDirectory:
    """Resolves tenant spellings to GUIDs against one authority host; thread-safe, bounded cache."""

    def __init__(self, authority_host: str, *, ca_bundle: str | None = None, timeout: float = TIMEOUT_SECONDS) -> None:
        self.authority_host = authority_host.rstrip("/")
        self._session = PinnedSession(verify=ca_bundle if ca_bundle else True, timeout=timeout)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, str] = OrderedDict()
        self.lookups = 0
        """Documents fetched (cache misses); tests and benchmarks read it."""

    def guid(self, tenant: str) -> str:
        """The tenant's GUID (lower case). A GUID is returned as it is (no look-up: every budget is keyed by it, and a
        collection for a GUID that no tenant has fails at sign-in, naming the tenant). Raises
        ``TenantNotFoundError`` for a name the authority does not know, ``TransientApiError`` when it cannot be
        asked, and ``ConfigError`` when its certificate is not trusted."""
        if is_guid(tenant):
            return str(uuid.UUID(tenant))
        key = tenant.lower()
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        found = self._fetch(key)
        with self._lock:
            self._cache[key] = found
            self._cache.move_to_end(key)
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return found

    def _fetch(self, domain: str) -> str:
        url = f"{self.authority_host}/{quote(domain, safe='')}/v2.0/.well-known/openid-configuration"
        self.lookups += 1
        try:
            response = self._session.get(url, allow_redirects=False)
        except requests.exceptions.SSLError:
            raise tls_config_error(self.authority_host) from None
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise TransientApiError(f"cannot reach the authority {self.authority_host}: {type(exc).__name__}") from None
        body = _json(response)
        if response.status_code == 200:
            guid = guid_of_document(body)
            if guid is None:
                raise TransientApiError(f"the authority's OpenID configuration for {domain!r} names no tenant GUID")
            return guid
        error = body.get("error") if isinstance(body, dict) else None
        description = str(body.get("error_description", "")) if isinstance(body, dict) else ""
        codes = set(_AADSTS.findall(description))  # whole codes: "AADSTS900023" holds "AADSTS90002" as a prefix
        if response.status_code in (400, 404) and (error == "invalid_tenant" or "AADSTS90002" in codes):
            code = "AADSTS90002" if "AADSTS90002" in codes else str(error)
            raise TenantNotFoundError(domain, code)
        if response.status_code == 400 and "AADSTS900023" in codes:  # not a valid DNS name for a tenant
            raise TenantNotFoundError(domain, "AADSTS900023")
        raise TransientApiError(
            f"the authority answered HTTP {response.status_code} for the OpenID configuration of {domain!r}",
            status=response.status_code,
        )


def _json(response: requests.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


_directories: dict[tuple[str, str], TenantDirectory] = {}
_directories_lock = threading.Lock()


def directory_for(authority_host: str, ca_bundle: str | None) -> TenantDirectory:
    """The process-wide directory of one authority (its cache lives as long as the worker)."""
    key = (authority_host.rstrip("/"), ca_bundle or "")
    with _directories_lock:
        found = _directories.get(key)
        if found is None:
            found = TenantDirectory(authority_host, ca_bundle=ca_bundle)
            _directories[key] = found
        return found
