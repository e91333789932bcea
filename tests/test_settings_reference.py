"""docs/settings.md is the reference of every app setting, and it cannot drift from the code either way.

- every name ``Settings.from_env`` reads (found in ``shared/settings.py`` by its syntax, and checked against what a
  recording environment sees it ask for) is in a table of the reference, and so are the platform variables it reads
  to know where it runs;
- every name the rest of the app reads from an environment by a literal name (the local host's, for instance), and
  every host-level setting the app knows of (``HOST_SETTINGS``), is in the reference;
- every name in the reference's tables is a string the app's code holds (or, for the host's own settings, one the
  deployment template in ``infra/`` or ``host.json`` names): a setting removed from the code fails its stale row.

The app's packages are scanned as source text (``rglob``), never imported, so moving modules does not break this test;
only ``shared.settings`` is imported.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import shared.settings
from shared.settings import PLATFORM_SETTINGS, Settings
from tests.support.recording_env import RecordingEnv

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "docs" / "settings.md"
APP_PACKAGES: tuple[str, ...] = ("shared", "activities", "orchestrators", "http_api", "collector_local")
APP_PACKAGES += ("durable_local", "m365_emulator")
HOST_FILES = ("host.json",)
SETTING_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
ENVIRONMENTS = frozenset({"environ", "env", "_env"})
"""Names an environment mapping goes by in the app's code (``os.environ``, ``env``, ``self._env``)."""


def _app_files() -> list[Path]:
    files = [REPO / "function_app.py"]
    for package in APP_PACKAGES:
        files.extend(sorted((REPO / package).rglob("*.py")))
    return files


def _module_constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "text"`` assignments."""
    constants: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    constants[target.id] = node.value.value
    return constants


def _text(node: ast.expr, constants: dict[str, str]) -> str | None:
    """The string an expression always is: a literal, a module constant, or an f-string of those; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                if value.conversion != -1 or value.format_spec is not None:
                    return None
                part = _text(value.value, constants)
            else:
                part = _text(value, constants)
            if part is None:
                return None
            parts.append(part)
        return "".join(parts)
    return None


def _parsed_app() -> Iterator[tuple[Path, ast.Module, dict[str, str]]]:
    for path in _app_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        yield path, tree, _module_constants(tree)


def _documented() -> dict[str, int]:
    """Each name in the first column of the reference's tables, with the line it is on."""
    found: dict[str, int] = {}
    for number, line in enumerate(REFERENCE.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("|"):
            for name in re.findall(r"`([^`]+)`", line.split("|")[1]):
                found.setdefault(name, number)
    return found


def _read_by_settings() -> set[str]:
    """The first argument of every ``reader.<kind>(NAME, ...)`` call in ``shared/settings.py``."""
    source = Path(shared.settings.__file__)
    tree = ast.parse(source.read_text(encoding="utf-8"))
    constants = _module_constants(tree)
    names: set[str] = set()
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "reader"
        ):
            continue
        name = _text(node.args[0], constants) if node.args else None
        assert name is not None, f"{source.name}:{node.lineno}: a setting read by a name this test cannot resolve"
        names.add(name)
    return names


def _receiver(node: ast.expr) -> str | None:
    """The last name of what a method is called on or subscripted: ``environ`` for ``os.environ``."""
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def _environment_key(node: ast.AST) -> ast.expr | None:
    """The name expression of an environment read: ``env.get(K)``, ``os.environ.setdefault(K)``, ``os.getenv(K)``,
    ``environ[K]``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        method, receiver = node.func.attr, _receiver(node.func.value)
        reads = method == "getenv" or (method in ("get", "setdefault", "pop") and receiver in ENVIRONMENTS)
        return node.args[0] if reads else None
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _receiver(node.value) in ENVIRONMENTS:
        return node.slice
    return None


def _environment_reads() -> dict[str, str]:
    """Names the app reads from an environment mapping by a literal name, each with where (first seen)."""
    reads: dict[str, str] = {}
    for path, tree, constants in _parsed_app():
        for node in ast.walk(tree):
            key = _environment_key(node)
            name = _text(key, constants) if key is not None else None
            if key is not None and name is not None:
                reads.setdefault(name, f"{path.relative_to(REPO)}:{key.lineno}")
    return reads


def _host_settings() -> set[str]:
    """The strings of the app's one module-level ``HOST_SETTINGS`` (the host's, worker's and libraries' settings)."""
    found: list[set[str]] = []
    for _, tree, constants in _parsed_app():
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "HOST_SETTINGS" for t in node.targets
            ):
                texts = {_text(n, constants) for n in ast.walk(node.value) if isinstance(n, ast.expr)}
                found.append({t for t in texts if t is not None and SETTING_NAME.fullmatch(t)})
    assert len(found) == 1, f"expected one module-level HOST_SETTINGS in the app, found {len(found)}"
    return found[0]


def _app_strings() -> set[str]:
    """Every string the app's code holds (literals, and f-strings of constants), docstrings left out."""
    strings: set[str] = set()
    for _, tree, constants in _parsed_app():
        docstrings = {
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant | ast.JoinedStr) and id(node) not in docstrings:
                text = _text(node, constants)
                if text is not None:
                    strings.add(text)
    return strings


def _host_texts() -> str:
    paths = [*sorted((REPO / "infra").rglob("*.bicep")), *(REPO / name for name in HOST_FILES)]
    return "\n".join(path.read_text(encoding="utf-8") for path in paths)


def test_the_reference_lists_only_setting_names() -> None:
    documented = _documented()
    assert len(documented) > 40, "the reference's tables hold (almost) no settings: was the page reshaped?"
    malformed = sorted(
        f"{name!r} (line {line})" for name, line in documented.items() if not SETTING_NAME.fullmatch(name)
    )
    assert malformed == [], f"docs/settings.md: a table's first column names what is not a setting: {malformed}"


def test_the_settings_read_are_found_by_their_syntax() -> None:
    """The syntax scan finds exactly what ``Settings.from_env`` asks for (besides the platform's variables)."""
    env = RecordingEnv()
    Settings.from_env(env)
    scanned = _read_by_settings()
    assert scanned, "no reader.<kind>(NAME) calls found in shared/settings.py: its structure changed"
    assert sorted(env.asked - set(PLATFORM_SETTINGS) - scanned) == [], "read at run time but not found by the scan"
    assert sorted(scanned - env.asked) == [], "found by the scan but not read at run time"


def test_every_setting_the_app_reads_is_in_the_reference() -> None:
    documented = _documented()
    missing = sorted((_read_by_settings() | set(PLATFORM_SETTINGS)) - set(documented))
    assert missing == [], f"read by shared/settings.py but missing from the tables of docs/settings.md: {missing}"


def test_every_other_environment_read_and_host_setting_is_in_the_reference() -> None:
    documented = set(_documented())
    reads = _environment_reads()
    missing = sorted(f"{name} ({where})" for name, where in reads.items() if name not in documented)
    assert missing == [], f"read from the environment by the app but missing from docs/settings.md: {missing}"
    missing_host = sorted(_host_settings() - documented)
    assert missing_host == [], f"in HOST_SETTINGS but missing from docs/settings.md: {missing_host}"


def test_every_setting_in_the_reference_is_read_by_the_app() -> None:
    strings = _app_strings()
    host = _host_texts()
    stale = sorted(
        f"{name} (docs/settings.md line {line})"
        for name, line in _documented().items()
        if name not in strings and not re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", host)
    )
    assert stale == [], f"documented in docs/settings.md but read nowhere in the app, infra/ or host.json: {stale}"
