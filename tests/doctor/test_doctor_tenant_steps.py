"""The doctor's ``tenant`` probe names each missing tenant step in turn, with its fix, against the emulator over real
HTTPS (real msal certificate sign-ins, the real adapters): an app made with ``az ad app create`` starts with every
step missing, and as the operator makes them one by one (``m365_emulator.tenant_steps``, as
scripts/tenant-setup.sh and an Exchange administrator would), each doctor run names the next one, until it is ok."""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from pathlib import Path

import pytest
import requests

from m365_emulator import Emulator
from m365_emulator.tenant_steps import TenantSteps, cli_made_app
from shared.doctor import Outcome, run_doctor
from shared.doctor.model import DoctorReport
from tests.doctor.conftest import DOMAIN, TENANT, app_env, folder_output
from tests.support.certs import b64, cert_pem, pfx, self_signed


def _doctor(emu: Emulator, client: str, certificate: str, out: Path, source: str = "all") -> DoctorReport:
    env = app_env(emu, folder_output(out), AUDIT_CLIENT_ID=client, AUDIT_CERTIFICATE=certificate)
    del env["AUDIT_CLIENT_SECRET"]
    return run_doctor(env, DOMAIN, source=source)


def _tenant(report: DoctorReport) -> tuple[str, str, str]:
    result = report.result("tenant")
    return result.outcome.value, result.detail, result.fix


def test_each_missing_step_is_named_in_turn_with_its_fix(knobs: Emulator, tmp_path: Path) -> None:
    client = str(uuid.uuid4())
    key, cert = self_signed("ual-durable-collector")
    credential = b64(pfx(key, cert))
    steps = TenantSteps(knobs, cli_made_app(TENANT, client))
    assert steps.missing() == ["service principal", "certificate", "admin consent", "exchange role"]
    seen = []

    report = _doctor(knobs, client, credential, tmp_path)
    outcome, detail, fix = _tenant(report)
    assert outcome == "failed" and detail.startswith("service principal:") and "AADSTS7000229" in detail
    assert f"az ad sp create --id {client}" in fix and "scripts/tenant-setup.sh" in fix
    assert report.result("graph.token").outcome is Outcome.FAILED  # the sign-in itself says so too
    seen.append("service principal")
    steps.create_service_principal()

    outcome, detail, fix = _tenant(_doctor(knobs, client, credential, tmp_path))
    assert outcome == "failed" and detail.startswith("certificate:") and "AADSTS700027" in detail
    assert f"az ad app credential reset --id {client} --cert @" in fix and "--append" in fix
    seen.append("certificate")
    steps.upload_certificate(cert_pem(cert))

    report = _doctor(knobs, client, credential, tmp_path)
    outcome, detail, fix = _tenant(report)
    assert outcome == "failed" and detail.startswith("admin consent:")
    assert "Microsoft Graph AuditLogsQuery.Read.All" in detail and "Exchange.ManageAsApp" in detail
    assert f"https://login.microsoftonline.com/{DOMAIN}/adminconsent with the query client_id={client}" in fix
    assert "appRoleAssignment" in fix
    assert report.result("graph.permission").outcome is Outcome.FAILED  # Graph answered 403 to a token sans roles
    seen.append("admin consent")
    steps.grant_admin_consent()

    report = _doctor(knobs, client, credential, tmp_path)
    outcome, detail, fix = _tenant(report)
    assert outcome == "failed" and detail.startswith("Exchange role:")
    assert 'New-ManagementRoleAssignment -App <that object id> -Role "View-Only Audit Logs"' in fix
    assert report.result("graph.permission").outcome is Outcome.OK  # Graph works now: only Exchange lacks a step
    seen.append("exchange role")
    steps.assign_exchange_role()

    report = _doctor(knobs, client, credential, tmp_path)
    outcome, detail, _ = _tenant(report)
    assert outcome == "ok" and "Exchange role in place" in detail, report.lines()
    assert report.ok, report.lines()
    assert seen == ["service principal", "certificate", "admin consent", "exchange role"] and steps.missing() == []


