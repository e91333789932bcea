"""Pure parts of the doctor: result lines and JSON, redaction, token claims, page-size wording, exit semantics."""

from __future__ import annotations

import base64
import json

from shared.doctor.exchange_probe import describe_sizes
from shared.doctor.fixes import app_setting
from shared.doctor.model import DIFFERS_PREFIX, DoctorReport, Outcome, ProbeResult, brief, differs, failed, ok, skipped
from shared.doctor.tokens import token_facts


def jwt(payload: dict[str, object]) -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(payload)}.signature"


def test_token_facts_read_tid_and_roles_and_survive_opaque_tokens() -> None:
    facts = token_facts(jwt({"tid": "t-guid", "roles": ["AuditLogsQuery.Read.All"]}))
    assert (facts.tenant_guid, facts.roles) == ("t-guid", ("AuditLogsQuery.Read.All",))
    assert token_facts(jwt({"tid": "t"})).roles == ()  # no roles claim: nothing consented
    assert token_facts("opaque-token").roles is None
    assert token_facts("a.%%%.c").tenant_guid is None


def test_describe_sizes() -> None:
    assert describe_sizes([1000, 1000, 468]) == "pages of 1,000 (last 468)"
    assert describe_sizes([1000, 1000]) == "pages of 1,000"
    assert describe_sizes([1468]) == "one page of 1,468"
    assert describe_sizes([5000, 1000, 17]) == "pages of 5,000, 1,000, 17"


def test_results_redact_credentials_and_keep_to_one_line() -> None:
    result = failed(
        "storage",
        "cannot write https://acct.blob.core.windows.net/c/x?sv=2024&sig=SECRETSIG\nnext line",
        "check AccountKey=SECRETKEY",
    )
    assert "SECRETSIG" not in result.line and "SECRETKEY" not in result.line
    assert "\n" not in result.line and result.line.startswith("FAILED   storage")
    assert "| fix: check AccountKey=<redacted>" in result.line


def test_differs_lines_say_so_and_only_failures_fail_a_run() -> None:
    results = (ok("settings", "fine"), differs("graph.list", "x"), skipped("graph.delete", "y"))
    report = DoctorReport("contoso.onmicrosoft.com", "graph", results, 1.0)
    assert report.ok
    assert DIFFERS_PREFIX + "x" in report.result("graph.list").line
    assert report.to_json()["results"][1]["detail"] == DIFFERS_PREFIX + "x"
    assert report.counts() == {"ok": 1, "failed": 0, "differs": 1, "skipped": 1}
    failing = DoctorReport("t", "graph", (*results, ProbeResult("storage", Outcome.FAILED, "no", "fix it")), 1.0)
    assert not failing.ok and failing.lines()[-1].endswith("something failed")
    assert failing.to_json()["results"][-1] == {
        "probe": "storage",
        "outcome": "failed",
        "detail": "no",
        "fix": "fix it",
    }


def test_brief_and_setting_names() -> None:
    assert brief("a  b\nc") == "a b c"
    assert brief("x" * 300, 10) == "x" * 9 + "\u2026"
    assert app_setting("client_secret") == "AUDIT_CLIENT_SECRET"
    assert app_setting("OUTPUT_CONTAINER") == "OUTPUT_CONTAINER"
    assert app_setting("tenant_id").startswith("the tenant")
