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


class FakeSession:
    """Stands in for ExchangeAuditClient.iter_record_pages in a unit test of the session read's own logic."""

    def __init__(self, pages: list[list[str]]) -> None:
        self.pages = pages

    def iter_record_pages(self, window: object, filters: object) -> object:
        from shared.audit.ports import RecordPage

        return iter([RecordPage([{"id": i} for i in ids]) for ids in self.pages])


def read(pages: list[list[str]]) -> ProbeResult:
    from datetime import UTC, datetime, timedelta

    from shared.audit.ports import TimeWindow
    from shared.doctor.exchange_probe import ExchangeProbe
    from shared.doctor.model import Budget

    end = datetime(2026, 1, 1, tzinfo=UTC)
    probe = ExchangeProbe(config=None, budget=Budget(60), now=lambda: end)  # type: ignore[arg-type]
    window = TimeWindow(end - timedelta(hours=4), end)
    rows = sum(len(p) for p in pages)
    return probe._read_session(FakeSession(pages), window, rows, lambda: True)  # type: ignore[arg-type]


def ids(start: int, count: int) -> list[str]:
    return [f"r{i}" for i in range(start, start + count)]


def test_a_session_whose_rows_come_again_differs_from_what_the_collector_assumes() -> None:
    result = read([ids(0, 1000), ids(0, 1000), ids(1000, 200)])  # a restarted session repeats its first page
    assert result.outcome is Outcome.DIFFERS
    assert "1,000 of 2,200 rows came again" in result.detail


def test_next_links_are_counted_within_calls_of_5000_rows() -> None:
    result = read([ids(i * 1000, 1000) for i in range(6)] + [ids(6000, 10)])
    assert result.outcome is Outcome.OK
    # Calls start at rows 0 and 5,000: the other five pages came through nextLinks.
    assert "nextLink followed 5 times" in result.detail and "pages of 1,000 (last 10)" in result.detail
    one_call_each = read([ids(0, 5000), ids(5000, 1200)])
    assert "nextLink followed 0 times" in one_call_each.detail
    assert "over the 1,000 asked" in one_call_each.detail
