"""Issue 17's doctor probes against the emulator: whether auditing is on (and the fix when it is off), which name of
the Graph service filter the tenant's service honours, and a warning when the app holds only per-workload
``AuditLogsQuery-<workload>.Read.All`` permissions (queries then return only those workloads' records)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from m365_emulator import AppRegistration, Emulator
from shared.doctor import run_doctor
from shared.doctor.model import DoctorReport
from shared.doctor.sources import PROBE_ORDER
from shared.errors import AUDITING_FIX
from tests.doctor.conftest import DOMAIN, SECRET, TENANT, app_env, folder_output

EXCHANGE_ONLY_CLIENT = "4d5e6f7a-8b9c-4dae-8f10-3b4c5d6e7f80"


def outcomes(report: DoctorReport) -> dict[str, str]:
    return {r.probe: r.outcome.value for r in report.results}


@pytest.fixture
def auditing_off(knobs: Emulator) -> Iterator[Emulator]:
    spec = knobs.graph.tenants[TENANT]
    knobs.add_tenant(dataclasses.replace(spec, auditing_enabled=False))
    yield knobs
    knobs.add_tenant(spec)


def test_auditing_turned_off_fails_its_probe_with_the_fix(auditing_off: Emulator, tmp_path: Path) -> None:
    created = auditing_off.stats.queries_created[TENANT]
    report = run_doctor(app_env(auditing_off, folder_output(tmp_path)), DOMAIN, "graph")
    got = outcomes(report)
    assert got["graph.auditing"] == "failed", report.lines()
    result = report.result("graph.auditing")
    assert "AuditingDisabledTenant" in result.detail and result.fix == AUDITING_FIX
    assert {got[p] for p in ("graph.query", "graph.records", "graph.filters", "graph.list", "graph.delete")} == {
        "skipped"
    }
    assert got["graph.permission"] == got["graph.token"] == "ok" and not report.ok
    assert auditing_off.stats.queries_created[TENANT] == created


@pytest.mark.parametrize(
    ("mode", "singular", "plural"),
    [("singular", "honoured", "ignored"), ("plural", "ignored", "honoured"), ("both", "honoured", "honoured"),
     ("neither", "ignored", "ignored")],
)  # fmt: skip
def test_the_doctor_finds_which_service_filter_name_the_service_honours(
    knobs: Emulator, tmp_path: Path, mode: str, singular: str, plural: str
) -> None:
    knobs.config.graph.service_filter = mode
    report = run_doctor(app_env(knobs, folder_output(tmp_path)), DOMAIN, "graph")
    graph = [p for p in PROBE_ORDER if "graph." in p]
    assert [r.probe for r in report.results] == ["settings", "tenant", "storage", *graph]
    result = report.result("graph.filters")
    assert result.outcome.value == "ok", report.lines()
    assert f"serviceFilter was {singular}" in result.detail and f"serviceFilters was {plural}" in result.detail
    assert "sends both" in result.detail


def test_per_workload_permissions_are_a_warning_naming_what_a_query_misses(knobs: Emulator, tmp_path: Path) -> None:
    knobs.register_app(
        AppRegistration(
            TENANT, EXCHANGE_ONLY_CLIENT, client_secret=SECRET, graph_permissions=("AuditLogsQuery-Exchange.Read.All",)
        )
    )
    env = app_env(knobs, folder_output(tmp_path), AUDIT_CLIENT_ID=EXCHANGE_ONLY_CLIENT)
    report = run_doctor(env, DOMAIN, "graph")
    result = report.result("graph.scope")
    assert result.outcome.value == "warning", report.lines()
    assert "AuditLogsQuery-Exchange.Read.All" in result.detail and "only Exchange" in result.detail
    assert "AuditLogsQuery.Read.All" in result.fix
    assert report.ok  # a warning does not fail the run: a narrow permission may be intended
    assert result.line.startswith("WARNING  graph.scope")
    full = run_doctor(app_env(knobs, folder_output(tmp_path)), DOMAIN, "graph").result("graph.scope")
    assert full.outcome.value == "ok" and "every workload" in full.detail
