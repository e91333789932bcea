"""Running the deployment's scripts (postprovision hooks, tenant set-up) against the fake ``az`` of ``fake_az.py``.

Each run copies the scripts into a throw-away project folder (they write ``.azure/<environment>/`` next to
``infra/``), puts an ``az`` that runs the fake first on ``PATH`` and gives the fake its state file. Both shells run
the same scenarios: ``bash`` for the ``.sh`` files, ``pwsh`` (PowerShell 7) for the ``.ps1`` files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
FAKE_AZ = Path(__file__).with_name("fake_az.py")
NO_POWERSHELL = (
    "neither pwsh nor dotnet is on this machine: PowerShell 7.6.10 installs as a .NET tool from NuGet (dotnet tool "
    "install --global PowerShell --version 7.6.10, what scripts/bootstrap.sh does where dotnet exists), and this "
    "machine's package registries (PyPI, Debian 12, npm) serve no .NET SDK and no PowerShell"
)


def find_pwsh() -> str | None:
    found = shutil.which("pwsh")
    if found:
        return found
    tool = Path.home() / ".dotnet" / "tools" / "pwsh"
    return str(tool) if tool.exists() else None


def powershell_or_skip() -> str:
    """pwsh's path; a skip only where neither pwsh nor dotnet exists (with dotnet, a missing pwsh is a failure)."""
    pwsh = find_pwsh()
    if pwsh:
        return pwsh
    if shutil.which("dotnet"):
        pytest.fail("dotnet is here but pwsh is not: run bash scripts/bootstrap.sh (it installs PowerShell 7.6.10)")
    pytest.skip(NO_POWERSHELL)


SHELLS = ("bash", "pwsh")


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    state: dict[str, Any]
    project: Path

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def calls(self, command: str) -> list[list[str]]:
        words = command.split()
        return [c for c in self.state["calls"] if c[: len(words)] == words]


@dataclass
class ScriptWorld:
    """A project folder with the scripts, a fake ``az`` and its state; ``run`` runs one script in one shell."""

    root: Path
    state: dict[str, Any]

    def run(self, shell: str, script: str, args: list[str] | None = None, env: dict[str, str] | None = None) -> Run:
        state_file = self.root / "az-state.json"
        state_file.write_text(json.dumps(self.state), "utf-8")
        bin_dir = self.root / "bin"
        bin_dir.mkdir(exist_ok=True)
        az = bin_dir / "az"
        az.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_AZ}" "$@"\n', "utf-8")
        az.chmod(0o755)
        full_env = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": os.environ.get("HOME", str(self.root)),
            "FAKE_AZ_STATE": str(state_file),
            "HOOK_RETRY_SECONDS": "0",
            "HOOK_ATTEMPTS": "3",
            **(env or {}),
        }
        path = self.root / script
        if shell == "bash":
            command = ["bash", str(path.with_suffix(".sh")), *(args or [])]
        else:
            command = [powershell_or_skip(), "-NoProfile", "-NonInteractive", "-File", str(path.with_suffix(".ps1")),
                       *(args or [])]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, env=full_env, cwd=self.root, timeout=120)
        return Run(done.returncode, done.stdout, done.stderr, json.loads(state_file.read_text("utf-8")), self.root)


@pytest.fixture
def script_world(tmp_path: Path) -> Callable[[dict[str, Any]], ScriptWorld]:
    def make(state: dict[str, Any]) -> ScriptWorld:
        root = tmp_path / "project"
        shutil.copytree(REPO / "infra" / "hooks", root / "infra" / "hooks")
        (root / "scripts").mkdir(parents=True)
        for name in ("tenant-setup.sh", "tenant-setup.ps1"):
            if (REPO / "scripts" / name).exists():
                shutil.copy2(REPO / "scripts" / name, root / "scripts" / name)
        return ScriptWorld(root, json.loads(json.dumps(state)))

    return make
