"""The doctor against the emulator over real HTTPS (real msal tokens, the real adapters), in each of the emulator's
behaviours (pessimistic defaults, friendly knobs) and in each failure mode: the right probe fails and names the fix,
the probes that depend on it are skipped, and the others still run."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient

from m365_emulator import AppRegistration, Emulator, IngestionSettings
from shared.doctor import Outcome, run_doctor
from shared.doctor.model import DoctorReport
from shared.doctor.sources import PROBE_ORDER
from tests.doctor.conftest import (
    DOMAIN,
    NO_GRAPH_CLIENT,
    NO_MANAGE_CLIENT,
    NO_ROLE_CLIENT,
    TENANT,
    app_env,
    folder_output,
)
from tests.support.certs import b64, cert_pem, pfx, self_signed


def outcomes(report: DoctorReport) -> dict[str, str]:
    return {r.probe: r.outcome.value for r in report.results}


def detail(report: DoctorReport, probe: str) -> str:
    return report.result(probe).detail


def fix(report: DoctorReport, probe: str) -> str:
    return report.result(probe).fix


def test_all_ok_on_the_pessimistic_defaults_with_notes_on_how_the_service_behaved(
    knobs: Emulator, azurite_connection_string: str
) -> None:
    container = f"doctor-{uuid.uuid4().hex[:8]}"
    env = app_env(knobs, {"OUTPUT_STORAGE_CONNECTION": azurite_connection_string, "OUTPUT_CONTAINER": container})
    created = knobs.stats.queries_created[TENANT]
    refused = knobs.stats.deletes_refused[TENANT]
    faults = dict(knobs.stats.query_faults)

    report = run_doctor(env, DOMAIN)

    assert [r.probe for r in report.results] == list(PROBE_ORDER)
    assert set(outcomes(report).values()) == {"ok"}, report.lines()
    assert report.ok
    assert "refused (400" in detail(report, "graph.list") and "found the query" in detail(report, "graph.list")
    assert detail(report, "graph.delete").startswith("DELETE unsupported (")
    assert "stays on the service" in detail(report, "graph.delete")
    paging = detail(report, "exchange.paging")
    # The page sizes the service chose (a mix by default: one page, or several with nextLinks followed)
    assert "HTTP page" in paging and "nextLink followed" in paging and "time" in paging
    assert ("one page of" in paging) is ("nextLink followed 0" in paging)
    assert "complete by evidence: call 1 returned" in paging
    assert f"@{TENANT} was routed too" in detail(report, "exchange.anchor")  # the GUID form, on the default emulator
    assert "('capped')" in detail(report, "exchange.resultcount")  # the defaults: the 2026 service
    assert "sessions 'restart'" in detail(report, "exchange.sessions")
    assert "blob container " + container in detail(report, "storage")
    # Three tiny queries created (the probe query and the two of graph.filters; DELETE being unsupported, left), and
    # one more for each the service failed or lost (submitted again); nothing left in the output container.
    failed, lost = (knobs.stats.query_faults[(TENANT, k)] - faults.get((TENANT, k), 0) for k in ("failed", "vanished"))
    assert knobs.stats.queries_created[TENANT] == created + 3 + failed + lost
    assert knobs.stats.deletes_refused[TENANT] == refused + 3 + failed  # a lost query is not there to delete
    blobs = BlobServiceClient.from_connection_string(azurite_connection_string).get_container_client(container)
    assert [b.name for b in blobs.list_blobs()] == []


def test_all_ok_with_the_friendly_knobs(knobs: Emulator, tmp_path: Path) -> None:
    knobs.config.exchange.page_size, knobs.config.exchange.page_size_mode = 5000, "fixed"
    knobs.config.graph.list_filter = "honour"
    knobs.config.graph.delete_supported = True
    knobs.config.ingestion = IngestionSettings.immediate()  # the last hours are searchable: one window, one page
    knobs.config.graph.fail_rate = knobs.config.graph.vanish_rate = 0.0  # friendly: no query to submit again
    deleted = knobs.stats.queries_deleted[TENANT]

    report = run_doctor(app_env(knobs, folder_output(tmp_path / "out")), DOMAIN)

    assert set(outcomes(report).values()) == {"ok"}, report.lines()
    assert "was honoured" in detail(report, "graph.list")
    assert detail(report, "graph.delete").startswith("DELETE answered 2xx")
    assert knobs.stats.queries_deleted[TENANT] == deleted + 3
    assert "one page of" in detail(report, "exchange.paging")
    assert "nextLink followed 0 times" in detail(report, "exchange.paging")
    assert f"@{TENANT} was routed too" in detail(report, "exchange.anchor")
    assert [p for p in (tmp_path / "out").rglob("*")] == []  # the probe object and its folder are gone


def test_an_ignored_filter_and_mixed_page_sizes_are_reported_and_handled(knobs: Emulator, tmp_path: Path) -> None:
    knobs.config.graph.list_filter = "ignore"
    knobs.config.exchange.page_size_mode = "mix"

    report = run_doctor(app_env(knobs, folder_output(tmp_path)), DOMAIN)

    assert set(outcomes(report).values()) == {"ok"}, report.lines()
    assert "was ignored" in detail(report, "graph.list")
    assert "ResultIndex 1.." in detail(report, "exchange.paging")


def test_wrong_client_secret_names_the_secret_setting(knobs: Emulator, tmp_path: Path) -> None:
    env = app_env(knobs, folder_output(tmp_path), AUDIT_CLIENT_SECRET="not-the-registered-secret")

    report = run_doctor(env, DOMAIN)

    assert not report.ok
    for probe in ("graph.token", "exchange.token"):
        assert report.result(probe).outcome is Outcome.FAILED
        assert "AADSTS7000215" in detail(report, probe)
        assert "AUDIT_CLIENT_SECRET" in fix(report, probe)
    got = outcomes(report)
    assert got["settings"] == got["storage"] == "ok"
    assert {got[p] for p in PROBE_ORDER if p.split(".")[-1] not in ("token",) and "." in p} == {"skipped"}
    assert detail(report, "graph.permission") == "needs graph.token, which failed"


def test_missing_graph_permission_names_it_and_exchange_still_runs(knobs: Emulator, tmp_path: Path) -> None:
    report = run_doctor(app_env(knobs, folder_output(tmp_path), AUDIT_CLIENT_ID=NO_GRAPH_CLIENT), DOMAIN)

    got = outcomes(report)
    assert got["graph.permission"] == "failed"
    assert "AuditLogsQuery.Read.All" in fix(report, "graph.permission")
    assert "roles: none" in fix(report, "graph.permission")
    assert {got[p] for p in ("graph.query", "graph.records", "graph.list", "graph.delete")} == {"skipped"}
    assert {got[p] for p in ("exchange.token", "exchange.anchor", "exchange.role", "exchange.paging")} == {"ok"}
    assert not report.ok


@pytest.mark.parametrize("style", ["cmdlet", "plain"])
def test_missing_exchange_role_names_the_role(knobs: Emulator, tmp_path: Path, style: str) -> None:
    knobs.config.exchange.error_style = style

    report = run_doctor(app_env(knobs, folder_output(tmp_path), AUDIT_CLIENT_ID=NO_ROLE_CLIENT), DOMAIN, "exchange")

    got = outcomes(report)
    assert got["exchange.role"] == "failed"
    assert "View-Only Audit Logs" in fix(report, "exchange.role")
    assert "Exchange.ManageAsApp" not in fix(report, "exchange.role")
    assert "isn't supported in this scenario" in detail(report, "exchange.role")
    assert got["exchange.paging"] == "skipped" and got["exchange.token"] == "ok"
    assert not any(p.startswith("graph.") for p in got)  # source exchange: Graph is not probed at all


def test_missing_manage_as_app_names_the_application_permission(knobs: Emulator, tmp_path: Path) -> None:
    env = app_env(knobs, folder_output(tmp_path), AUDIT_CLIENT_ID=NO_MANAGE_CLIENT)

    report = run_doctor(env, DOMAIN, "exchange")

    assert report.result("exchange.role").outcome is Outcome.FAILED
    assert "Exchange.ManageAsApp" in fix(report, "exchange.role")
    assert "View-Only" not in fix(report, "exchange.role")
    assert "no Exchange.ManageAsApp" in detail(report, "exchange.token")


@pytest.mark.parametrize("answer", ["routing_hint", "stale"])
def test_wrong_anchor_mailbox_names_the_initial_domain_rule(knobs: Emulator, tmp_path: Path, answer: str) -> None:
    knobs.config.exchange.anchor_domain = "contosoltd.onmicrosoft.com"  # the service routes the tenant by another name
    knobs.config.exchange.anchor_accepts_tenant_id = False
    knobs.config.exchange.anchor_error = answer

    report = run_doctor(app_env(knobs, folder_output(tmp_path)), DOMAIN, "exchange")

    got = outcomes(report)
    assert got["exchange.anchor"] == "failed"
    assert "initial domain <name>.onmicrosoft.com" in fix(report, "exchange.anchor")
    assert f"@{DOMAIN}" in detail(report, "exchange.anchor")
    assert "GUID form" in detail(report, "exchange.anchor") and "was refused" in detail(report, "exchange.anchor")
    assert got["exchange.role"] == got["exchange.paging"] == "skipped"


def test_a_service_that_routes_only_the_guid_form_is_reported(knobs: Emulator, tmp_path: Path) -> None:
    knobs.config.exchange.anchor_domain = "contosoltd.onmicrosoft.com"

    report = run_doctor(app_env(knobs, folder_output(tmp_path)), DOMAIN, "exchange")

    assert report.result("exchange.anchor").outcome is Outcome.FAILED
    assert f"@{TENANT} was routed too" in detail(report, "exchange.anchor")  # name the tenant by its GUID then


def test_a_tenant_guid_is_used_for_exchange_with_the_guid_anchor(knobs: Emulator, tmp_path: Path) -> None:
    report = run_doctor(app_env(knobs, folder_output(tmp_path)), TENANT)

    got = outcomes(report)
    assert set(got.values()) == {"ok"}, report.lines()
    anchor = detail(report, "exchange.anchor")
    assert f"routed X-AnchorMailbox APP:SystemMailbox{{bb558c35-97f1-4cb9-8ff7-d53741dc928c}}@{TENANT}" in anchor
    assert "initial-domain form was not tried" in anchor


def test_a_tenant_guid_the_service_does_not_route_names_the_fix(knobs: Emulator, tmp_path: Path) -> None:
    knobs.config.exchange.anchor_accepts_tenant_id = False

    report = run_doctor(app_env(knobs, folder_output(tmp_path)), TENANT, "exchange")

    assert report.result("exchange.anchor").outcome is Outcome.FAILED
    assert "initial domain" in fix(report, "exchange.anchor") and "GUID" in fix(report, "exchange.anchor")


@pytest.mark.parametrize(
    ("mode", "named"),
    [("total", "the window's total"), ("capped", "the smaller of the ResultSize"), ("size", "the ResultSize asked")],
)
@pytest.mark.parametrize("session", ["continue", "restart", "empty"])
def test_the_doctor_names_what_result_count_means_and_whether_sessions_continue(
    knobs: Emulator, tmp_path: Path, mode: str, named: str, session: str
) -> None:
    knobs.config.exchange.result_count = mode
    knobs.config.exchange.session_mode = session
    knobs.config.exchange.over_delivery = 0.0 if mode == "total" else 0.06
    # What is named here does not depend on the disguised failures (their draws follow the windows, which follow now)
    knobs.config.exchange.cancel_warning_rate = knobs.config.exchange.transient_400_rate = 0.0

    report = run_doctor(app_env(knobs, folder_output(tmp_path)), DOMAIN, "exchange")

    assert set(outcomes(report).values()) == {"ok"}, report.lines()
    counted = detail(report, "exchange.resultcount")
    assert f"('{mode}')" in counted and named in counted and "moreRecordsAvailable is not sent" in counted
    assert f"sessions '{session}'" in detail(report, "exchange.sessions")
    assert "complete by evidence" in detail(report, "exchange.paging")


def test_the_doctor_says_when_more_records_available_and_warnings_come_back(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from m365_emulator import EmulatorConfig, TenantSpec, run_emulator
    from tests.doctor.conftest import CLIENT, SECRET

    config = EmulatorConfig(tenants=[TenantSpec(TENANT, domain=DOMAIN, seed=5, records_per_hour=400.0)])
    config.exchange.more_records_available = "present"
    config.exchange.cancel_warning_rate = 0.2
    # A fresh emulator and a fixed clock: the same windows, so the same stable draws, every run.
    with run_emulator(config) as emulator:
        emulator.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
        now = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
        report = run_doctor(app_env(emulator, folder_output(tmp_path)), DOMAIN, "exchange", now=lambda: now)
        assert emulator.stats.cancel_warnings[(TENANT, "exchange")] > 0

    assert set(outcomes(report).values()) == {"ok"}, report.lines()
    counted = detail(report, "exchange.resultcount")
    assert "moreRecordsAvailable is sent (true, false)" in counted
    assert "@adminapi.warnings came back" in counted and "The task was canceled." in counted


def test_unreachable_authority_names_the_setting(knobs: Emulator, tmp_path: Path) -> None:
    from tests.support.azurite import free_port

    closed = f"https://127.0.0.1:{free_port()}"
    report = run_doctor(app_env(knobs, folder_output(tmp_path), AUDIT_AUTHORITY_HOST=closed), DOMAIN)

    for probe in ("graph.token", "exchange.token"):
        assert report.result(probe).outcome is Outcome.FAILED
        assert detail(report, probe).startswith(f"cannot reach 127.0.0.1:{closed.rsplit(':', 1)[1]}")
        assert "AUDIT_AUTHORITY_HOST" in fix(report, probe)


def test_unreachable_api_endpoints_name_their_settings(knobs: Emulator, tmp_path: Path) -> None:
    from tests.support.azurite import free_port

    env = app_env(
        knobs,
        folder_output(tmp_path),
        AUDIT_GRAPH_BASE_URL=f"https://127.0.0.1:{free_port()}",
        AUDIT_EXCHANGE_BASE_URL=f"https://127.0.0.1:{free_port()}",
    )

    report = run_doctor(env, DOMAIN)

    got = outcomes(report)
    assert got["graph.token"] == got["exchange.token"] == "ok"
    assert got["graph.permission"] == "failed" and "AUDIT_GRAPH_BASE_URL" in fix(report, "graph.permission")
    assert got["exchange.anchor"] == "failed" and "AUDIT_EXCHANGE_BASE_URL" in fix(report, "exchange.anchor")
    assert "cannot reach" in detail(report, "exchange.anchor")


def test_an_untrusted_certificate_names_the_ca_bundle_setting(knobs: Emulator, tmp_path: Path) -> None:
    env = app_env(knobs, folder_output(tmp_path))
    del env["AUDIT_CA_BUNDLE"]

    report = run_doctor(env, DOMAIN, "graph")

    assert report.result("graph.token").outcome is Outcome.FAILED
    assert "AUDIT_CA_BUNDLE" in fix(report, "graph.token")


def test_the_settings_probe_says_which_credential_it_uses_and_a_bad_certificate_names_its_setting(
    knobs: Emulator, tmp_path: Path
) -> None:
    client_id = "2a7b5d8e-6c9f-4eb0-8b3c-5d6e7f8091a2"
    key, cert = self_signed("doctor-cert")
    knobs.register_app(AppRegistration(TENANT, client_id, certificate_pem=cert_pem(cert)))
    env = app_env(knobs, folder_output(tmp_path), AUDIT_CLIENT_ID=client_id, AUDIT_CLIENT_SECRET="")

    good = run_doctor({**env, "AUDIT_CERTIFICATE": b64(pfx(key, cert))}, DOMAIN, source="graph")
    unreadable = run_doctor({**env, "AUDIT_CERTIFICATE": "not base64!"}, DOMAIN, source="graph")
    secret = run_doctor(app_env(knobs, folder_output(tmp_path)), DOMAIN, source="graph")

    assert "with a certificate from AUDIT_CERTIFICATE" in detail(good, "settings")
    assert good.result("graph.token").outcome is Outcome.OK, good.lines()
    assert unreadable.result("graph.token").outcome is Outcome.FAILED
    assert "AUDIT_CERTIFICATE" in fix(unreadable, "graph.token") and "base64" in detail(unreadable, "graph.token")
    assert "with a client secret (AUDIT_CLIENT_SECRET)" in detail(secret, "settings")


@pytest.mark.parametrize(
    ("overrides", "setting"),
    [
        ({"AUDIT_PAGE_SIZE": "lots"}, "AUDIT_PAGE_SIZE"),
        ({"AUDIT_CLIENT_SECRET": ""}, "AUDIT_CLIENT_SECRET"),
        ({"AUDIT_CLIENT_ID": ""}, "AUDIT_CLIENT_ID"),
        ({"AUDIT_GRAPH_BASE_URL": "http://graph.example.com"}, "AUDIT_GRAPH_BASE_URL"),
        ({"OUTPUT_CONTAINER": "Not_A_Container"}, "OUTPUT_CONTAINER"),
        ({"AUDIT_CERTIFICATE": "MIIKcontent"}, "AUDIT_CLIENT_SECRET, AUDIT_CERTIFICATE"),
    ],
)
def test_bad_settings_name_the_setting_and_nothing_else_runs(
    knobs: Emulator, tmp_path: Path, overrides: dict[str, str], setting: str
) -> None:
    requests_before = sum(knobs.stats.requests.values())

    report = run_doctor(app_env(knobs, folder_output(tmp_path), **overrides), DOMAIN)

    assert report.result("settings").outcome is Outcome.FAILED
    assert setting in fix(report, "settings")
    assert {r.outcome for r in report.results[1:]} == {Outcome.SKIPPED}
    assert sum(knobs.stats.requests.values()) == requests_before  # nothing was called


def test_a_bad_tenant_fails_the_settings_probe(knobs: Emulator, tmp_path: Path) -> None:
    report = run_doctor(app_env(knobs, folder_output(tmp_path)), "contoso onmicrosoft com")

    assert report.result("settings").outcome is Outcome.FAILED
    assert "tenant" in fix(report, "settings")


def test_a_query_that_never_finishes_is_reported_within_the_time_budget(knobs: Emulator, tmp_path: Path) -> None:
    knobs.faults.stuck_query = True

    report = run_doctor(app_env(knobs, folder_output(tmp_path)), DOMAIN, "graph", budget_seconds=24.0)

    got = outcomes(report)
    assert got["graph.query"] == "ok" and "the doctor stops waiting" in detail(report, "graph.query")
    assert got["graph.records"] == "skipped" and "did not finish" in detail(report, "graph.records")
    assert got["graph.delete"] == "ok"  # the clean-up is still attempted
    assert report.seconds < 24.0 + 10.0  # a bound on a hung run, not a speed figure


@pytest.mark.parametrize(
    ("tenant", "domain", "per_hour"),
    [
        ("6e7f8a9b-0c1d-4e2f-8a3b-4c5d6e7f8a9b", "busy.onmicrosoft.com", 200_000.0),
        ("7f8a9b0c-1d2e-4f3a-9b4c-5d6e7f8a9b0c", "quiet.onmicrosoft.com", 0.5),
    ],
)
def test_the_paging_window_is_narrowed_on_a_busy_tenant_and_given_up_on_a_quiet_one(
    knobs: Emulator, tmp_path: Path, tenant: str, domain: str, per_hour: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    from m365_emulator import AppRegistration, TenantSpec
    from shared.doctor import exchange_probe
    from shared.doctor import runner as doctor_runner
    from tests.doctor.conftest import CLIENT, SECRET

    knobs.add_tenant(TenantSpec(tenant, domain=domain, seed=9, records_per_hour=per_hour))
    knobs.register_app(AppRegistration(tenant, CLIENT, client_secret=SECRET))
    # The search's wall-clock limits are not what is tested: on a loaded machine the busy tenant's windows (tens of
    # thousands of records each for the in-process emulator to make) used up its 150 s after 3 windows, or a call
    # its HTTP timeout (the doctor caps the app's at 30 s: a CI run under load timed out three times in a row on one
    # call). Every window is tried here, however long each call takes.
    monkeypatch.setattr(exchange_probe, "PAGING_LIMIT_SECONDS", 1_000.0)
    monkeypatch.setattr(doctor_runner, "_HTTP_TIMEOUT_SECONDS", 600.0)
    env = app_env(knobs, folder_output(tmp_path), AUDIT_HTTP_TIMEOUT_SECONDS="600")

    report = run_doctor(env, domain, "exchange", budget_seconds=1_100.0)

    paging = report.result("exchange.paging")
    if per_hour > 1000:  # 15 minutes hold ~50,000 records: narrowed until one call proves a window of 1,000..5,000
        assert paging.outcome is Outcome.OK, paging.line
        rows = int(paging.detail.split(" records over")[0].replace(",", ""))
        assert 1_000 < rows < 5_000
        assert "page" in paging.detail and ("minutes" in paging.detail or "seconds" in paging.detail)
    else:  # 42 days hold ~500 records
        assert paging.outcome is Outcome.SKIPPED
        assert "could not find a window one call proves with more than 1,000 records (tried 7 windows" in paging.detail
        assert report.result("exchange.resultcount").outcome is Outcome.SKIPPED
        assert report.ok