@pytest.mark.parametrize("step", ["service principal", "certificate", "admin consent", "exchange role"])
def test_one_missing_step_alone_is_named(knobs: Emulator, tmp_path: Path, step: str) -> None:
    client = str(uuid.uuid4())
    key, cert = self_signed("ual-durable-collector")
    steps = TenantSteps(knobs, cli_made_app(TENANT, client))
    makers = {
        "service principal": steps.create_service_principal,
        "certificate": lambda: steps.upload_certificate(cert_pem(cert)),
        "admin consent": steps.grant_admin_consent,
        "exchange role": steps.assign_exchange_role,
    }
    for name, make in makers.items():
        if name != step:
            make()
    outcome, detail, _ = _tenant(_doctor(knobs, client, b64(pfx(key, cert)), tmp_path))
    prefix = {"exchange role": "Exchange role:"}.get(step, f"{step}:")
    assert outcome == "failed" and detail.startswith(prefix), detail


def test_graph_alone_needs_no_exchange_role(knobs: Emulator, tmp_path: Path) -> None:
    client = str(uuid.uuid4())
    key, cert = self_signed("ual-durable-collector")
    steps = TenantSteps(knobs, cli_made_app(TENANT, client))
    steps.create_service_principal()
    steps.upload_certificate(cert_pem(cert))
    steps.grant_admin_consent()
    report = _doctor(knobs, client, b64(pfx(key, cert)), tmp_path, source="graph")
    outcome, detail, _ = _tenant(report)
    assert outcome == "ok" and "Exchange role" not in detail
    assert steps.missing() == ["exchange role"]


def test_an_unknown_app_is_named_as_the_registration(knobs: Emulator, tmp_path: Path) -> None:
    key, cert = self_signed("ual-durable-collector")
    outcome, detail, fix = _tenant(_doctor(knobs, str(uuid.uuid4()), b64(pfx(key, cert)), tmp_path, "graph"))
    assert outcome == "failed" and detail.startswith("app registration:") and "AADSTS700016" in detail
    assert "AUDIT_CLIENT_ID" in fix


def test_the_token_endpoint_answers_each_missing_step_as_entra_does(knobs: Emulator) -> None:
    """The raw answers the probe reads (m365_emulator/README.md, "Tenant steps", cites each)."""
    client = str(uuid.uuid4())
    secret = "tenant-steps-Secret~1"
    steps = TenantSteps(knobs, cli_made_app(TENANT, client))
    steps.app = dataclasses.replace(steps.app, client_secret=secret)
    steps.emulator.register_app(steps.app)
    url = f"{knobs.authority_host}/{TENANT}/oauth2/v2.0/token"
    form = {"grant_type": "client_credentials", "client_id": client, "client_secret": secret,
            "scope": "https://graph.microsoft.com/.default"}  # fmt: skip

    missing = requests.post(url, data=form, verify=knobs.ca_bundle, timeout=10)
    assert missing.status_code == 401 and missing.json()["error"] == "invalid_client"
    assert missing.json()["error_codes"] == [7000229]
    assert (
        f"The client application {client} is missing service principal in the tenant"
        in (missing.json()["error_description"])
    )

    steps.create_service_principal()
    unconsented = requests.post(url, data=form, verify=knobs.ca_bundle, timeout=10)
    assert unconsented.status_code == 200
    payload = unconsented.json()["access_token"].split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert "roles" not in claims  # Entra leaves the claim out when nothing is granted

    steps.grant_admin_consent()
    granted = requests.post(url, data=form, verify=knobs.ca_bundle, timeout=10).json()["access_token"]
    payload = granted.split(".")[1]
    assert json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["roles"] == [
        "AuditLogsQuery.Read.All"
    ]
