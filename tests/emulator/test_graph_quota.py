"""The emulator's daily Graph submission quota (``m365_emulator.graph_quota``): at most N queries created per tenant
in any rolling 24 hours of its clock, a 429 without ``Retry-After`` beyond, counted only for queries created."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from m365_emulator import AppRegistration, EmulatorConfig, run_emulator
from tests.emulator.helpers import GRAPH_SCOPE, SECRET, TENANT, make_config, queries_url, session_for

BODY = {"filterStartDateTime": "2024-05-01T00:00:00Z", "filterEndDateTime": "2024-05-01T01:00:00Z"}


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 7, 8, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_the_default_quota_is_200_a_day() -> None:
    assert EmulatorConfig().graph.daily_submission_quota == 200
    assert EmulatorConfig().graph.daily_quota_retry_after_seconds == 0


def test_a_create_past_the_quota_is_429_without_retry_after_until_the_oldest_leaves_the_window() -> None:
    clock = Clock()
    config = make_config(graph__daily_submission_quota=3, graph__completion_delay_seconds=0.0)
    with run_emulator(config, clock=clock) as emu:
        emu.register_app(AppRegistration(TENANT, "app", client_secret=SECRET))
        graph = session_for(emu, GRAPH_SCOPE, "app")
        codes = []
        for _ in range(3):
            codes.append(graph.post(queries_url(emu), json=BODY).status_code)
            clock.now += timedelta(hours=1)
        refused = graph.post(queries_url(emu), json=BODY)
        codes.append(refused.status_code)
        assert codes == [201, 201, 201, 429]
        assert "Retry-After" not in refused.headers  # the least convenient answer: no hint when it frees
        assert refused.json()["error"]["code"] == "TooManyRequests"
        clock.now += timedelta(hours=20, minutes=59)  # 23:59 after the first: still spent
        assert graph.post(queries_url(emu), json=BODY).status_code == 429
        clock.now += timedelta(minutes=1)  # the first submission leaves the rolling 24 hours
        assert graph.post(queries_url(emu), json=BODY).status_code == 201
        assert graph.post(queries_url(emu), json=BODY).status_code == 429
        assert emu.graph.quota.refused[TENANT] == 3 and emu.graph.quota.peak[TENANT] == 3
        assert emu.graph.quota.most_in_any_day(TENANT) == 3 and emu.stats.queries_created[TENANT] == 4


def test_a_create_refused_for_concurrency_counts_nothing_and_the_header_is_a_knob() -> None:
    clock = Clock()
    config = make_config(
        graph__daily_submission_quota=2,
        graph__daily_quota_retry_after_seconds=3600,
        graph__max_concurrent_queries=1,
        graph__completion_delay_seconds=30.0,
    )
    with run_emulator(config, clock=clock) as emu:
        emu.register_app(AppRegistration(TENANT, "app", client_secret=SECRET))
        graph = session_for(emu, GRAPH_SCOPE, "app")
        assert graph.post(queries_url(emu), json=BODY).status_code == 201
        busy = graph.post(queries_url(emu), json=BODY)  # refused: one query is running
        assert busy.status_code == 429 and emu.graph.quota.used(TENANT) == 1
        emu.config.graph.max_concurrent_queries = 5
        assert graph.post(queries_url(emu), json=BODY).status_code == 201
        spent = graph.post(queries_url(emu), json=BODY)
        assert spent.status_code == 429 and spent.headers["Retry-After"] == "3600"


def test_quota_zero_means_none() -> None:
    config = make_config(graph__daily_submission_quota=0, graph__completion_delay_seconds=0.0)
    with run_emulator(config) as emu:
        emu.register_app(AppRegistration(TENANT, "app", client_secret=SECRET))
        graph = session_for(emu, GRAPH_SCOPE, "app")
        assert all(graph.post(queries_url(emu), json=BODY).status_code == 201 for _ in range(5))
