"""Pure parts of the doctor: result lines and JSON, redaction, token claims, page-size wording, exit semantics."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from shared.audit.exchange_paging import SessionBrokenError
from shared.audit.ports import RecordPage, TimeWindow
from shared.doctor.exchange_probe import ExchangeProbe, describe_sizes
from shared.doctor.fixes import app_setting
from shared.doctor.model import (
    DIFFERS_PREFIX,
    Budget,
    DoctorReport,
    Outcome,
    ProbeResult,
    brief,
    differs,
    failed,
    ok,
    skipped,
)
from shared.doctor.tokens import token_facts
from tests.collector.fakes import T0, FakeSearchApi, synthetic


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
    assert report.counts() == {"ok": 1, "failed": 0, "warning": 0, "differs": 1, "skipped": 1}
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


@dataclass
class BreaksOnce(FakeSearchApi):
    """The port over in-memory rows whose session breaks at one call (the doctor's read is the collector's)."""

    break_at: int = 0

    def read_block(self, *args: Any, **kwargs: Any) -> Iterator[RecordPage]:
        if self.calls + 1 == self.break_at:
            self.errors.append(SessionBrokenError("ResultIndex not contiguous"))
        return super().read_block(*args, **kwargs)


def read(rows: int, *, block: int, page: int, break_at: int = 0, time_left: bool = True) -> ProbeResult:
    end = T0 + timedelta(hours=4)
    api = BreaksOnce(synthetic(T0, 4, rows // 4), cap=50_000, block_size=block, page_size=page, break_at=break_at)
    probe = ExchangeProbe(config=None, budget=Budget(60), now=lambda: end)  # type: ignore[arg-type]
    return probe._read_session(api, TimeWindow(T0, end), rows, lambda: time_left)


def test_a_session_whose_rows_come_again_differs_from_what_the_collector_assumes() -> None:
    # The second call finds its session broken: a new session delivers the first call's 1,000 rows again.
    result = read(1_200, block=1000, page=1000, break_at=2)
    assert result.outcome is Outcome.DIFFERS
    assert "1,000 of 2,200 rows came again" in result.detail


def test_next_links_are_counted_within_calls_of_5000_rows() -> None:
    result = read(6_012, block=5000, page=1000)
    assert result.outcome is Outcome.OK, result.detail
    # Two calls: the first answered in 5 pages, the second in 2 (1,000 + 12); the other pages came through nextLinks.
    assert "nextLink followed 5 times" in result.detail and "pages of 1,000 (last 12)" in result.detail
    assert "ResultIndex 1..6,012 without gap or repeat" in result.detail
    one_call_each = read(6_200, block=5000, page=5000)
    assert "nextLink followed 0 times" in one_call_each.detail
    assert "over the 1,000 asked" in one_call_each.detail


def test_the_read_stops_when_the_time_limit_runs_out() -> None:
    result = read(12_000, block=5000, page=1000, time_left=False)
    assert result.outcome is Outcome.OK
    assert "stopped after 5,000 of 12,000 rows: the time budget ran out" in result.detail
