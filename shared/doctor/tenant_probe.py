"""The ``tenant`` probe: which of the tenant steps after a deployment is missing, with the fix for it.

The steps (docs/deploy.md, "The tenant steps"; ``scripts/tenant-setup.sh`` makes them): the app registration, its
service principal in the tenant, the certificate (or secret) the app signs in with, admin consent for the API
permission, and for Exchange a role holding View-Only Audit Logs. The probe makes no call of its own: it reads what
the token probes and ``exchange.role`` met, since each missing step shows in one known answer:

* AADSTS700016 at sign-in: no such app in the tenant; AADSTS7000229: no service principal;
  AADSTS700027 / AADSTS7000274: no key for the app's certificate; AADSTS7000215 / AADSTS7000222: a wrong or expired
  client secret;
* a token without the API's application role: the permission was never granted (admin consent);
* ``Search-UnifiedAuditLog`` refused although the token holds ``Exchange.ManageAsApp``: no Exchange role.

It fails naming the first missing step in that order (a later one cannot be seen before it is fixed: no token, no
roles to read), and its detail gives the state of every step.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shared.doctor.model import Outcome, ProbeResult, failed, ok, skipped

PROBE = "tenant"
_CODE = re.compile(r"AADSTS(\d+)")
_CREDENTIAL_CODES = {"700027": "certificate", "7000274": "certificate", "7000215": "client secret",
                     "7000222": "client secret"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class TokenOutcome:
    """What one source's token probe met: its result, the application roles the token carries (None when its claims
    were not readable), and the permission it should carry and does not (None: it does, or cannot be told)."""

    result: ProbeResult
    roles: tuple[str, ...] | None
    missing: str | None = None


TenantStep = Callable[[str, list[str]], ProbeResult | None]
"""A source's own tenant step after admin consent (Exchange: its role), given the app's client id and the states of
the steps so far: its failure, or None (it may add its state)."""


def _setup_command(client_id: str, source: str, cert: str = "") -> str:
    option = f" --cert {cert}" if cert else ""
    return f"bash scripts/tenant-setup.sh --app-id {client_id}{option} --source {source} (or scripts/tenant-setup.ps1)"


def _sign_in_step(outcome: TokenOutcome, client_id: str, tenant: str, source: str) -> ProbeResult | None:
    match = _CODE.search(outcome.result.detail)
    code = match.group(1) if match else ""
    setup = _setup_command(client_id, source)
    if code == "700016":
        return failed(
            PROBE,
            f"app registration: the tenant {tenant} has no application {client_id} (AADSTS700016)",
            "check AUDIT_CLIENT_ID and the tenant; or make the registration in that tenant (az ad app create "
            "--display-name ual-collector), set AUDIT_CLIENT_ID to its appId, then run " + setup,
        )
    if code == "7000229":
        return failed(
            PROBE,
            f"service principal: the app {client_id} has none in the tenant {tenant} (AADSTS7000229; an app made "
            "with az ad app create has none, and without it no consent or Exchange role can be given)",
            f"create it: az ad sp create --id {client_id}; {setup} creates it and makes the remaining steps",
        )
    if code in _CREDENTIAL_CODES:
        kind = _CREDENTIAL_CODES[code]
        if kind == "certificate":
            pem = ".azure/<environment>/ual-audit.pem"
            fix = (
                f"upload the certificate the app signs with to the registration: az ad app credential reset --id "
                f"{client_id} --cert @{pem} --append (the postprovision hook wrote the file), or "
                f"{_setup_command(client_id, source, pem)}, which makes the remaining steps too"
            )
        else:
            fix = "put the secret's value (not its id), still valid, in AUDIT_CLIENT_SECRET's Key Vault secret"
        return failed(PROBE, f"{kind}: the tenant does not accept the app's {kind} (AADSTS{code})", fix)
    return None


def _consent_gap(outcome: TokenOutcome) -> str | None:
    """The permission the token should carry and does not, or None (present, or the roles are unreadable)."""
    return outcome.missing if outcome.roles is not None else None


def tenant_result(
    *,
    client_id: str,
    tenant: str,
    source: str,
    tokens: list[TokenOutcome],
    steps: Sequence[TenantStep] = (),
) -> ProbeResult:
    """The ``tenant`` probe's result from the token probes (those of the sources the run probed) and each source's
    own later step (``steps``: Exchange's role)."""
    signed_in = [t for t in tokens if t.result.outcome is Outcome.OK]
    refused = [t for t in tokens if t.result.outcome is not Outcome.OK]
    for outcome in refused:
        step = _sign_in_step(outcome, client_id, tenant, source)
        if step is not None:
            return step
    if not signed_in:
        return skipped(PROBE, "sign-in failed for a reason that is not a tenant step (the token probes say which)")
    states = ["app registration found", "service principal present", "credential accepted"]
    gaps = [gap for gap in map(_consent_gap, signed_in) if gap]
    if gaps:
        return failed(
            PROBE,
            "admin consent: the app's token carries no application role for " + " nor ".join(gaps) + " (the "
            "permission was never granted); " + "; ".join(states),
            f"grant it: {_setup_command(client_id, source)} grants it by a Graph appRoleAssignment (a Privileged "
            f"Role Administrator's right), or such an administrator opens https://login.microsoftonline.com/{tenant}"
            f"/adminconsent with the query client_id={client_id} (doctor's lines carry no URL query) and accepts; a "
            "new grant reaches tokens within minutes",
        )
    states.append("admin consent given")
    for later in steps:
        failure = later(client_id, states)
        if failure is not None:
            return failure
    return ok(PROBE, "tenant steps: " + "; ".join(states))
