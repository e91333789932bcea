"""scripts/tenant-setup (bash and PowerShell) does the tenant steps against a fake ``az``: it creates the service
principal only on NotFound, uploads the certificate once, grants the API permission by a Graph appRoleAssignment
(or prints the admin consent link when the operator may not), prints the Exchange role commands, and a re-run
changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization

from tests.deploy.conftest import SHELLS, Run, ScriptWorld
from tests.support.certs import self_signed

TENANT = "11111111-1111-1111-1111-111111111111"
APP = "44444444-4444-4444-4444-444444444444"
GRAPH_API, EXCHANGE_API = "00000003-0000-0000-c000-000000000000", "00000002-0000-0ff1-ce00-000000000000"
MANAGEMENT_API = "c5393580-f805-4401-95e8-94b7a6ef2fc2"  # Office 365 Management APIs
GRAPH_ROLE, EXCHANGE_ROLE = "e5a5f8a4-0000-4000-8000-00000000a001", "dc50a0fb-0000-4000-8000-00000000a002"
FEED_ROLE = "594c1fb6-0000-4000-8000-00000000a003"

World = Callable[[dict[str, Any]], ScriptWorld]


def _state(thumbprint: str, **tenant: Any) -> dict[str, Any]:
    return {
        "account": {"tenantId": TENANT, "id": "sub", "user": {"name": "admin@contoso.com", "type": "user"}},
        "pem_thumbprint": thumbprint,
        "tenant": {
            "apps": {APP: {}},
            "service_principals": {
                GRAPH_API: {"id": "graph-sp", "appRoles": [{"value": "AuditLogsQuery.Read.All", "id": GRAPH_ROLE}]},
                EXCHANGE_API: {"id": "exo-sp", "appRoles": [{"value": "Exchange.ManageAsApp", "id": EXCHANGE_ROLE}]},
                MANAGEMENT_API: {"id": "o365-sp", "appRoles": [{"value": "ActivityFeed.Read", "id": FEED_ROLE}]},
            },
            **tenant,
        },
    }


@pytest.fixture
def pem(tmp_path: Path) -> tuple[Path, str]:
    _, cert = self_signed("ual-durable-collector")
    path = tmp_path / "ual-audit.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path, cert.fingerprint(hashes.SHA1()).hex().upper()


def _setup(world: ScriptWorld, shell: str, pem_path: Path, source: str = "graph") -> Run:
    args = ["--app-id", APP, "--cert", str(pem_path), "--source", source]
    if shell == "pwsh":
        args = ["-AppId", APP, "-Cert", str(pem_path), "-Source", source]
    return world.run(shell, "scripts/tenant-setup", args)


@pytest.mark.parametrize("shell", SHELLS)
def test_a_cli_made_app_gets_its_service_principal_certificate_and_permission(
    script_world: World, shell: str, pem: tuple[Path, str]
) -> None:
    world = script_world(_state(pem[1]))
    run = _setup(world, shell, pem[0])
    assert run.code == 0, run.output
    sp = run.state["tenant"]["service_principals"][APP]["id"]
    assert run.state["tenant"]["apps"][APP]["keyCredentials"] == [pem[1]]
    assert run.state["tenant"]["app_role_assignments"][sp] == [
        {"id": "a0", "principalId": sp, "resourceId": "graph-sp", "appRoleId": GRAPH_ROLE}
    ]
    assert run.state["tenant"]["apps"][APP]["requiredResourceAccess"] == [
        {"resourceAppId": GRAPH_API, "resourceAccess": [{"id": GRAPH_ROLE, "type": "Role"}]}
    ]
    assert "service principal: created" in run.stdout and "Done." in run.stdout
    assert run.calls("ad app permission admin-consent") == []  # azure-cli #12797, #18603

    world.state = run.state | {"calls": []}
    again = _setup(world, shell, pem[0])
    assert again.code == 0, again.output
    assert again.calls("ad sp create") == [] and again.calls("ad app credential reset") == []
    assert [c for c in again.calls("rest") if "post" in c] == []
    assert "granted already" in again.stdout and "uploaded already" in again.stdout


@pytest.mark.parametrize("shell", SHELLS)
def test_an_unreadable_service_principal_is_not_created_again(
    script_world: World, shell: str, pem: tuple[Path, str]
) -> None:
    state = _state(pem[1])
    state["script"] = {"ad sp show": ["network"]}
    run = _setup(script_world(state), shell, pem[0])
    assert run.code == 1
    assert run.calls("ad sp create") == []
    assert "nothing was created" in run.stderr and "Failed to resolve" in run.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_an_operator_who_may_not_grant_gets_the_admin_consent_link(
    script_world: World, shell: str, pem: tuple[Path, str]
) -> None:
    run = _setup(script_world(_state(pem[1], operator_may_grant=False)), shell, pem[0])
    assert run.code == 1
    assert f"https://login.microsoftonline.com/{TENANT}/adminconsent?client_id={APP}" in run.stdout
    assert "Left to do:" in run.stdout and "Privileged Role Administrator" in run.stdout
    assert "service principal: created" in run.stdout  # the steps it could do are done


@pytest.mark.parametrize("shell", SHELLS)
def test_exchange_gets_manage_as_app_and_the_role_commands(
    script_world: World, shell: str, pem: tuple[Path, str]
) -> None:
    state = _state(pem[1])
    state["tenant"]["service_principals"][APP] = {"id": "collector-sp", "appRoles": []}
    run = _setup(script_world(state), shell, pem[0], source="exchange")
    assert run.code == 0, run.output
    assert run.state["tenant"]["app_role_assignments"]["collector-sp"][0]["appRoleId"] == EXCHANGE_ROLE
    assert "service principal: found (collector-sp)" in run.stdout
    assert f"New-ServicePrincipal -AppId {APP} -ObjectId collector-sp" in run.stdout
    assert 'New-ManagementRoleAssignment -App collector-sp -Role "View-Only Audit Logs"' in run.stdout
    assert run.calls("ad sp create") == []


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(("source", "roles"), [("feed", [FEED_ROLE]), ("all", [GRAPH_ROLE, EXCHANGE_ROLE, FEED_ROLE])])
def test_the_feed_gets_activity_feed_read_alone_or_with_the_others(
    script_world: World, shell: str, pem: tuple[Path, str], source: str, roles: list[str]
) -> None:
    """A follower reads the Management Activity API only with ActivityFeed.Read of the Office 365 Management APIs."""
    state = _state(pem[1])
    state["tenant"]["service_principals"][APP] = {"id": "collector-sp", "appRoles": []}
    run = _setup(script_world(state), shell, pem[0], source=source)
    assert run.code == 0, run.output
    granted = [a["appRoleId"] for a in run.state["tenant"]["app_role_assignments"]["collector-sp"]]
    assert sorted(granted) == sorted(roles)
    assert ("New-ManagementRoleAssignment" in run.stdout) == (source == "all")  # the Exchange role only with Exchange
