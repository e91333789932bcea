"""The tenant side of an app registration, as an operator changes it: the steps after a deployment, one by one.

An app made with ``az ad app create`` (and ``az ad app permission add``) starts with none of them: no service
principal in the tenant, its permissions requested but not granted, no Exchange role, and no key matching the
collector's certificate. :class:`TenantSteps` holds that state for one registration of a running emulator and makes
each step, as ``scripts/tenant-setup.sh`` and an Exchange administrator would; each change re-registers the app, so
the next token request sees it (tokens already issued keep the roles they were minted with, as Entra's do).

How the emulator answers each missing step (evidence: ``m365_emulator/README.md``, "Tenant steps"):

* no service principal: the token endpoint, 401 ``invalid_client`` AADSTS7000229;
* no key for the certificate: 401 ``invalid_client`` AADSTS700027 "The key was not found";
* no admin consent: a token without ``roles``; Graph then 403 ``Authorization_RequestDenied``, Exchange 403
  ``AccessDenied`` naming ``Exchange.ManageAsApp``;
* no Exchange role: ``Search-UnifiedAuditLog`` refused (``ExchangeSettings.error_style``).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from m365_emulator.config import AppRegistration

if TYPE_CHECKING:
    from m365_emulator.emulator import Emulator

STEPS = ("service principal", "certificate", "admin consent", "exchange role")
"""In the order a sign-in meets them: the first two stop the token, consent shows in it, the role at Exchange."""


def cli_made_app(tenant_id: str, client_id: str, **permissions: object) -> AppRegistration:
    """A registration as ``az ad app create`` leaves it: every tenant step missing. It holds a client secret nobody
    knows (the emulator needs one credential to register an app; Entra answers a certificate sign-in the same way
    whether the registration holds another key or none)."""
    return AppRegistration(
        tenant_id,
        client_id,
        client_secret=secrets.token_urlsafe(24),
        certificate_pem=None,
        service_principal=False,
        admin_consent=False,
        exchange_role=False,
        **permissions,  # type: ignore[arg-type]
    )


@dataclass
class TenantSteps:
    """The tenant steps of one registration on a running emulator."""

    emulator: Emulator
    app: AppRegistration

    def __post_init__(self) -> None:
        self.emulator.register_app(self.app)

    def _change(self, **changes: object) -> None:
        self.app = replace(self.app, **changes)  # type: ignore[arg-type]
        self.emulator.register_app(self.app)

    def create_service_principal(self) -> None:
        """``az ad sp create --id <appId>``."""
        self._change(service_principal=True)

    def upload_certificate(self, certificate_pem: str | bytes) -> None:
        """``az ad app credential reset --id <appId> --cert @<pem> --append``."""
        self._change(certificate_pem=certificate_pem)

    def grant_admin_consent(self) -> None:
        """A Graph appRoleAssignment per requested permission (what "Grant admin consent" makes)."""
        self._change(admin_consent=True)

    def assign_exchange_role(self) -> None:
        """``New-ManagementRoleAssignment -App <service principal> -Role "View-Only Audit Logs"``."""
        self._change(exchange_role=True)

    def missing(self) -> list[str]:
        """The steps not made yet, in :data:`STEPS` order."""
        done = {
            "service principal": self.app.service_principal,
            "certificate": self.app.certificate_pem is not None,
            "admin consent": self.app.admin_consent,
            "exchange role": self.app.exchange_role,
        }
        return [step for step in STEPS if not done[step]]
