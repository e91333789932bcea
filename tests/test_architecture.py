"""The floor plan holds: no import circle anywhere, and each package imports only what its docstring allows.

Every import counts, wherever it is written: at module level, inside a function (a lazy import is still a
dependency) and under ``TYPE_CHECKING`` (a circle hidden from the interpreter is still a circle for the reader).
A package declares what it may import on a ``May import:`` line of its ``__init__`` docstring
(``docs/architecture.md`` draws the map); the test reads those lines, so the docstrings cannot drift from the code.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("shared", "activities", "orchestrators", "http_api", "durable_local", "m365_emulator", "collector_local")
ENTRY_MODULES = ("function_app",)
_ALLOWED_LINE = re.compile(r"^May import:(.*?)(?:\.\s*$|$)", re.M)


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the app's packages and entry modules under ``root``."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    for entry in ENTRY_MODULES:
        if (root / f"{entry}.py").exists():
            found[entry] = root / f"{entry}.py"
    return found


def imported_modules(source: str, known: Iterable[str]) -> set[str]:
    """The known modules ``source`` imports anywhere in it: ``import a.b``, ``from a import b`` (b a module or a
    name in ``a``), ``from a.b import c``. Relative imports are not used in the app."""
    names = set(known)
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if submodule in names:
                    found.add(submodule)  # ``from a import b`` with b a module: a dependency on b
                elif node.module in names:
                    found.add(node.module)  # a name defined in ``a`` (its __init__ for a package)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    files = module_files(root)
    return {name: imported_modules(path.read_text(encoding="utf-8"), files) - {name} for name, path in files.items()}


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(iter(children), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def unit_of(module: str, root: Path) -> str:
    """The package a module belongs to for the rules: ``shared.<sub>`` for a subpackage of ``shared``, ``shared`` for
    its top-level modules, else the top-level package (or the entry module)."""
    parts = module.split(".")
    if parts[0] == "shared" and len(parts) > 1 and (root / "shared" / parts[1]).is_dir():
        return f"shared.{parts[1]}"
    return parts[0]


def declared(root: Path, unit: str) -> set[str] | None:
    """What ``unit`` may import, from the ``May import:`` line of its docstring (None when it has none)."""
    path = root / (unit.replace(".", "/") + "/__init__.py")
    if not path.exists():
        path = root / f"{unit}.py"
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    match = _ALLOWED_LINE.search(docstring)
    if match is None:
        return None
    entries = {entry.strip() for entry in re.sub(r"\([^)]*\)", "", match.group(1)).split(",")}
    return entries - {"nothing outside itself", ""}


def allows(allowed: set[str], unit: str) -> bool:
    return unit in allowed or (unit.startswith("shared") and "shared.*" in allowed)


def violations(root: Path) -> list[str]:
    """Every import that crosses into a package its importer does not declare (or a package with no declaration)."""
    graph = import_graph(root)
    units = {unit_of(module, root) for module in graph}
    rules = {unit: declared(root, unit) for unit in units}
    found = [f"{unit}: no 'May import:' line in its docstring" for unit, rule in sorted(rules.items()) if rule is None]
    rules = {unit: rule or set() for unit, rule in rules.items()}
    known = units | {"shared.*"}
    found += [
        f"{unit} declares {sorted(rule - known)}: not packages"
        for unit, rule in sorted(rules.items())
        if rule and rule - known
    ]
    for module, targets in sorted(graph.items()):
        unit = unit_of(module, root)
        rule = rules[unit]
        for target in sorted(targets):
            other = unit_of(target, root)
            if rule is not None and other != unit and not allows(rule, other):
                found.append(f"{module} imports {target}: {unit} may import {sorted(rule) or 'nothing'}")
    return found


def test_no_import_circle_anywhere() -> None:
    assert circles(import_graph(ROOT)) == []


def test_each_package_imports_only_what_its_docstring_allows() -> None:
    assert violations(ROOT) == []


def test_the_deployed_app_never_imports_what_is_not_deployed() -> None:
    """``.funcignore`` leaves the local engine, the emulator and the local CLI out of the package Azure runs."""
    ignored = set((ROOT / ".funcignore").read_text(encoding="utf-8").split())
    local_only = {"durable_local", "m365_emulator", "collector_local"}
    assert local_only <= ignored
    graph = import_graph(ROOT)
    deployed = [m for m in graph if unit_of(m, ROOT).split(".")[0] not in local_only]
    assert [(m, t) for m in deployed for t in graph[m] if t.split(".")[0] in local_only] == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_circle_is_found_however_it_is_hidden(tmp_path: Path) -> None:
    """Lazy and TYPE_CHECKING imports close circles too, and ``from package import module`` is an edge to the module."""
    root = _tree(
        tmp_path,
        {
            "shared/__init__.py": "",
            "shared/a.py": "def f():\n    from shared.b import g\n    return g\n",
            "shared/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from shared.a import f\n",
            "shared/c.py": "from shared import d\n",
            "shared/d.py": "import shared.e\n",
            "shared/e.py": "from shared.c import x\n",
            "shared/f.py": "from shared import a, c\n",
        },
    )
    assert circles(import_graph(root)) == [["shared.a", "shared.b"], ["shared.c", "shared.d", "shared.e"]]


def test_an_import_a_package_does_not_declare_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "shared/__init__.py": '"""Core.\n\nMay import: shared.window.\n"""\n',
            "shared/window/__init__.py": '"""The window.\n\nMay import: shared.\n"""\n',
            "shared/window/machine.py": "from shared import names\n",
            "shared/names.py": "import activities.bodies\n",
            "activities/__init__.py": '"""Activities.\n\nMay import: shared.*, orchestrators.\n"""\n',
            "activities/bodies.py": "from shared.window.machine import Window\n",
            "orchestrators/__init__.py": '"""No declaration."""\n',
        },
    )
    assert violations(root) == [
        "orchestrators: no 'May import:' line in its docstring",
        "shared.names imports activities.bodies: shared may import ['shared.window']",
    ]


def test_the_architecture_page_lists_every_package_with_what_it_may_import() -> None:
    """``docs/architecture.md``'s map: one row per package, its ``May import`` cell equal to the docstring's."""
    rows: dict[str, set[str]] = {}
    for line in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and re.fullmatch(r"`[a-z0-9_.]+`", cells[0]):
            rows[cells[0].strip("`")] = set(re.findall(r"`([a-z0-9_.*]+)`", cells[2]))
    units = {unit_of(module, ROOT) for module in import_graph(ROOT)}
    assert sorted(rows) == sorted(units)
    assert {unit: rows[unit] for unit in units} == {unit: declared(ROOT, unit) for unit in units}


def package_graph(root: Path) -> dict[str, set[str]]:
    """Which package imports which (``unit_of``), from the module graph."""
    graph: dict[str, set[str]] = {}
    for module, targets in import_graph(root).items():
        unit = unit_of(module, root)
        others = {unit_of(target, root) for target in targets}
        graph.setdefault(unit, set()).update(others - {unit})
    return graph


def test_packages_form_no_circle_but_the_known_one() -> None:
    """The shared value types (``shared.values``, importing nothing of the project) ended the circles ``shared.audit``
    <-> ``shared.records`` and ``shared`` (models, settings) <-> ``shared.audit``. What remains is the settings object
    building the budget's options and reading the hosting plan while those packages use the vocabulary: a new
    circle between packages fails here."""
    assert circles(package_graph(ROOT)) == [["shared", "shared.budget", "shared.hosting"]]


COLLECTOR = frozenset({"shared", "activities", "orchestrators", "http_api", "collector_local", "function_app"})
"""The collector's code (the emulator serves the audit APIs: it is not a client of sources)."""
REGISTRIES = frozenset({"shared/sources/registry.py", "shared/doctor/sources.py"})
"""Where sources are registered by name (one line each): the only files besides a source's own that may name one."""


