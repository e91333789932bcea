"""Filters verified, not trusted (issue 17): whatever the Graph service does with a query's filters, the output holds
exactly the records the request asked for, and the manifest counts what was trimmed for being outside them.

The service may leak records its filters exclude (``filter_leak_rate``), and may honour only one of the two names of
the service filter (the emulator's default honours ``serviceFilter`` and ignores ``serviceFilters``)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from m365_emulator import EmulatorConfig
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import START, TENANT, body, serve

END = START + timedelta(hours=6)


def _leaky(config: EmulatorConfig) -> None:
    config.graph.filter_leak_rate = 0.25


def test_a_service_that_leaks_records_outside_the_filters_still_yields_exactly_the_filtered_truth(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    emulator = make_emulator(records_per_hour=400.0, configure=_leaky)
    filters = {"operations": ["FileAccessed", "Send"], "recordTypes": ["sharePointFileOperation", "exchangeItem"]}
    truth = emulator.ground_truth_ids(TENANT, START, END, operations=filters["operations"])
    everything = emulator.ground_truth_ids(TENANT, START, END)
    with serve(emulator, tmp_path) as host:
        assert host.post(body(END, interval=120, k=3, filters=filters, collectionId="leaky")).status_code == 202
        summary = host.wait("leaky")
        ids = host.chunk_ids("leaky")
        manifest = host.manifest("leaky")
    assert summary["status"] == "Completed", summary
    assert len(ids) == len(set(ids)) and sorted(ids) == sorted(truth)
    leaked_inside = manifest["totals"]["filteredOut"]
    assert leaked_inside > 0.1 * (len(everything) - len(truth))  # the service really leaked, and it was counted
    assert sum(chunk["filteredOut"] for chunk in manifest["chunks"]) == leaked_inside
    assert manifest["filterCheck"] == {"checked": ["recordTypes", "operations"], "trusted": []}


@pytest.mark.parametrize("honoured", ["singular", "plural", "neither"])
def test_a_service_filter_is_exact_whichever_name_the_service_honours(
    make_emulator: MakeEmulator, tmp_path: Path, honoured: str
) -> None:
    def service_filter(config: EmulatorConfig) -> None:
        config.graph.service_filter = honoured

    emulator = make_emulator(records_per_hour=300.0, configure=service_filter)
    truth = emulator.ground_truth_ids(TENANT, START, END, services=["Exchange"])
    with serve(emulator, tmp_path) as host:
        request = body(END, interval=180, k=2, filters={"service": "Exchange"}, collectionId="svc")
        assert host.post(request).status_code == 202
        summary = host.wait("svc")
        ids = host.chunk_ids("svc")
        manifest = host.manifest("svc")
    assert summary["status"] == "Completed", summary
    assert sorted(ids) == sorted(truth)
    assert manifest["filters"] == {"service": "Exchange"}
    # The collector sends both names: a service honouring either filters itself; one honouring neither is trimmed.
    assert (manifest["totals"]["filteredOut"] > 0) is (honoured == "neither")
