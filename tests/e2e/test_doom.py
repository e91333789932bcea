"""A permanent problem that dooms every chunk (bad secret, missing Graph permission) stops the collection early:
status Failed, a reason naming the setting or permission, and (with deletion on) no Graph query left behind."""

from __future__ import annotations

import dataclasses
import itertools
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from m365_emulator import AppRegistration, EmulatorConfig
from shared.models import iso
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import CLIENT, SECRET, START, TENANT, body, serve

CHUNKS = 12


def _check_stopped_early(summary: dict[str, object]) -> None:
    assert summary["status"] == "Failed", summary
    progress = summary["progress"]
    assert isinstance(progress, dict)
    assert progress["completed"] == 0
    # Stopped early: at most the K lanes already in flight ended; the rest were never started.
    assert progress["failed"] <= 3 < CHUNKS


def test_bad_client_secret_fails_the_collection_naming_the_setting(make_emulator: MakeEmulator, tmp_path: Path) -> None:
    emulator = make_emulator()
    end = START + timedelta(hours=CHUNKS)
    with serve(emulator, tmp_path, {"AUDIT_CLIENT_SECRET": "not-the-secret"}) as host:
        assert host.post(body(end, interval=60, k=3, collectionId="badsecret")).status_code == 202
        summary = host.wait("badsecret")
    _check_stopped_early(summary)
    reason = summary["reason"]
    assert isinstance(reason, dict) and reason["kind"] == "authentication"
    assert "AUDIT_CLIENT_SECRET" in reason["message"] and "not-the-secret" not in reason["message"]
    assert emulator.stats.queries_created[TENANT] == emulator.stats.queries_deleted[TENANT] == 0
    _check_manifest_reports_the_windows_never_run(host.manifest("badsecret"), end)


def _check_manifest_reports_the_windows_never_run(manifest: dict[str, Any], end: datetime) -> None:
    """The chunks after the failed lanes never ran: the manifest's coverage must say so, up to the range's end."""
    assert manifest["status"] == "Failed" and manifest["chunks"] == []
    failed = sorted((f["chunk"]["start"], f["chunk"]["end"]) for f in manifest["failures"])
    gaps = [(g["start"], g["end"]) for g in manifest["gaps"]]
    assert gaps, "a stopped collection reported no coverage gap"
    # Failures and gaps tile [START, end) exactly: in order, touching, the last gap ending at the range's end.
    pieces = sorted(failed + gaps)
    assert pieces[0][0] == iso(START) and pieces[-1][1] == iso(end) == gaps[-1][1]
    assert all(a[1] == b[0] for a, b in itertools.pairwise(pieces)), pieces


def test_missing_graph_permission_fails_the_collection_naming_it(make_emulator: MakeEmulator, tmp_path: Path) -> None:
    emulator = make_emulator(register=False)
    emulator.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET, graph_permissions=()))
    end = START + timedelta(hours=CHUNKS)
    with serve(emulator, tmp_path) as host:
        assert host.post(body(end, interval=60, k=3, collectionId="noperm")).status_code == 202
        summary = host.wait("noperm")
    _check_stopped_early(summary)
    reason = summary["reason"]
    assert isinstance(reason, dict) and reason["kind"] == "permission"
    assert "AuditLogsQuery.Read.All" in reason["message"]
    assert emulator.stats.queries_created[TENANT] == emulator.stats.queries_deleted[TENANT]


