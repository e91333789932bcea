"""From an error the adapters raised to a probe result that names what to change.

The adapters already put the reason in their messages (``shared.errors``); this module only decides the outcome
and phrases the fix in the operator's terms: app settings (``AUDIT_*``), API permissions, Exchange roles, the tenant.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from shared.doctor.model import ProbeResult, differs, failed
from shared.errors import (
    AuditingDisabledError,
    AuthenticationError,
    CollectorError,
    ConfigError,
    MissingPermissionError,
    PermanentApiError,
    RoutingError,
    TransientApiError,
)

TENANT_SETTING = "the tenant (--tenant / tenantId)"
_FIELD_SETTINGS = {"tenant_id": TENANT_SETTING}
_CHECK_SETTING = re.compile(r"check setting \S+ \(([^)]+)\)")

GRAPH_PERMISSION_FIX = (
    "grant the app registration the Microsoft Graph application permission AuditLogsQuery.Read.All (or the "
    "AuditLogsQuery-<workload>.Read.All ones) and grant admin consent in the tenant"
)
EXCHANGE_MANAGE_AS_APP_FIX = (
    "grant the app registration the Office 365 Exchange Online application permission Exchange.ManageAsApp "
    "and grant admin consent in the tenant"
)
EXCHANGE_ROLE_FIX = (
    "assign the app's service principal a role that includes Exchange's View-Only Audit Logs (or Audit Logs) "
    "role, for example the Entra role Compliance Administrator or an Exchange role group (a new assignment can "
    "take a while to apply)"
)
ROUTING_FIX = (
    "give the tenant (--tenant / tenantId) as its initial domain <name>.onmicrosoft.com (Entra admin center -> "
    "Domain names): Exchange routes app-only calls by the anchor mailbox APP:SystemMailbox{...}@<that domain>"
)


def app_setting(name: str) -> str:
    """The app setting behind an adapter field (``client_secret`` -> ``AUDIT_CLIENT_SECRET``); settings pass through."""
    if name in _FIELD_SETTINGS:
        return _FIELD_SETTINGS[name]
    return name if name.isupper() else f"AUDIT_{name.upper()}"


def config_failure(probe: str, exc: ConfigError) -> ProbeResult:
    setting = app_setting(exc.setting)
    return failed(probe, f"setting {setting}: {exc.rule}", f"set {setting}: {exc.rule}")


def _host(url: str) -> str:
    return urlsplit(url).netloc or url


def failure(
    probe: str,
    exc: CollectorError,
    *,
    endpoint: str,
    endpoint_setting: str,
    permission_fix: str = "",
) -> ProbeResult:
    """The result for an error raised by an audit API call to ``endpoint`` (whose app setting is named)."""
    if isinstance(exc, ConfigError):
        return config_failure(probe, exc)
    if isinstance(exc, AuthenticationError):
        match = _CHECK_SETTING.search(str(exc))
        where = match.group(1) if match else "AUDIT_CLIENT_ID, AUDIT_CLIENT_SECRET (or the certificate settings)"
        if where == "the request's tenantId":
            where = TENANT_SETTING
        return failed(probe, f"sign-in refused: {exc}", f"check {where}")
    if isinstance(exc, MissingPermissionError):
        return failed(probe, f"access denied: {exc}", permission_fix or f"grant the app {exc.permission}")
    if isinstance(exc, AuditingDisabledError):
        return failed(probe, f"auditing is turned off in the tenant: {exc}", exc.fix)
    if isinstance(exc, RoutingError):
        return failed(probe, f"the call was not routed: {exc}", ROUTING_FIX)
    if isinstance(exc, TransientApiError):
        if exc.status is None:
            return failed(
                probe,
                f"cannot reach {_host(endpoint)}: {exc}",
                f"check {endpoint_setting} and that {_host(endpoint)} is reachable from here (DNS, proxy, firewall)",
            )
        return failed(
            probe,
            f"{_host(endpoint)} kept failing: {exc}",
            "the service is throttling or unavailable: run the doctor again later",
        )
    if isinstance(exc, PermanentApiError) and exc.status in (404, 405, 410):
        return failed(probe, f"{_host(endpoint)} has no such API: {exc}", f"check {endpoint_setting}")
    if isinstance(exc, PermanentApiError):
        return differs(probe, f"the call was refused: {exc}")
    return failed(probe, f"{type(exc).__name__}: {exc}", "see the detail")
