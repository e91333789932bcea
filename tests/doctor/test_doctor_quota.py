"""The doctor's Graph probe submits a query, so its Graph slot takes a credit of the tenant's daily Graph quota like
a lane's (``http_api.budget_slots``): once per run, and when the collector's share is spent it answers 503
``daily_quota`` with the time it frees, probing nothing.

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

QUOTA = {"COLLECTOR_GRAPH_DAILY_QUERIES": "4", "COLLECTOR_GRAPH_DAILY_RESERVE": "1"}


def client_with_quota(env: dict[str, str]) -> FakeClient:
    settings = Settings.from_env(env)
    client = FakeClient()
    client.budget_capacity = Limits(settings.budget_graph, 600, 10, settings.graph_quota)  # type: ignore[assignment]
    return client


def graph_state(client: FakeClient) -> object:
    return client.entities.get((names.ENTITY_BUDGET, entity_id(TENANT, "graph").key))


def test_the_graph_probe_takes_one_credit_and_is_refused_with_the_time_once_the_share_is_spent(
    emu: Emulator, tmp_path: Path
) -> None:
    env = app_env(emu, folder_output(tmp_path), **QUOTA)
    client = client_with_quota(env)
    for run in range(3):  # the collector's share is 3 a day: three doctors probe Graph
        answer = asyncio.run(doctor_response({"tenantId": DOMAIN, "source": "graph"}, env, client))
        assert answer.status == 200, answer.body
        assert answer.body["budget"]["graph"]["granted"] is True
        assert quota_view(graph_state(client), NOW, 3)["used"] == run + 1  # one credit per run, never two
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


def test_an_exchange_probe_takes_no_graph_credit(emu: Emulator, tmp_path: Path) -> None:
    env = app_env(emu, folder_output(tmp_path), **QUOTA)
    client = client_with_quota(env)
    answer = asyncio.run(doctor_response({"tenantId": DOMAIN, "source": "exchange"}, env, client))
    assert answer.status == 200, answer.body
    assert graph_state(client) is None