def test_permission_revoked_mid_run_stops_and_deletes_the_queries_in_flight(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    """Queries exist when the doom arrives (their status polls are denied): each is still deleted afterwards."""

    def slow_queries(config: EmulatorConfig) -> None:
        config.graph.completion_delay_seconds = 30.0
        config.graph.delete_supported = True  # the deletion path under test needs a service that deletes

    emulator = make_emulator(configure=slow_queries)
    end = START + timedelta(hours=CHUNKS)
    with serve(emulator, tmp_path, {"COLLECTOR_DELETE_QUERIES": "true"}) as host:
        assert host.post(body(end, interval=60, k=3, collectionId="revoked")).status_code == 202
        # Wait until three queries are live: a condition with a generous deadline, not a count of polls, so a
        # loaded CI box (slower engine, faster polls relative to it) cannot end the wait early.
        deadline = time.monotonic() + 120
        while emulator.stats.queries_created[TENANT] < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert emulator.stats.queries_created[TENANT] == 3
        emulator.faults.deny_graph_methods = frozenset({"GET"})  # polls now answer a permanent 403
        summary = host.wait("revoked")
    _check_stopped_early(summary)
    assert summary["reason"]["kind"] == "permission"
    assert emulator.stats.queries_created[TENANT] == emulator.stats.queries_deleted[TENANT] == 3
    assert summary["queries"]["deleted"] == 3


def test_missing_exchange_role_named_only_inside_the_cmdlet_error_fails_the_collection_with_the_fix(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    """The default emulator answers a missing role as 400 "Error executing cmdlet", the reason only in details."""
    emulator = make_emulator(register=False)
    emulator.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET, exchange_role=False))
    end = START + timedelta(hours=CHUNKS)
    with serve(emulator, tmp_path) as host:
        assert host.post(body(end, interval=60, k=3, source="exchange", collectionId="norole")).status_code == 202
        summary = host.wait("norole")
    _check_stopped_early(summary)
    reason = summary["reason"]
    assert isinstance(reason, dict) and reason["kind"] == "permission"
    assert "View-Only Audit Logs" in reason["message"] and "isn't supported in this scenario" in reason["message"]


def test_a_wrong_anchor_mailbox_fails_the_collection_naming_the_tenant_rule(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    def routes_elsewhere(config: EmulatorConfig) -> None:
        config.exchange.anchor_domain = "contosoltd.onmicrosoft.com"  # the service routes this tenant by another name

    emulator = make_emulator(configure=routes_elsewhere)
    end = START + timedelta(hours=CHUNKS)
    with serve(emulator, tmp_path) as host:
        assert host.post(body(end, interval=60, k=3, source="exchange", collectionId="anchor")).status_code == 202
        summary = host.wait("anchor")
    _check_stopped_early(summary)
    reason = summary["reason"]
    assert isinstance(reason, dict) and reason["kind"] == "routing"
    assert "ErrorIncorrectRoutingHint" in reason["message"] and "onmicrosoft.com" in reason["message"]


def test_a_tenant_with_auditing_off_fails_the_collection_at_once_with_the_fix(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    """Graph answers every create 400 UnknownError with "Status":"AuditingDisabledTenant": one answer dooms them all."""

    def auditing_off(config: EmulatorConfig) -> None:
        config.tenants[0] = dataclasses.replace(config.tenants[0], auditing_enabled=False)

    emulator = make_emulator(configure=auditing_off)
    end = START + timedelta(hours=CHUNKS)
    with serve(emulator, tmp_path) as host:
        assert host.post(body(end, interval=60, k=3, collectionId="auditoff")).status_code == 202
        summary = host.wait("auditoff")
        manifest = host.manifest("auditoff")
    _check_stopped_early(summary)
    reason = summary["reason"]
    assert isinstance(reason, dict) and reason["kind"] == "auditing_disabled", reason
    assert "AuditingDisabledTenant" in reason["message"]
    assert "Set-AdminAuditLogConfig -UnifiedAuditLogIngestionEnabled $true" in reason["fix"]
    assert "Start recording user and admin activity" in reason["fix"]
    assert manifest["reason"]["kind"] == "auditing_disabled"
    assert manifest["reason"]["fix"] == reason["fix"]
    _check_manifest_reports_the_windows_never_run(manifest, end)
    assert emulator.stats.queries_created[TENANT] == 0
