"""A fake ``az`` for the hook tests: the Azure CLI's exit codes and error texts over a state kept in a JSON file.

It answers the commands ``infra/hooks/postprovision.*`` and ``scripts/tenant-setup.*`` send, the way azure-cli does:
exit code 0 with the output, 3 with ``ERROR: (…NotFound) …`` for an HTTP 404 (azure-cli's ``ResourceNotFoundError``;
``azure/cli/core/util.py`` ``handle_exception``), 1 with ``ERROR: (Forbidden) …`` for a 403, 1 with a connection
error text for a network failure. The state (``FAKE_AZ_STATE``) holds the account, the vault's certificates and
secrets (with a version count, so a test sees whether anything was written), the tenant's apps, service principals
and app role assignments, and ``script``: per command (``"keyvault certificate show"``), a list of answers given
first, one per call: ``"forbidden"`` (a role not applied yet), ``"closed"`` (a vault closed to public networks),
``"notfound"``, ``"network"`` or ``"ok"`` (the state's answer). Every call is logged in the state's ``calls``.
``--query`` takes the small JMESPath subset the scripts use; an unknown one fails loudly.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

FORBIDDEN = (
    "ERROR: (Forbidden) Caller is not authorized to perform action on resource.\n"
    "If role assignments, deny assignments or role definitions were changed recently, please observe propagation "
    "time.\nCaller: appid=04b07795-8ddb-461a-bbee-02f9e1bf7b46;oid=00000000-0000-0000-0000-0000000000aa\n"
    "Code: Forbidden\nMessage: Caller is not authorized to perform action on resource.\n"
    'Inner error: {\n    "code": "ForbiddenByRbac"\n}'
)
NETWORK = (
    "ERROR: HTTPSConnectionPool(host='kv-test.vault.azure.net', port=443): Max retries exceeded with url: "
    '/certificates/ual-audit/?api-version=7.4 (Caused by NameResolutionError("<urllib3.connection.HTTPSConnection '
    "object at 0x7f>: Failed to resolve 'kv-test.vault.azure.net' ([Errno -3] Temporary failure in name resolution)\"))"
)
CLOSED = (
    "ERROR: (Forbidden) Public network access is disabled and request is not from a trusted service nor via an "
    'approved private link.\nCode: Forbidden\nInner error: {\n    "code": "ForbiddenByConnection"\n}'
)
GRAPH_FORBIDDEN = (
    'ERROR: Forbidden({"error":{"code":"Authorization_RequestDenied","message":"Insufficient privileges to '
    'complete the operation."}})'
)


class ExitError(Exception):
    def __init__(self, code: int, text: str = "") -> None:
        super().__init__(text)
        self.code = code
        self.text = text


def _not_found(kind: str, name: str) -> ExitError:
    text = f"ERROR: ({kind}NotFound) A {kind.lower()} with (name/id) {name} was not found in this key vault."
    return ExitError(3, text)


def _graph_not_found(ident: str) -> ExitError:
    return ExitError(
        3,
        f"ERROR: Resource '{ident}' does not exist or one of its queried reference-property objects are not present.",
    )


def parse(argv: list[str]) -> tuple[str, dict[str, Any]]:
    words: list[str] = []
    options: dict[str, Any] = {}
    i = 0
    while i < len(argv) and not argv[i].startswith("-"):
        words.append(argv[i])
        i += 1
    while i < len(argv):
        flag = argv[i]
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            options[flag] = argv[i + 1]
            i += 2
        else:
            options[flag] = True
            i += 1
    return " ".join(words), options


_FILTER = re.compile(r"^(?P<head>[A-Za-z_.]*)\[\?(?P<field>\w+)=='(?P<value>[^']*)'\](?P<tail>.*)$")


def query(value: Any, expression: str) -> Any:
    """The JMESPath subset the scripts use: ``a.b``, ``x[?f=='v'].y``, ``[].y``, ``x[].y``."""
    match = _FILTER.match(expression)
    if match:
        items = query(value, match["head"]) if match["head"] else value
        kept = [item for item in items or [] if str(item.get(match["field"])) == match["value"]]
        tail = match["tail"].lstrip(".")
        return [query(item, tail) for item in kept] if tail else kept
    if "[]" in expression:
        head, _, tail = expression.partition("[]")
        items = query(value, head) if head else value
        tail = tail.lstrip(".")
        out: list[Any] = []
        for item in items or []:
            got = query(item, tail) if tail else item
            out.extend(got if isinstance(got, list) else [got])
        return out
    if not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*", expression):
        raise ExitError(2, f"fake az: unsupported --query {expression!r}")
    for part in expression.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def render(value: Any, output: str) -> str:
    if output == "none":
        return ""
    if output == "tsv":
        if value is None:
            return ""
        if isinstance(value, list):
            return "\n".join("" if v is None else str(v) for v in value)
        return str(value)
    return json.dumps(value, indent=2)


def answer(state: dict[str, Any], command: str, options: dict[str, Any]) -> Any:
    vault = state.setdefault("vault", {"certificates": {}, "secrets": {}})
    tenant = state.setdefault("tenant", {})
    if command == "account show":
        if not state.get("account"):
            raise ExitError(1, "ERROR: Please run 'az login' to setup account.")
        return state["account"]
    if command == "ad signed-in-user show":
        return {"id": state["signed_in_object_id"], "userPrincipalName": state["account"]["user"]["name"]}
    if command in ("keyvault certificate show", "keyvault certificate download"):
        cert = vault["certificates"].get(options["--name"])
        if cert is None:
            raise _not_found("Certificate", options["--name"])
        if command.endswith("download"):
            Path(options["--file"]).write_text(f"-----BEGIN CERTIFICATE-----\nfake {options['--name']}\n", "utf-8")
            return None
        return {"id": f"https://{options['--vault-name']}.vault.azure.net/certificates/{options['--name']}",
                "x509ThumbprintHex": cert["thumbprint"]}  # fmt: skip
    if command == "keyvault certificate create":
        cert = vault["certificates"].setdefault(options["--name"], {"versions": 0, "thumbprint": "0F" * 20})
        cert["versions"] += 1
        return {"status": "completed"}
    if command == "keyvault secret show":
        if options["--name"] not in vault["secrets"]:
            raise _not_found("Secret", options["--name"])
        return {"id": f"https://{options['--vault-name']}.vault.azure.net/secrets/{options['--name']}"}
    if command == "keyvault secret set":
        value = Path(options["--file"]).read_text("utf-8")
        secret = vault["secrets"].setdefault(options["--name"], {"versions": 0})
        secret["versions"] += 1
        secret["length"] = len(value)
        return {"id": "set"}
    if command == "rest":
        return rest(state, options)
    if command == "ad app show":
        app = tenant.get("apps", {}).get(options["--id"])
        if app is None:
            raise _graph_not_found(options["--id"])
        return {"appId": options["--id"], **app}
    if command == "ad sp show":
        sp = tenant.get("service_principals", {}).get(options["--id"])
        if sp is None:
            raise _graph_not_found(options["--id"])
        return sp
    if command == "ad sp create":
        sps = tenant.setdefault("service_principals", {})
        if options["--id"] in sps:
            raise ExitError(1, "ERROR: Another object with the same value for property servicePrincipalNames exists.")
        sps[options["--id"]] = {"id": f"sp-{options['--id']}", "appId": options["--id"], "appRoles": []}
        return sps[options["--id"]]
    if command == "ad app credential list":
        return [{"customKeyIdentifier": t} for t in tenant["apps"][options["--id"]].get("keyCredentials", [])]
    if command == "ad app credential reset":
        if "--append" not in options:
            raise ExitError(2, "fake az: the script must append, never replace, the app's credentials")
        tenant["apps"][options["--id"]].setdefault("keyCredentials", []).append(state.get("pem_thumbprint", "PEM"))
        return {"appId": options["--id"]}
    if command == "ad app permission list":
        return tenant["apps"][options["--id"]].get("requiredResourceAccess", [])
    if command == "ad app permission add":
        role, _, kind = options["--api-permissions"].partition("=")
        access = tenant["apps"][options["--id"]].setdefault("requiredResourceAccess", [])
        entry = next((e for e in access if e["resourceAppId"] == options["--api"]), None)
        if entry is None:
            entry = {"resourceAppId": options["--api"], "resourceAccess": []}
            access.append(entry)
        entry["resourceAccess"].append({"id": role, "type": kind})
        return None
    raise ExitError(2, f"fake az: unknown command {command!r}")


def rest(state: dict[str, Any], options: dict[str, Any]) -> Any:
    url, method = options["--url"], options["--method"].lower()
    if "/config/configreferences/" in url:
        return None
    match = re.search(r"/servicePrincipals/([^/]+)/appRoleAssignments$", url)
    if match is None:
        raise ExitError(2, f"fake az: unknown url {url}")
    assignments = state["tenant"].setdefault("app_role_assignments", {}).setdefault(match[1], [])
    if method == "get":
        return {"value": assignments}
    if state["tenant"].get("operator_may_grant", True) is False:
        raise ExitError(1, GRAPH_FORBIDDEN)
    raw = options["--body"]
    body = json.loads(Path(raw[1:]).read_text("utf-8") if raw.startswith("@") else raw)  # az reads @file
    assignments.append({"id": f"a{len(assignments)}", **body})
    return assignments[-1]


def main() -> int:
    path = Path(os.environ["FAKE_AZ_STATE"])
    state = json.loads(path.read_text("utf-8"))
    command, options = parse(sys.argv[1:])
    state.setdefault("calls", []).append(sys.argv[1:])
    scripted = state.setdefault("script", {}).get(command) or []
    code, text, result = 0, "", None
    try:
        step = scripted.pop(0) if scripted else "ok"
        if step == "forbidden":
            raise ExitError(1, GRAPH_FORBIDDEN if command.startswith("ad ") else FORBIDDEN)
        if step == "closed":
            raise ExitError(1, CLOSED)
        if step == "network":
            raise ExitError(1, NETWORK)
        if step == "notfound":
            raise ExitError(3, f"ERROR: (NotFound) {command}: not found")
        result = answer(state, command, options)
        if "--query" in options:
            result = query(result, options["--query"])
        text = render(result, options.get("-o", options.get("--output", "json")))
    except ExitError as exc:
        code, text = exc.code, exc.text
    finally:
        path.write_text(json.dumps(state, indent=2), "utf-8")
    if code:
        print(text, file=sys.stderr)
    elif text:
        print(text)
    return code


if __name__ == "__main__":
    sys.exit(main())
