"""Fault knobs: 429/5xx storms with Retry-After, transient 403s, malformed records, slow pages, determinism."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import requests

from m365_emulator import Emulator, FaultConfig
from tests.emulator.helpers import T0, TENANT, invoke_url, queries_url, wait_for
from tests.emulator.test_exchange import search
from tests.emulator.test_graph import create, pages


def _statuses(graph: requests.Session, emu: Emulator, count: int) -> list[int]:
    return [graph.get(queries_url(emu)).status_code for _ in range(count)]


def test_rate_429_answers_about_that_fraction_with_retry_after(graph: requests.Session, emu: Emulator) -> None:
    emu.faults.rate_429 = 0.3
    emu.faults.retry_after_seconds = 2
    responses = [graph.get(queries_url(emu)) for _ in range(200)]
    throttled = [r for r in responses if r.status_code == 429]
    assert {r.status_code for r in responses} == {200, 429}
    assert 35 <= len(throttled) <= 85
    assert all(r.headers["Retry-After"] == "2" and r.json()["error"]["code"] == "TooManyRequests" for r in throttled)
    assert emu.stats.throttled_429[(TENANT, "graph")] == len(throttled)


def test_rate_5xx_serves_503_and_504(graph: requests.Session, emu: Emulator) -> None:
    emu.faults = FaultConfig(seed=3, rate_5xx=0.5)
    statuses = _statuses(graph, emu, 120)
    assert {200, 503, 504} == set(statuses)
    assert emu.stats.injected_5xx[(TENANT, "graph")] == statuses.count(503) + statuses.count(504)


def test_same_fault_seed_gives_the_same_sequence(graph: requests.Session, emu: Emulator) -> None:
    emu.faults = FaultConfig(seed=42, rate_429=0.3, rate_5xx=0.1)
    first = _statuses(graph, emu, 60)
    emu.faults = FaultConfig(seed=42, rate_429=0.3, rate_5xx=0.1)
    assert _statuses(graph, emu, 60) == first
    emu.faults = FaultConfig(seed=43, rate_429=0.3, rate_5xx=0.1)
    assert _statuses(graph, emu, 60) != first


def test_faults_can_target_one_api(graph: requests.Session, exo: requests.Session, emu: Emulator) -> None:
    emu.faults = FaultConfig(rate_429=1.0, apis=frozenset({"exchange"}))
    assert graph.get(queries_url(emu)).status_code == 200
    assert search(exo, emu, T0, T0 + timedelta(hours=1), SessionId="s").status_code == 429


def test_transient_403_count_counts_down(graph: requests.Session, emu: Emulator) -> None:
    emu.faults.transient_403_count = 2
    responses = [graph.get(queries_url(emu)) for _ in range(3)]
    assert [r.status_code for r in responses] == [403, 403, 200]
    assert responses[0].json()["error"]["code"] == "Forbidden"  # not a permission code: retrying helps
    assert emu.faults.transient_403_count == 0


def _graph_records(graph: requests.Session, emu: Emulator) -> list[dict[str, Any]]:
    query = create(graph, emu, T0, T0 + timedelta(hours=3))
    wait_for(lambda: graph.get(f"{queries_url(emu)}/{query['id']}").json()["status"] == "succeeded")
    return [r for page in pages(graph, emu, query["id"]) for r in page]


def test_malformed_record_ids_corrupt_only_those_records(graph: requests.Session, emu: Emulator) -> None:
    victims = emu.ground_truth_ids(TENANT, T0, T0 + timedelta(hours=3))[5:7]
    emu.faults.malformed_record_ids = frozenset(victims)
    records = _graph_records(graph, emu)
    broken = []
    for record in records:
        if isinstance(record["auditData"], str):
            broken.append(record["id"])
            try:
                json.loads(record["auditData"])
                raise AssertionError("malformed auditData parsed")
            except json.JSONDecodeError:
                pass
        else:
            assert record["auditData"]["Id"] == record["id"]
    assert broken == victims


def test_malformed_rate_is_stable_per_record_and_applies_to_exchange(
    graph: requests.Session, exo: requests.Session, emu: Emulator
) -> None:
    emu.faults.malformed_rate = 0.05
    first = {r["id"] for r in _graph_records(graph, emu) if isinstance(r["auditData"], str)}
    again = {r["id"] for r in _graph_records(graph, emu) if isinstance(r["auditData"], str)}
    assert first == again and first
    rows = search(exo, emu, T0, T0 + timedelta(hours=3), SessionId=str(uuid.uuid4())).json()["value"]
    bad = set()
    for row in rows:
        try:
            json.loads(row["AuditData"])
        except json.JSONDecodeError:
            bad.add(row["Identity"])
    assert bad and bad <= first | {r["Identity"] for r in rows}
    assert bad == first & {r["Identity"] for r in rows}


def test_slow_pages_still_serve_complete_pages(graph: requests.Session, exo: requests.Session, emu: Emulator) -> None:
    emu.faults.slow_page_seconds = 0.05
    assert len(_graph_records(graph, emu)) > 300
    assert search(exo, emu, T0, T0 + timedelta(hours=1), SessionId="slow").status_code == 200
    assert invoke_url(emu).endswith("/InvokeCommand")
