"""Issue 9: the collector against the emulator's least convenient plausible service, end to end.

Exchange answers InvokeCommand in HTTP pages (1,000 rows by default, or 5,000, or a mix) with an ``@odata.nextLink``
and routes only the app-only anchor mailbox (chunks of ~3,000 to ~60,000 records at 1,000-row pages, whatever
``ResultCount`` says: ``test_exchange_evidence.py``); Graph refuses (or ignores) ``$filter`` on the query list,
answers DELETE 404 and sometimes serves a broken JSON record page. Each collection must still be exact against the
ground truth, and the summary and manifest must say truthfully what happened to the Graph queries.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from m365_emulator import EmulatorConfig
from shared.models import parse_iso
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import START, TENANT, body, serve

NO_QUERIES = {"deleted": 0, "leftOnService": 0, "deleteUnsupported": 0, "deleteFailed": 0}


def _exact(host: object, emulator: object, collection_id: str, end: object) -> list[str]:
    ids = host.chunk_ids(collection_id)  # type: ignore[attr-defined]
    truth = emulator.ground_truth_ids(TENANT, START, end)  # type: ignore[attr-defined]
    assert len(ids) == len(set(ids)), "duplicate record ids in the output"
    assert sorted(ids) == sorted(truth)
    return truth  # type: ignore[no-any-return]


@pytest.mark.parametrize(("mode", "size"), [("fixed", 5000), ("mix", 1000)])
def test_exchange_is_exact_with_5000_row_or_mixed_pages(
    make_emulator: MakeEmulator, tmp_path: Path, mode: str, size: int
) -> None:
    def pages(config: EmulatorConfig) -> None:
        config.exchange.page_size_mode = mode
        config.exchange.page_size = size

    emulator = make_emulator(records_per_hour=6_500.0, configure=pages)
    end = START + timedelta(hours=2)
    with serve(emulator, tmp_path) as host:
        assert host.post(body(end, interval=60, k=2, source="exchange", collectionId=mode)).status_code == 202
        summary = host.wait(mode, limit_seconds=300)
    assert summary["status"] == "Completed", summary
    truth = _exact(host, emulator, mode, end)
    assert len(truth) > 2 * 5_000  # every planned chunk holds more than a call returns
    anchors = set(emulator.stats.anchors)
    assert anchors == {"APP:SystemMailbox{bb558c35-97f1-4cb9-8ff7-d53741dc928c}@contoso.onmicrosoft.com"}


def test_exchange_high_completeness_is_passed_and_recorded(make_emulator: MakeEmulator, tmp_path: Path) -> None:
    emulator = make_emulator(records_per_hour=60.0)
    end = START + timedelta(hours=2)
    with serve(emulator, tmp_path) as host:
        request = body(end, interval=60, k=2, source="exchange", collectionId="hc", highCompleteness=True)
        assert host.post(request).status_code == 202
        summary = host.wait("hc")
    assert summary["status"] == "Completed", summary
    _exact(host, emulator, "hc", end)
    # Every InvokeCommand call carried it: at least one per chunk (a small chunk is read in one call since the
    # count probe went away; the figure was "probe + session call", 4, before).
    calls = emulator.stats.requests[(TENANT, "exchange")]
    assert emulator.stats.high_completeness_calls[(TENANT, "exchange")] == calls >= 2
    assert host.manifest("hc")["options"] == {"highCompleteness": True}


@pytest.mark.parametrize("list_filter", ["refuse", "ignore"])
def test_graph_is_exact_and_reports_its_queries_left_on_the_service(
    make_emulator: MakeEmulator, tmp_path: Path, list_filter: str
) -> None:
    def lose_creates(config: EmulatorConfig) -> None:
        config.graph.list_filter = list_filter
        config.faults.create_then_5xx_count = 2  # lost create responses: the look-up by name must find them

    emulator = make_emulator(records_per_hour=120.0, configure=lose_creates)
    end = START + timedelta(hours=5)
    with serve(emulator, tmp_path) as host:
        assert host.post(body(end, interval=60, k=2, collectionId="g")).status_code == 202
        summary = host.wait("g")
    assert summary["status"] == "Completed", summary
    _exact(host, emulator, "g", end)
    # One per chunk: no lost create was submitted twice (one more for each the emulator failed, lost or left running)
    created = 5 + emulator.stats.faulted(TENANT)
    assert emulator.stats.queries_created[TENANT] == created
    assert emulator.stats.queries_deleted[TENANT] == 0 and emulator.stats.deletes_refused[TENANT] == 0
    left = {**NO_QUERIES, "leftOnService": created}
    assert summary["queries"] == left
    manifest = host.manifest("g")
    assert manifest["queries"] == {**left, "deletion": "off"}


def test_graph_with_deletion_on_never_claims_a_query_deleted_on_a_404(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    emulator = make_emulator(records_per_hour=60.0)
    end = START + timedelta(hours=3)
    with serve(emulator, tmp_path, {"COLLECTOR_DELETE_QUERIES": "true"}) as host:
        assert host.post(body(end, interval=60, k=2, collectionId="d")).status_code == 202
        summary = host.wait("d")
    assert summary["status"] == "Completed", summary
    _exact(host, emulator, "d", end)
    assert emulator.stats.deletes_refused[TENANT] == 3 and emulator.stats.queries_deleted[TENANT] == 0
    # A query given up on (the emulator failed, lost or left it running) is left on the service, not deleted
    unsupported = {**NO_QUERIES, "deleteUnsupported": 3, "leftOnService": emulator.stats.faulted(TENANT)}
    assert summary["queries"] == unsupported
    assert host.manifest("d")["queries"] == {**unsupported, "deletion": "on"}


def test_graph_with_deletion_on_and_supported_reports_deleted(make_emulator: MakeEmulator, tmp_path: Path) -> None:
    def deletable(config: EmulatorConfig) -> None:
        config.graph.delete_supported = True  # the friendlier service: deletion works

    emulator = make_emulator(records_per_hour=60.0, configure=deletable)
    end = START + timedelta(hours=2)
    with serve(emulator, tmp_path, {"COLLECTOR_DELETE_QUERIES": "true"}) as host:
        assert host.post(body(end, interval=60, k=2, collectionId="del")).status_code == 202
        summary = host.wait("del")
    assert summary["status"] == "Completed", summary
    given_up = emulator.stats.faulted(TENANT)  # failed, lost or left running: left on the service, not deleted
    assert emulator.stats.queries_created[TENANT] - given_up == emulator.stats.queries_deleted[TENANT] == 2
    assert summary["queries"] == {**NO_QUERIES, "deleted": 2, "leftOnService": given_up}


def test_broken_record_pages_are_retried_and_a_chunk_that_never_reads_fails_whole(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    def often_broken(config: EmulatorConfig) -> None:
        config.faults.broken_page_rate = 0.5  # half of all record page reads are broken JSON
        config.graph.page_size = 50  # several pages per chunk, so a break can come after some were written
        # Broken pages alone: no short first read (a second read would double the pages to break), no other fault
        config.graph.short_read_rate = config.graph.unknown_error_rate = config.graph.gateway_error_rate = 0.0

    emulator = make_emulator(records_per_hour=200.0, configure=often_broken)
    end = START + timedelta(hours=6)
    # Two HTTP reads per page and one export attempt per chunk: with half the reads broken, some chunks fail.
    env = {"AUDIT_MAX_ATTEMPTS": "2", "COLLECTOR_MAX_ATTEMPTS": "1", "AUDIT_PAGE_SIZE": "50"}
    with serve(emulator, tmp_path, env) as host:
        assert host.post(body(end, interval=60, k=3, collectionId="broken")).status_code == 202
        summary = host.wait("broken")
    assert emulator.stats.broken_pages[(TENANT, "graph")] > 0
    failed = summary["failures"]
    assert summary["status"] == "CompletedWithFailures", summary
    assert failed and all("unreadable JSON" in f["reason"] for f in failed)
    manifest = host.manifest("broken")
    written = {(c["chunk"]["start"], c["chunk"]["end"]) for c in manifest["chunks"]}
    assert len(written) + len(failed) == 6 and manifest["gaps"] == []
    assert written, "every chunk failed: the seeded draw no longer mixes outcomes"
    print(f"broken pages: {len(written)} chunks written whole, {len(failed)} failed with the reason")
    for chunk in manifest["chunks"]:  # every chunk written is whole: exactly its window's ground truth
        start, stop = (chunk["chunk"]["start"], chunk["chunk"]["end"])
        truth = emulator.ground_truth_ids(TENANT, parse_iso(start), parse_iso(stop))
        assert chunk["records"] == len(truth)
