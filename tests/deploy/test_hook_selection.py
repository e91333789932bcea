"""azd picks each hook of ``azure.yaml`` by the OS it runs on; every OS gets a hook that azd accepts and can run.

The choice re-implements azure-dev's (``cli/azd/pkg/ext/hooks_manager.go`` ``filterConfigs``; ``models.go``
``HookConfig.validate``): on ``windows`` the hook's ``windows`` block replaces it when present, on ``linux`` and
``darwin`` its ``posix`` block; otherwise the top-level block stays, and ``validate`` refuses it without ``run``
("run is always required"). ``run`` names a file when one exists at that path under the project (``/`` turned into
the OS separator), else it is an inline script, which needs ``shell``; a file's shell, when not given, comes from its
extension (``.sh`` or ``.ps1``, anything else refused). Then azd runs a ``.ps1`` with ``pwsh <path>`` and, off
Windows, a ``sh`` file by executing its path (``pkg/tools/bash``, ``pkg/tools/powershell``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.conftest import REPO

IAC_PYTHON = REPO / ".venv-iac" / "bin" / "python"
OLD_AZURE_YAML_HOOKS = {"postprovision": {"posix": {"shell": "sh", "run": "bash infra/hooks/postprovision.sh"}}}


class HookConfigError(Exception):
    pass


def load_hooks(path: Path = REPO / "azure.yaml") -> dict[str, Any]:
    """azure.yaml's ``hooks`` (read with PyYAML from the infrastructure tools' venv, made by scripts/bootstrap.sh)."""
    if not IAC_PYTHON.exists():
        pytest.fail("the infrastructure tools are not installed: run bash scripts/bootstrap.sh (it makes .venv-iac)")
    code = "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))"
    done = subprocess.run([str(IAC_PYTHON), "-c", code, str(path)], capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout).get("hooks") or {})


def select(hooks: dict[str, Any], goos: str, project: Path = REPO) -> dict[str, dict[str, Any]]:
    """What azd on ``goos`` would run for each hook: its shell, and the script file or inline text."""
    chosen: dict[str, dict[str, Any]] = {}
    for name, configs in hooks.items():
        for config in configs if isinstance(configs, list) else [configs]:
            if goos == "windows" and config.get("windows"):
                config = config["windows"]
            elif goos in ("linux", "darwin") and config.get("posix"):
                config = config["posix"]
            run = config.get("run", "")
            if not run:
                raise HookConfigError(f"hook configuration for '{name}' is invalid, run is always required")
            shell = config.get("shell", "")
            path = project / run  # azd joins cwd and run with the OS separator; '/' works on both here
            if path.is_file():
                if not shell:
                    suffix = path.suffix
                    if suffix not in (".sh", ".ps1"):
                        raise HookConfigError(f"script with file extension '{suffix}' is not valid")
                    shell = "sh" if suffix == ".sh" else "pwsh"
                chosen[name] = {"shell": shell, "file": path, "inline": None}
            else:
                if not shell:
                    raise HookConfigError("unable to determine script type. Ensure 'Shell' parameter is set")
                chosen[name] = {"shell": shell, "file": None, "inline": run}
    return chosen


@pytest.mark.parametrize("goos", ["linux", "darwin"])
def test_posix_runs_the_bash_hook_as_an_executable_file(goos: str) -> None:
    hook = select(load_hooks(), goos)["postprovision"]
    assert hook["shell"] == "sh" and hook["file"] == REPO / "infra" / "hooks" / "postprovision.sh"
    # Off Windows azd executes the path itself: it needs its shebang and the executable bit, in git too.
    assert hook["file"].read_text(encoding="utf-8").startswith("#!/usr/bin/env bash\n")
    mode = subprocess.run(
        ["git", "ls-files", "-s", "infra/hooks/postprovision.sh"], capture_output=True, text=True, cwd=REPO, check=True
    ).stdout.split()[0]
    assert mode == "100755"


def test_windows_runs_the_powershell_hook() -> None:
    hook = select(load_hooks(), "windows")["postprovision"]
    assert hook["shell"] == "pwsh" and hook["file"] == REPO / "infra" / "hooks" / "postprovision.ps1"


def test_every_hook_is_valid_on_every_os() -> None:
    hooks = load_hooks()
    for goos in ("windows", "linux", "darwin"):
        assert set(select(hooks, goos)) == set(hooks)


def test_the_old_posix_only_hook_stops_azd_on_windows() -> None:
    """The check fails where azd failed: a posix-only hook has no `run` for Windows."""
    assert select(OLD_AZURE_YAML_HOOKS, "linux")["postprovision"]["inline"] == "bash infra/hooks/postprovision.sh"
    with pytest.raises(HookConfigError, match="run is always required"):
        select(OLD_AZURE_YAML_HOOKS, "windows")


def test_both_hooks_read_the_same_environment_and_print_the_same_steps() -> None:
    """The two scripts are kept in step: the same variables, knobs, az commands and messages the tests look for."""
    sh = (REPO / "infra" / "hooks" / "postprovision.sh").read_text(encoding="utf-8")
    ps1 = (REPO / "infra" / "hooks" / "postprovision.ps1").read_text(encoding="utf-8")
    names = {"AZURE_KEY_VAULT_NAME", "AUDIT_CERTIFICATE_NAME", "COLLECTOR_BUDGET_SECRET_NAME", "AZURE_FUNCTION_ID",
             "AZURE_TENANT_ID", "AZURE_SUBSCRIPTION_ID", "AZURE_PRINCIPAL_ID", "AUDIT_CLIENT_ID", "HOOK_ATTEMPTS",
             "HOOK_RETRY_SECONDS"}  # fmt: skip
    for command in ("keyvault certificate show", "keyvault certificate create", "keyvault secret show",
                    "keyvault secret set", "keyvault certificate download", "ad signed-in-user show"):  # fmt: skip
        assert command in sh and command in ps1, command
    for name in names:
        assert name in sh and name in ps1, name
    for text in ("not permitted yet", "nothing was written", "refusing to write", "tenant-setup"):
        assert text in sh and text in ps1, text
