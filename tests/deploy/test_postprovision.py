"""The postprovision hooks (bash and PowerShell) write the audit certificate and the budget key only on an explicit
NotFound: a 403 while roles propagate is waited out (bounded), a network error or an unknown error stops the hook
with nothing written, and a wrong signed-in account is refused before Key Vault is asked anything."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.deploy.conftest import SHELLS, Run, ScriptWorld

TENANT = "11111111-1111-1111-1111-111111111111"
SUBSCRIPTION = "22222222-2222-2222-2222-222222222222"
DEPLOYER = "33333333-3333-3333-3333-333333333333"
CERT, SECRET = "ual-audit", "collector-budget-secret"

HOOK_ENV = {
    "AZURE_ENV_NAME": "test",
    "AZURE_KEY_VAULT_NAME": "kv-test",
    "AUDIT_CERTIFICATE_NAME": CERT,
    "COLLECTOR_BUDGET_SECRET_NAME": SECRET,
    "AZURE_FUNCTION_ID": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-test/providers/Microsoft.Web/sites/func-x",
    "AZURE_FUNCTION_NAME": "func-x",
    "AZURE_FUNCTION_URL": "https://func-x.azurewebsites.net",
    "AZURE_TENANT_ID": TENANT,
    "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION,
    "AZURE_PRINCIPAL_ID": DEPLOYER,
    "AZURE_RESOURCE_GROUP": "rg-test",
    "AUDIT_CLIENT_ID": "44444444-4444-4444-4444-444444444444",
}


def _state(*, cert: bool = False, secret: bool = False, script: dict[str, list[str]] | None = None) -> dict[str, Any]:
    return {
        "account": {"tenantId": TENANT, "id": SUBSCRIPTION, "user": {"name": "ops@contoso.com", "type": "user"}},
        "signed_in_object_id": DEPLOYER,
        "vault": {
            "certificates": {CERT: {"versions": 1, "thumbprint": "AB" * 20}} if cert else {},
            "secrets": {SECRET: {"versions": 1}} if secret else {},
        },
        "script": script or {},
    }


World = Callable[[dict[str, Any]], ScriptWorld]


def _hook(world: World, shell: str, state: dict[str, Any], **env: str) -> Run:
    return world(state).run(shell, "infra/hooks/postprovision", env={**HOOK_ENV, **env})


def _versions(run: Run) -> tuple[int, int]:
    vault = run.state["vault"]
    return (vault["certificates"].get(CERT, {}).get("versions", 0), vault["secrets"].get(SECRET, {}).get("versions", 0))


@pytest.mark.parametrize("shell", SHELLS)
def test_an_empty_vault_gets_one_certificate_and_one_budget_key(script_world: World, shell: str) -> None:
    run = _hook(script_world, shell, _state())
    assert run.code == 0, run.output
    assert _versions(run) == (1, 1)
    assert run.state["vault"]["secrets"][SECRET]["length"] == 64  # 32 random bytes as hex
    assert not any(re.search(r"\b[0-9a-f]{64}\b", " ".join(call)) for call in run.state["calls"])  # never on a line
    assert (run.project / ".azure" / "test" / f"{CERT}.pem").exists()
    assert "tenant-setup" in run.stdout and HOOK_ENV["AUDIT_CLIENT_ID"] in run.stdout


@pytest.mark.parametrize("shell", SHELLS)
def test_what_the_vault_holds_is_kept(script_world: World, shell: str) -> None:
    run = _hook(script_world, shell, _state(cert=True, secret=True))
    assert run.code == 0, run.output
    assert _versions(run) == (1, 1)
    assert run.calls("keyvault certificate create") == [] and run.calls("keyvault secret set") == []
    assert "already holds the audit certificate" in run.stdout and "already holds the tenant budget key" in run.stdout


@pytest.mark.parametrize("shell", SHELLS)
def test_a_403_while_roles_propagate_is_waited_out_and_nothing_is_overwritten(script_world: World, shell: str) -> None:
    """Both items exist; Key Vault refuses the first reads (the deployer's new role is not applied yet). The old hook
    took the refusal for "absent" and created a new certificate version and a new budget key."""
    state = _state(cert=True, secret=True, script={
        "keyvault certificate show": ["forbidden", "forbidden"], "keyvault secret show": ["forbidden"]})  # fmt: skip
    run = _hook(script_world, shell, state)
    assert run.code == 0, run.output
    assert _versions(run) == (1, 1)
    assert run.calls("keyvault certificate create") == [] and run.calls("keyvault secret set") == []
    assert "not permitted yet" in run.stdout


@pytest.mark.parametrize("shell", SHELLS)
def test_a_403_that_never_ends_stops_the_hook_with_nothing_written(script_world: World, shell: str) -> None:
    state = _state(script={"keyvault certificate show": ["forbidden"] * 3})
    run = _hook(script_world, shell, state)
    assert run.code == 1
    assert _versions(run) == (0, 0)
    assert len(run.calls("keyvault certificate show")) == 3  # HOOK_ATTEMPTS, then it stops
    assert "still refused (403) after 3 tries" in run.stderr and "nothing was written" in run.stderr
    assert "Key Vault Certificates Officer" in run.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_a_network_error_is_not_taken_for_absence(script_world: World, shell: str) -> None:
    run = _hook(script_world, shell, _state(cert=True, secret=True, script={"keyvault certificate show": ["network"]}))
    assert run.code == 1
    assert _versions(run) == (1, 1)
    assert run.calls("keyvault certificate create") == [] and run.calls("keyvault secret set") == []
    assert "nothing was written" in run.stderr and "Failed to resolve" in run.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_a_network_error_on_the_budget_key_keeps_the_running_collections_key(script_world: World, shell: str) -> None:
    run = _hook(script_world, shell, _state(cert=True, secret=True, script={"keyvault secret show": ["network"]}))
    assert run.code == 1
    assert _versions(run) == (1, 1)
    assert run.calls("keyvault secret set") == []
    assert "reading the budget key" in run.stderr and "nothing was written" in run.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_a_vault_closed_to_this_network_stops_at_once_and_says_how_to_reach_it(script_world: World, shell: str) -> None:
    """vnetEnabled closes the vault to public networks: its 403 is not a role still propagating, so no waiting."""
    run = _hook(script_world, shell, _state(cert=True, secret=True, script={"keyvault certificate show": ["closed"]}))
    assert run.code == 1
    assert len(run.calls("keyvault certificate show")) == 1
    assert run.calls("keyvault certificate create") == [] and run.calls("keyvault secret set") == []
    assert "refuses this machine's network" in run.stderr and "az keyvault network-rule add" in run.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_a_403_on_create_is_retried_and_creates_once(script_world: World, shell: str) -> None:
    run = _hook(script_world, shell, _state(secret=True, script={"keyvault certificate create": ["forbidden"]}))
    assert run.code == 0, run.output
    assert _versions(run) == (1, 1)
    assert len(run.calls("keyvault certificate create")) == 2


@pytest.mark.parametrize("shell", SHELLS)
def test_another_signed_in_principal_is_refused_before_the_vault_is_asked(script_world: World, shell: str) -> None:
    state = _state()
    state["signed_in_object_id"] = "99999999-9999-9999-9999-999999999999"
    run = _hook(script_world, shell, state)
    assert run.code == 1
    assert _versions(run) == (0, 0)
    assert run.calls("keyvault") == []
    assert "refusing to write to kv-test" in run.stderr and DEPLOYER in run.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_another_subscription_is_refused(script_world: World, shell: str) -> None:
    state = _state()
    state["account"]["id"] = "55555555-5555-5555-5555-555555555555"
    run = _hook(script_world, shell, state)
    assert run.code == 1
    assert run.calls("keyvault") == []
    assert "refusing to touch its Key Vault" in run.stderr and f"az account set --subscription {SUBSCRIPTION}" in (
        run.stderr
    )


@pytest.mark.parametrize("shell", SHELLS)
def test_a_pipeline_principal_is_checked_by_its_service_principal(script_world: World, shell: str) -> None:
    state = _state()
    state["account"]["user"] = {"name": "app-id-of-pipeline", "type": "servicePrincipal"}
    state["tenant"] = {"service_principals": {"app-id-of-pipeline": {"id": DEPLOYER}}}
    run = _hook(script_world, shell, state)
    assert run.code == 0, run.output
    assert _versions(run) == (1, 1)


@pytest.mark.parametrize("shell", SHELLS)
def test_an_unknown_principal_is_refused(script_world: World, shell: str) -> None:
    state = _state()
    state["script"] = {"ad signed-in-user show": ["network"]}
    run = _hook(script_world, shell, state)
    assert run.code == 1
    assert run.calls("keyvault") == []
    assert "cannot tell which principal" in run.stderr


@pytest.mark.parametrize("shell", SHELLS)
def test_without_an_app_registration_the_hook_says_how_to_make_one(script_world: World, shell: str) -> None:
    run = _hook(script_world, shell, _state(cert=True, secret=True), AUDIT_CLIENT_ID="")
    assert run.code == 0, run.output
    assert "az ad app create" in run.stdout and "azd env set AUDIT_CLIENT_ID" in run.stdout