def source_names() -> tuple[str, ...]:
    from shared.sources.registry import SOURCES

    return tuple(SOURCES)


def owned_by(path: Path, root: Path, name: str) -> bool:
    """A source's own files: its package (``shared/sources/<name>/``) and the modules named for it (``<name>.py``,
    ``<name>_*.py`` in any package: its adapter, activities, doctor probes)."""
    relative = path.relative_to(root)
    return name in relative.parts[:-1] or path.stem == name or path.stem.startswith(f"{name}_")


def _names_in(node: ast.AST, names: frozenset[str]) -> list[str]:
    """Source names an operand holds: a string constant, or the constants of a tuple, list or set literal."""
    values = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [v.value for v in values if isinstance(v, ast.Constant) and v.value in names]


def source_branches(root: Path, names: Iterable[str]) -> list[str]:
    """Every place outside a source's own files and the registries that decides by a source's name: a comparison with
    it (``== "graph"``, ``source != "exchange"``, ``in ("graph", ...)``), a lookup in a dict literal keyed by it, a
    ``case "graph":``."""
    wanted = frozenset(names)
    found: list[str] = []
    for module, path in sorted(module_files(root).items()):
        relative = path.relative_to(root).as_posix()
        if module.split(".")[0] not in COLLECTOR or relative in REGISTRIES:
            continue
        if any(owned_by(path, root, name) for name in wanted):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            hits: list[str] = []
            if isinstance(node, ast.Compare):
                for operand in (node.left, *node.comparators):
                    hits += _names_in(operand, wanted)
            elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict):
                hits += [k.value for k in node.value.keys if isinstance(k, ast.Constant) and k.value in wanted]
            elif isinstance(node, ast.MatchValue):
                hits += _names_in(node.value, wanted)
            if hits:
                found.append(f"{relative}:{getattr(node, 'lineno', '?')} decides by the source name {hits[0]!r}")
    return found


