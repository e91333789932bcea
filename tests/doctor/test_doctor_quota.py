"""The doctor's Graph probe submits queries, so its Graph slot takes a credit of the tenant's daily Graph quota like
a lane's (``http_api.budget_slots``): one with the slot for its probe query, one more before each further query it
submits (the service-filter probe's two, a query submitted again after the service failed it), never a query without
its credit; when the collector's share is spent it answers 503 ``daily_quota`` with the time it frees, probing
nothing, and a share spent during the run stops the submissions that would exceed it.

``doctor_response`` against the emulator, with a Durable client whose budget entity is the real
``shared.budget.machine`` with the quota on (``FakeClient`` of the HTTP service tests).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from http_api.doctor import doctor_response
from m365_emulator import Emulator
from orchestrators.budget_entity import entity_id
from shared import names
from shared.budget.machine import Limits
from shared.budget.quota import quota_view
from shared.settings import Settings
from tests.collector.test_http_service import NOW, FakeClient
from tests.doctor.conftest import DOMAIN, TENANT, app_env, folder_output

QUOTA = {"COLLECTOR_GRAPH_DAILY_QUERIES": "10", "COLLECTOR_GRAPH_DAILY_RESERVE": "1"}
PER_RUN = 3
"""Queries a doctor run submits when the service fails none: its probe query and the service-filter probe's two."""
FINE = ("succeeded",)


def client_with_quota(env: dict[str, str]) -> FakeClient:
    settings = Settings.from_env(env)
    client = FakeClient()
    client.budget_capacity = Limits(settings.budget_graph, 600, 10, settings.graph_quota)  # type: ignore[assignment]
    return client


def graph_state(client: FakeClient) -> object:
    return client.entities.get((names.ENTITY_BUDGET, entity_id(TENANT, "graph").key))


def test_the_graph_probe_takes_a_credit_per_query_and_is_refused_with_the_time_once_the_share_is_spent(
    emu: Emulator, tmp_path: Path
) -> None:
    """Three queries a run, one more for each the service failed or lost (the emulator's rates decide): each with
    its credit, until the share of 9 is spent."""
    env = app_env(emu, folder_output(tmp_path), **QUOTA)
    client = client_with_quota(env)
    used = 0
    for _ in range(9):
        before = emu.stats.queries_created[TENANT]
        answer = asyncio.run(doctor_response({"tenantId": DOMAIN, "source": "graph"}, env, client))
        if answer.status == 503:
            break
        assert answer.status == 200, answer.body
        created = emu.stats.queries_created[TENANT] - before
        assert answer.body["budget"]["graph"]["credits"] == created >= 1  # one credit per query, never a query without
        used += created
        assert quota_view(graph_state(client), NOW, 9)["used"] == used  # ...as many as the service counted
    assert used == 9 and answer.status == 503
    created = emu.stats.queries_created[TENANT]

    refused = asyncio.run(doctor_response({"tenantId": DOMAIN, "source": "graph"}, env, client))

    assert refused.status == 503
    assert (refused.body["error"]["field"], refused.body["error"]["rule"]) == ("tenantId", "daily_quota")
    assert "nothing was probed" in refused.body["error"]["message"]
    assert refused.body["budget"]["graph"]["quotaUntil"] == "2024-11-19T12:00:00Z"  # the first run's time + 24 h
    assert emu.stats.queries_created[TENANT] == created  # no query submitted
    client.clock = NOW + timedelta(hours=24)
    again = asyncio.run(doctor_response({"tenantId": DOMAIN, "source": "graph"}, env, client))
    assert again.status == 200, again.body


def test_a_query_submitted_again_takes_one_more_credit(knobs: Emulator, tmp_path: Path) -> None:
    knobs.faults.query_outcomes = ("failed", *FINE * PER_RUN)  # the probe query failed: the doctor submits it again
    env = app_env(knobs, folder_output(tmp_path), **QUOTA)
    client = client_with_quota(env)
    before = knobs.stats.queries_created[TENANT]

    answer = asyncio.run(doctor_response({"tenantId": DOMAIN, "source": "graph"}, env, client))

    assert answer.status == 200, answer.body
    query = next(r for r in answer.body["results"] if r["probe"] == "graph.query")
    assert query["outcome"] == "ok" and "the service failed the first query; the second succeeded" in query["detail"]
    assert "no tenant budget counts" not in query["detail"]  # counted here
    assert answer.body["budget"]["graph"]["credits"] == PER_RUN + 1
    assert (
        quota_view(graph_state(client), NOW, 9)["used"] == PER_RUN + 1 == knobs.stats.queries_created[TENANT] - before
    )


def test_a_share_spent_during_the_run_stops_the_submissions_past_it(knobs: Emulator, tmp_path: Path) -> None:
    """A share of 2: the probe query and its resubmission take it; the service-filter probe submits nothing."""
    knobs.faults.query_outcomes = ("failed", "failed")
    env = app_env(knobs, folder_output(tmp_path), COLLECTOR_GRAPH_DAILY_QUERIES="3", COLLECTOR_GRAPH_DAILY_RESERVE="1")
    client = client_with_quota(env)
    before = knobs.stats.queries_created[TENANT]

    answer = asyncio.run(doctor_response({"tenantId": DOMAIN, "source": "graph"}, env, client))

    assert answer.status == 200, answer.body
    results = {r["probe"]: r for r in answer.body["results"]}
    query = results["graph.query"]
    assert query["outcome"] == "failed", query
    assert (
        "the service failed the first query; the service failed the second query; not submitted again: the "
        "collector's share of the tenant's daily Graph quota is spent until 2024-11-19T12:00:00Z"
    ) in query["detail"]
    assert knobs.stats.queries_created[TENANT] - before == 2  # never a query without its credit
    assert quota_view(graph_state(client), NOW, 2)["used"] == 2
    assert answer.body["budget"]["graph"]["quotaUntil"] == "2024-11-19T12:00:00Z"
    assert answer.body["budget"]["graph"]["granted"] is False  # the entity gave the slot back with the refusal


def test_the_service_filter_probe_submits_only_what_the_share_allows(knobs: Emulator, tmp_path: Path) -> None:
    knobs.faults.query_outcomes = FINE * 2  # the probe query and graph.filters' first
    env = app_env(knobs, folder_output(tmp_path), COLLECTOR_GRAPH_DAILY_QUERIES="3", COLLECTOR_GRAPH_DAILY_RESERVE="1")
    client = client_with_quota(env)
    before = knobs.stats.queries_created[TENANT]

    answer = asyncio.run(doctor_response({"tenantId": DOMAIN, "source": "graph"}, env, client))

    results = {r["probe"]: r for r in answer.body["results"]}
    assert results["graph.query"]["outcome"] == "ok"
    filters = results["graph.filters"]["detail"]
    assert "serviceFilter was honoured" in filters
    assert "serviceFilters was not probed (the collector's share of the tenant's daily Graph quota is spent" in filters
    assert knobs.stats.queries_created[TENANT] - before == 2


def test_an_exchange_probe_takes_no_graph_credit(emu: Emulator, tmp_path: Path) -> None:
    env = app_env(emu, folder_output(tmp_path), **QUOTA)
    client = client_with_quota(env)
    answer = asyncio.run(doctor_response({"tenantId": DOMAIN, "source": "exchange"}, env, client))
    assert answer.status == 200, answer.body
    assert graph_state(client) is None
