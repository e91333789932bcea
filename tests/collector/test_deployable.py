"""What Azure deploys imports only what requirements.txt installs, and the local runtime stays out of the package."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

REPO = Path(__file__).parents[2]
DEPLOYED = ["function_app.py", "http_api", "orchestrators", "activities", "shared"]
LOCAL_PACKAGES = {"function_app", "http_api", "orchestrators", "activities", "shared"}
NEVER = {"durable_local", "m365_emulator", "collector_local", "tests", "pytest", "hypothesis", "psutil"}
# Import name -> the requirements.txt distribution that provides it (azure.core and cryptography come with
# azure-storage-blob and msal, which require them).
PROVIDED = {
    "azure.functions": "azure-functions",
    "azure.durable_functions": "azure-functions-durable",
    "azure.storage.blob": "azure-storage-blob",
    "azure.identity": "azure-identity",
    "azure.core": "azure-storage-blob",
    "requests": "requests",
    "msal": "msal",
    "tenacity": "tenacity",
    "dateutil": "python-dateutil",
    "cryptography": "msal",
    "orjson": "orjson",
    "msgspec": "msgspec",
}


def _deployed_files() -> list[Path]:
    files: list[Path] = []
    for entry in DEPLOYED:
        path = REPO / entry
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return files


def _imports(path: Path) -> set[str]:
    """Every absolute module imported anywhere in the file (lazy imports inside functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _required_distributions() -> set[str]:
    names: set[str] = set()
    for line in (REPO / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(line.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip().lower())
    return names


def _provider(module: str) -> str | None:
    return next((d for prefix, d in PROVIDED.items() if module == prefix or module.startswith(prefix + ".")), None)


def test_deployed_code_imports_only_stdlib_its_own_packages_and_requirements() -> None:
    required = _required_distributions()
    problems: list[str] = []
    for path in _deployed_files():
        for module in sorted(_imports(path)):
            root = module.split(".")[0]
            if root in NEVER:
                problems.append(f"{path.relative_to(REPO)} imports {module} (never deployed)")
            elif root in sys.stdlib_module_names or root in LOCAL_PACKAGES or root == "__future__":
                continue
            else:
                provider = next(
                    (d for prefix, d in PROVIDED.items() if module == prefix or module.startswith(prefix + ".")), None
                )
                if provider is None or provider not in required:
                    problems.append(
                        f"{path.relative_to(REPO)} imports {module}, which requirements.txt does not provide"
                    )
    assert len(_deployed_files()) > 20
    assert problems == []


def test_funcignore_keeps_the_local_runtime_and_tests_out_of_the_package() -> None:
    ignored = {line.strip().rstrip("/") for line in (REPO / ".funcignore").read_text().splitlines()}
    assert {"durable_local", "m365_emulator", "collector_local", "tests", "bench", "local.settings.json"} <= ignored
    assert not ignored & set(DEPLOYED) and "host.json" not in ignored and "requirements.txt" not in ignored


def test_host_json_targets_extension_bundle_v4() -> None:
    host = json.loads((REPO / "host.json").read_text())
    assert host["version"] == "2.0"
    assert host["extensionBundle"] == {"id": "Microsoft.Azure.Functions.ExtensionBundle", "version": "[4.*, 5.0.0)"}


def test_the_deployed_zip_holds_the_app_and_nothing_local() -> None:
    """scripts/deploy.sh deploys what scripts/package_app.py packs: git's files less .funcignore."""
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from package_app import package_files
    finally:
        sys.path.pop(0)
    files = package_files()
    tops = {name.split("/")[0] for name in files}
    assert {"function_app.py", "host.json", "requirements.txt", "shared", "http_api", "activities"} <= tops
    assert {"orchestrators"} <= tops
    local = {"tests", "durable_local", "m365_emulator", "collector_local", "infra", "docs", "scripts", "bench"}
    assert tops & (local | {"azure.yaml", "local.settings.json", "local.settings.json.example", ".venv-iac"}) == set()
    assert not any(name.endswith((".pyc", ".bicep")) for name in files)