def test_nothing_outside_a_source_decides_by_its_name() -> None:
    """A source is one object (``shared.sources``): the window, the request rules, the reports, the doctor and the
    starters ask it; none of them compares a source's name (a new source would silently get another's behaviour)."""
    assert source_branches(ROOT, source_names()) == []


def test_a_planted_source_branch_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "shared/__init__.py": "",
            "shared/window/machine.py": 'def phase(spec):\n    return "submit" if spec.source == "graph" else "x"\n',
            "shared/settings.py": 'def cap(s, source):\n    return 1 if source != "exchange" else 3\n',
            "http_api/plan.py": 'def f(source):\n    return source in ("graph", "other")\n',
            "http_api/pick.py": 'def g(source):\n    return {"graph": 1, "exchange": 2}[source]\n',
            "collector_local/run.py": 'def h(source):\n    match source:\n        case "exchange":\n            pass\n',
            "shared/sources/graph/lanes.py": 'def ok(phase):\n    return phase == "graph"\n',
            "activities/exchange_calls.py": 'def ok(source):\n    return source == "exchange"\n',
            "shared/sources/registry.py": 'def ok(name):\n    return name == "graph"\n',
            "shared/names.py": 'GRAPH = "graph"\nKEYS = {"graph": 1}\n',
        },
    )
    assert source_branches(root, ("graph", "exchange")) == [
        "collector_local/run.py:3 decides by the source name 'exchange'",
        "http_api/pick.py:2 decides by the source name 'graph'",
        "http_api/plan.py:2 decides by the source name 'graph'",
        "shared/settings.py:2 decides by the source name 'exchange'",
        "shared/window/machine.py:2 decides by the source name 'graph'",
    ]


def test_the_names_below_the_registry_are_the_registry_s() -> None:
    """``shared.models.SOURCES`` (what the layers below ``shared.sources`` accept: budget keys, the default source) and
    the settings' budget capacities name exactly the registered sources, as do the doctor's."""
    from shared.doctor.sources import DOCTORS
    from shared.models import SOURCES
    from shared.settings import Settings

    assert source_names() == SOURCES
    assert tuple(Settings().budget_capacities) == source_names()
    assert tuple(doctor.name for doctor in DOCTORS) == source_names()
