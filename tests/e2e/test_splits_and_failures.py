"""Issue 6, item 4: splits over the source caps, a permanently failing chunk, retry-failed, and idempotent starts.

Also the two adapter gaps closed with it: an Exchange window still over the session cap at the minimum size is
collected up to the cap and reported incomplete; a Graph create whose response is lost is not submitted twice.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from m365_emulator import EmulatorConfig
from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import START, TENANT, body, serve


def _graph_cap(config: EmulatorConfig) -> None:
    config.graph.record_count_limit = 150  # a 4-hour chunk holds ~240 (+ bleed): over; a 2-hour one ~120: under


def _exchange_cap(config: EmulatorConfig) -> None:
    config.exchange.session_cap = 150


@pytest.mark.parametrize("source", ["graph", "exchange"])
def test_chunks_over_the_cap_are_split_and_output_is_exact(
    make_emulator: MakeEmulator, tmp_path: Path, source: str
) -> None:
    emulator = make_emulator(records_per_hour=60.0, configure=_graph_cap if source == "graph" else _exchange_cap)
    end = START + timedelta(hours=12)
    env = {"AUDIT_EXCHANGE_SESSION_CAP": "150"}
    with serve(emulator, tmp_path, env) as host:
        assert host.post(body(end, interval=240, k=2, source=source, collectionId="cap")).status_code == 202
        summary = host.wait("cap")
    assert summary["status"] == "Completed", summary
    extra = summary["progress"]["splits"] + (summary["exchange"] or {}).get("presplits", 0)
    assert extra >= 3  # every 4-hour chunk was over the cap (Exchange: split before it started, once learned)
    assert summary["progress"]["completed"] == 3 + extra
    ids = host.chunk_ids("cap")
    truth = emulator.ground_truth_ids(TENANT, START, end)
    assert len(ids) == len(set(ids)) and sorted(ids) == sorted(truth)
    manifest = host.manifest("cap")
    assert manifest["gaps"] == [] and manifest["totals"]["records"] == len(truth)
    if source == "graph":  # deletion is off by default: every query is reported left on the service
        assert summary["queries"]["leftOnService"] == emulator.stats.queries_created[TENANT]


def test_failed_chunk_is_listed_then_retry_failed_completes_it(make_emulator: MakeEmulator, tmp_path: Path) -> None:
    bad_start = START + timedelta(hours=2)
    bad = (bad_start, bad_start + timedelta(hours=1))

    def fail_one_window(config: EmulatorConfig) -> None:
        config.faults.fail_query_windows = (bad,)

    emulator = make_emulator(configure=fail_one_window)
    end = START + timedelta(hours=6)
    request = body(end, interval=60, k=3, collectionId="partial")
    with serve(emulator, tmp_path) as host:
        before = host.instances()
        assert host.post(request).status_code == 202
        again = host.post(request)
        assert again.status_code == 200 and again.json()["existing"] is True
        first = host.wait("partial")
        started = [i for i in host.instances() if i not in before and not i["instanceId"].startswith("@")]
        assert [i["instanceId"] for i in started] == ["partial"]  # the second POST started nothing (the tenant's
        # budget entity, "@tenant_budget@<tenant>:graph", is listed too: the list API lists entities)

        assert first["status"] == "CompletedWithFailures", first
        assert first["progress"]["completed"] == 5 and first["progress"]["failed"] == 1
        [failure] = first["failures"]
        assert failure["window"].startswith(bad_start.isoformat().replace("+00:00", "")), failure
        assert failure["kind"] == "query_failed" and "failed" in failure["reason"]
        assert "resubmitted 2x" in failure["reason"]  # issue 25: a failed query is submitted again, twice at most
        assert host.manifest("partial")["failures"]

        emulator.faults.fail_query_windows = ()
        retried = host.post_path("/api/collections/partial/retry-failed")
        assert retried.status_code == 202, retried.text
        retry_id = retried.json()["collectionId"]
        second = host.wait(retry_id)
        assert second["status"] == "Completed", second
        assert second["parentCollectionId"] == "partial" and second["progress"]["completed"] == 1

        union = host.chunk_ids("partial") + host.chunk_ids(retry_id)
    truth = emulator.ground_truth_ids(TENANT, START, end)
    assert len(union) == len(set(union)) and sorted(union) == sorted(truth)
    assert sorted(host.chunk_ids(retry_id)) == sorted(emulator.ground_truth_ids(TENANT, *bad))
    # 6 windows, the bad one's query resubmitted twice, and the retry's; one more for each query the emulator's rates
    # made fail, vanish or stay running (the bad window's three are counted there too)
    drawn = emulator.stats.faulted(TENANT) - 3
    assert emulator.stats.queries_created[TENANT] == 6 + 2 + 1 + drawn and emulator.stats.queries_deleted[TENANT] == 0


def test_exchange_minimum_window_over_the_cap_is_collected_up_to_the_cap(
    make_emulator: MakeEmulator, tmp_path: Path
) -> None:
    def tiny_cap(config: EmulatorConfig) -> None:
        config.exchange.session_cap = 20

    emulator = make_emulator(records_per_hour=120.0, configure=tiny_cap)
    end = START + timedelta(hours=1)
    # 60-minute chunks split once into 30-minute ones (the minimum: 15 minutes would be under 1,800 s), which still
    # hold ~60 records against a session cap of 20.
    env = {"AUDIT_EXCHANGE_SESSION_CAP": "20", "COLLECTOR_MIN_SPLIT_SECONDS": "1800"}
    with serve(emulator, tmp_path, env) as host:
        assert host.post(body(end, interval=60, k=2, source="exchange", collectionId="mincap")).status_code == 202
        summary = host.wait("mincap")
    assert summary["status"] == "CompletedWithFailures", summary
    assert summary["progress"]["splits"] == 1 and summary["progress"]["incomplete"] == 2
    ids = host.chunk_ids("mincap")
    assert len(ids) == 40 and len(set(ids)) == 40  # each half: the first 20 records its session could give
    truth = set(emulator.ground_truth_ids(TENANT, START, end))
    assert len(truth) > 40 and set(ids) <= truth
    manifest = host.manifest("mincap")
    assert manifest["totals"]["incompleteChunks"] == 2 and manifest["totals"]["records"] == 40


def test_graph_create_with_a_lost_response_is_not_submitted_twice(make_emulator: MakeEmulator, tmp_path: Path) -> None:
    def lose_creates(config: EmulatorConfig) -> None:
        config.faults.create_then_5xx_count = 3  # the query is created, the answer is a 503

    emulator = make_emulator(configure=lose_creates)
    end = START + timedelta(hours=4)
    with serve(emulator, tmp_path) as host:
        assert host.post(body(end, interval=60, k=2, collectionId="lost")).status_code == 202
        summary = host.wait("lost")
    assert summary["status"] == "Completed", summary
    assert emulator.stats.injected_5xx[(TENANT, "graph")] == 3
    # One query per chunk, none duplicated by the retries (one more for each the emulator failed, lost or left running)
    created = 4 + emulator.stats.faulted(TENANT)
    assert emulator.stats.queries_created[TENANT] == created and summary["queries"]["leftOnService"] == created
    ids = host.chunk_ids("lost")
    assert sorted(ids) == sorted(emulator.ground_truth_ids(TENANT, START, end))
