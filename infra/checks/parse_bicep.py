"""Parse every Bicep file under a folder with pycep-parser, offline (the Bicep CLI downloads a binary), and apply the
rules of ``az bicep build`` this repository relies on: a module receives exactly the parameters it declares (all
required ones, no unknown one), and no parameter or variable is declared but never used (the Bicep linter's
no-unused-params and no-unused-vars, errors here: a parameter left unused usually means the app setting that carried
it was dropped).

Run with the infrastructure tools' interpreter: ``.venv-iac/bin/python infra/checks/parse_bicep.py infra``.
``--json FILE`` prints one file's parsed tree instead (the settings-drift test reads it).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from pycep import BicepParser

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _referenced(node: Any, found: set[str]) -> None:
    """Every identifier-like word in values (and interpolated keys), decorators' texts left out."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "decorators":
                continue
            if isinstance(key, str) and "${" in key:
                found.update(_IDENTIFIER.findall(key))
            _referenced(value, found)
    elif isinstance(node, list):
        for item in node:
            _referenced(item, found)
    elif isinstance(node, str):
        found.update(_IDENTIFIER.findall(node))


def _unused(tree: dict[str, Any]) -> list[str]:
    problems = []
    for kind in ("parameters", "variables"):
        for name in tree.get(kind) or {}:
            others = {key: value for key, value in tree.items() if key != kind}
            others[kind] = {key: value for key, value in (tree.get(kind) or {}).items() if key != name}
            used: set[str] = set()
            _referenced(others, used)
            if name not in used:
                problems.append(f"{kind[:-1]} {name!r} is declared but never used")
    return problems


def _module_problems(path: Path, tree: dict[str, Any], parser: BicepParser) -> list[str]:
    problems = []
    for name, module in (tree.get("modules") or {}).items():
        detail = module.get("detail") or {}
        if module.get("type") != "local":
            problems.append(f"module {name!r}: only local modules are checked here; keep the template self-contained")
            continue
        target = path.parent / detail["path"]
        if not target.exists():
            problems.append(f"module {name!r}: {target} does not exist")
            continue
        declared = parser.parse(file_path=target).get("parameters") or {}
        passed = set((module.get("config") or {}).get("params") or {})
        required = {p for p, spec in declared.items() if "default" not in spec}
        problems += [
            f"module {name!r}: parameter {p!r} is required by {target.name} but not passed"
            for p in sorted(required - passed)
        ]
        problems += [
            f"module {name!r}: {target.name} declares no parameter {p!r}" for p in sorted(passed - set(declared))
        ]
    return problems


def check(folder: Path) -> list[str]:
    parser = BicepParser()
    files = sorted(folder.rglob("*.bicep"))
    if not files:
        return [f"no .bicep file under {folder}"]
    problems = []
    for path in files:
        try:
            tree = parser.parse(file_path=path)
        except Exception as exc:  # lark's errors, pycep's ValueError: any is a parse failure
            problems.append(f"{path}: does not parse: {str(exc).splitlines()[0]}")
            continue
        problems += [f"{path}: {p}" for p in _unused(tree) + _module_problems(path, tree, parser)]
    return problems


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--json":
        print(json.dumps(BicepParser().parse(file_path=Path(argv[1])), default=str))
        return 0
    folder = Path(argv[0] if argv else "infra")
    problems = check(folder)
    for problem in problems:
        print(problem, file=sys.stderr)
    count = len(list(folder.rglob("*.bicep")))
    print(f"bicep: {count} file(s) parsed, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
