"""Every PowerShell script parses, and none assigns a PowerShell automatic variable: checks that run with or without
pwsh (where pwsh exists, the behaviour tests run the scripts themselves: test_postprovision.py, test_tenant_setup.py).

The parser is tree-sitter's PowerShell grammar (PyPI ``tree-sitter-powershell``); a syntax error shows as an
``ERROR`` or missing node. Automatic variables (``$HOME``, ``$Host``, ``$Input``…) are read-only or overwritten by
PowerShell itself, and names are case-insensitive: ``$home = $true`` stops a script ("Cannot overwrite variable HOME
because it is read-only or constant").
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tree_sitter_powershell
from tree_sitter import Language, Node, Parser

from tests.deploy.conftest import REPO

SCRIPTS = sorted([*REPO.glob("infra/**/*.ps1"), *REPO.glob("scripts/*.ps1")])
AUTOMATIC = ("args", "error", "home", "host", "input", "lastexitcode", "matches", "myinvocation", "null", "pid",
             "psitem", "psscriptroot", "pscommandpath", "pwd", "true", "false", "_")  # fmt: skip
_ASSIGNED = re.compile(r"^\s*\$(?:script:|global:)?(" + "|".join(AUTOMATIC) + r")\s*(?:[-+*/]?=)(?!=)", re.I | re.M)


def _problems(node: Node) -> list[str]:
    found = []
    if node.type == "ERROR" or node.is_missing:
        found.append(f"line {node.start_point[0] + 1}: {node.text.decode(errors='replace')[:80]!r}")
    for child in node.children:
        found += _problems(child)
    return found


def test_the_scripts_are_found() -> None:
    names = {p.relative_to(REPO).as_posix() for p in SCRIPTS}
    assert {"infra/hooks/postprovision.ps1", "scripts/tenant-setup.ps1"} <= names


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_the_script_parses(path: Path) -> None:
    tree = Parser(Language(tree_sitter_powershell.language())).parse(path.read_bytes())
    assert _problems(tree.root_node) == []


def test_a_syntax_error_is_seen() -> None:
    tree = Parser(Language(tree_sitter_powershell.language())).parse(b"if ($x -eq 1 { 'a' }\n")
    assert _problems(tree.root_node) != []


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_no_automatic_variable_is_assigned(path: Path) -> None:
    assert _ASSIGNED.findall(path.read_text(encoding="utf-8")) == []


def test_an_assigned_automatic_variable_is_seen() -> None:
    assert _ASSIGNED.findall("if ($ok) {\n    $home = $true\n}\n$x = 1\n") == ["home"]
