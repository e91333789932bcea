"""Knobs added for the collector's acceptance tests: per-query latency jitter, failing windows, a lost create
response, listing by displayName, methods denied mid-run, and the query lifecycle timeline."""

from __future__ import annotations

from datetime import timedelta

import requests

from m365_emulator import Emulator
from tests.emulator.helpers import T0, TENANT, queries_url
from tests.emulator.test_exchange import search
from tests.emulator.test_graph import _z, create, wait_succeeded


def _status(graph: requests.Session, emu: Emulator, query_id: str) -> str:
    return str(graph.get(f"{queries_url(emu)}/{query_id}").json()["status"])


def test_latency_jitter_is_stable_per_query_and_varies_between_queries(graph: requests.Session, emu: Emulator) -> None:
    emu.config.graph.completion_jitter_seconds = 100.0
    windows = [(T0 + timedelta(hours=i), T0 + timedelta(hours=i + 1)) for i in range(6)]
    ids = [create(graph, emu, start, end)["id"] for start, end in windows]
    with emu.graph._lock:
        delays = [emu.graph._queries[q].extra_delay for q in ids]
    assert all(0 <= d < 100 for d in delays) and len(set(delays)) == 6
    again = create(graph, emu, *windows[0])["id"]
    with emu.graph._lock:
        assert emu.graph._queries[again].extra_delay == delays[0]
    assert _status(graph, emu, ids[0]) in ("notStarted", "running")  # still running: base 0.05 s + jitter


def test_failing_window_fails_overlapping_queries_only(
    graph: requests.Session, exo: requests.Session, emu: Emulator
) -> None:
    emu.faults.fail_query_windows = ((T0 + timedelta(hours=1), T0 + timedelta(hours=2)),)
    bad = create(graph, emu, T0 + timedelta(minutes=90), T0 + timedelta(hours=3))["id"]
    good = create(graph, emu, T0, T0 + timedelta(hours=1))["id"]  # touches the window's start, does not overlap
    assert wait_succeeded(graph, emu, good)["status"] == "succeeded"
    assert wait_succeeded(graph, emu, bad)["status"] == "failed"
    assert search(exo, emu, T0 + timedelta(hours=1), T0 + timedelta(hours=2), SessionId="s1").status_code == 400
    assert search(exo, emu, T0, T0 + timedelta(hours=1), SessionId="s2").status_code == 200


def test_create_then_5xx_creates_and_answers_503(graph: requests.Session, emu: Emulator) -> None:
    emu.faults.create_then_5xx_count = 1
    body = {"displayName": "lost", "filterStartDateTime": _z(T0), "filterEndDateTime": _z(T0 + timedelta(hours=1))}
    lost = graph.post(queries_url(emu), json=body)
    assert lost.status_code == 503
    assert emu.stats.queries_created[TENANT] == 1 and emu.faults.create_then_5xx_count == 0
    listed = graph.get(queries_url(emu)).json()["value"]
    assert [q["displayName"] for q in listed] == ["lost"]
    assert graph.post(queries_url(emu), json=body).status_code == 201


def test_list_filters_by_display_name_with_quotes(graph: requests.Session, emu: Emulator) -> None:
    emu.config.graph.list_filter = "honour"  # the knob: a service that honours $filter=displayName eq '...'
    create(graph, emu, T0, T0 + timedelta(hours=1), displayName="o'brien chunk")
    create(graph, emu, T0, T0 + timedelta(hours=1), displayName="other")
    found = graph.get(queries_url(emu), params={"$filter": "displayName eq 'o''brien chunk'"}).json()["value"]
    assert [q["displayName"] for q in found] == ["o'brien chunk"]
    assert graph.get(queries_url(emu), params={"$filter": "status eq 'running'"}).status_code == 400


def test_denied_methods_answer_a_permanent_403(graph: requests.Session, emu: Emulator) -> None:
    query_id = create(graph, emu, T0, T0 + timedelta(hours=1))["id"]
    emu.faults.deny_graph_methods = frozenset({"GET"})
    denied = graph.get(f"{queries_url(emu)}/{query_id}")
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "Authorization_RequestDenied"
    emu.config.graph.delete_supported = True  # so that an allowed DELETE shows as a 204
    assert graph.delete(f"{queries_url(emu)}/{query_id}").status_code == 204


def test_live_timeline_counts_created_and_not_deleted(graph: requests.Session, emu: Emulator) -> None:
    emu.config.graph.delete_supported = True  # a lane that deletes its query: it lives until the delete
    first = create(graph, emu, T0, T0 + timedelta(hours=1))["id"]
    second = create(graph, emu, T0, T0 + timedelta(hours=2))["id"]
    graph.delete(f"{queries_url(emu)}/{first}")
    graph.delete(f"{queries_url(emu)}/{second}")
    timeline = emu.stats.live_timeline(TENANT)
    assert [live for _, live in timeline] == [1, 2, 1, 0]
    assert [m for m, _ in timeline] == sorted(m for m, _ in timeline)
    assert emu.stats.live_timeline("00000000-0000-0000-0000-000000000000") == []


def test_live_timeline_without_deletion_ends_at_a_query_s_last_use(graph: requests.Session, emu: Emulator) -> None:
    first = create(graph, emu, T0, T0 + timedelta(hours=1))["id"]
    second = create(graph, emu, T0, T0 + timedelta(hours=2))["id"]
    wait_succeeded(graph, emu, first)  # polls: "used"
    graph.get(f"{queries_url(emu)}/{first}/records")  # its last use
    wait_succeeded(graph, emu, second)
    graph.delete(f"{queries_url(emu)}/{first}")  # answered 404: not a use, the query stays
    timeline = emu.stats.live_timeline(TENANT)
    assert [live for _, live in timeline] == [1, 2, 1, 0]


def test_exchange_calls_take_the_latency_and_are_logged_in_flight(exo: requests.Session, emu: Emulator) -> None:
    emu.config.exchange.latency_seconds = 0.05
    emu.config.exchange.latency_jitter_seconds = 0.1
    assert search(exo, emu, T0, T0 + timedelta(hours=1), SessionId="a").status_code == 200
    assert search(exo, emu, T0 + timedelta(hours=1), T0 + timedelta(hours=2), SessionId="b").status_code == 200
    assert search(exo, emu, T0 + timedelta(hours=1), T0 + timedelta(hours=2), SessionId="c").status_code == 200
    timeline = emu.stats.live_timeline(TENANT, "exchange")
    assert [live for _, live in timeline] == [1, 0, 1, 0]  # one window, two calls: one item until its last call ends
    durations = [timeline[1][0] - timeline[0][0], timeline[3][0] - timeline[2][0]]
    assert durations[0] >= 0.05 and durations[1] >= 0.1  # a lower bound only: the call slept at least the base latency
    assert emu.stats.live_timeline(TENANT) == []  # Graph's timeline is separate
