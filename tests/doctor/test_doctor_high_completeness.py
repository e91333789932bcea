"""Issue 25, item 8: the doctor says whether the tenant accepts ``Search-UnifiedAuditLog -HighCompleteness`` (the
cmdlet's doc: the switch "isn't available in all organizations"): one call of one row with the switch, read-only."""

from __future__ import annotations

from pathlib import Path

from m365_emulator import Emulator
from shared.doctor import Outcome, run_doctor
from tests.doctor.conftest import DOMAIN, NO_ROLE_CLIENT, TENANT, app_env, folder_output


def test_a_tenant_that_accepts_high_completeness_is_ok(knobs: Emulator, tmp_path: Path) -> None:
    before = knobs.stats.high_completeness_calls[(TENANT, "exchange")]
    report = run_doctor(app_env(knobs, folder_output(tmp_path)), DOMAIN, "exchange")
    result = report.result("exchange.highcompleteness")
    assert result.outcome is Outcome.OK, result.line
    assert "accepts -HighCompleteness" in result.detail and "highCompleteness: true" in result.detail
    assert knobs.stats.high_completeness_calls[(TENANT, "exchange")] >= before + 1


def test_a_tenant_that_refuses_it_is_a_warning_that_says_to_leave_it_off(knobs: Emulator, tmp_path: Path) -> None:
    knobs.config.exchange.high_completeness = False
    report = run_doctor(app_env(knobs, folder_output(tmp_path)), DOMAIN, "exchange")
    result = report.result("exchange.highcompleteness")
    assert result.outcome is Outcome.WARNING, result.line
    assert "refused -HighCompleteness" in result.detail and "leave highCompleteness off" in result.fix
    assert report.ok  # a warning: collections without the switch still work


def test_it_is_skipped_when_the_role_probe_did_not_pass(knobs: Emulator, tmp_path: Path) -> None:
    env = app_env(knobs, folder_output(tmp_path), AUDIT_CLIENT_ID=NO_ROLE_CLIENT)
    result = run_doctor(env, DOMAIN, "exchange").result("exchange.highcompleteness")
    assert result.outcome is Outcome.SKIPPED and "exchange.role" in result.detail
