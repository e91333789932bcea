"""Fixtures for the adapter tests that run against the M365 emulator over real HTTPS with real msal tokens."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.audit.config import AuditApiConfig
from shared.audit.exchange import ExchangeAuditClient
from shared.audit.exchange_session import read_window
from shared.audit.graph import GraphAuditClient
from shared.audit.ports import AuditFilters, QueryState, RecordPage, TimeWindow
from shared.records.rules import Deduplicator, trim_to_window

TENANT = "3f2c9a10-5b7e-4c1d-9e8f-0a1b2c3d4e5f"
DOMAIN = "contoso.onmicrosoft.com"
CLIENT_ID = "6a1b9d2e-0c3f-4e5a-8b7c-9d0e1f2a3b4c"
SECRET = "emulator-Secret~value-123"
DAY = datetime(2024, 3, 4, tzinfo=UTC)
FAST = 0.0005  # retry waits scaled down: a Retry-After of 1 s becomes 0.5 ms


@dataclass
class Emu:
    handle: Any

    def config(self, **overrides: Any) -> AuditApiConfig:
        settings: dict[str, Any] = {
            "tenant_id": TENANT,
            "client_id": CLIENT_ID,
            "client_secret": SECRET,
            "authority_host": self.handle.authority_host,
            "graph_base_url": self.handle.graph_base_url,
            "exchange_base_url": self.handle.exchange_base_url,
            "ca_bundle": str(self.handle.ca_bundle),
            "http_timeout_seconds": 20.0,
            "max_attempts": 12,
        }
        settings.update(overrides)
        return AuditApiConfig(**settings)

    def exchange_config(self, **overrides: Any) -> AuditApiConfig:
        """Exchange routes by the tenant's initial domain (its anchor mailbox), so it is named by that."""
        return self.config(tenant_id=DOMAIN, **overrides)


OLD_EXCHANGE = {
    "result_count": "total",
    "over_delivery": 0.0,
    "session_mode": "continue",
    "unsorted": False,
    "cancel_warning_rate": 0.0,
    "transient_400_rate": 0.0,
    "false_answer_rate": 0.0,
    "page_size_mode": "fixed",
}
"""The Exchange service before 2026: the adapter's mechanics are tested on it (``start_emulator(exchange=...)`` and
``test_exchange_evidence.py`` / the e2e tests run the 2026 defaults)."""


QUERIES_THAT_FINISH = {"fail_rate": 0.0, "vanish_rate": 0.0, "stuck_rate": 0.0}
"""Graph at its defaults (short first reads, UnknownError 400s, gateway pages) but for queries that fail, vanish or
stay running: the adapter reports such a query (``QueryFailedError``, a status that stays pending) and resubmitting it
is the collector's window, tested end to end (``tests/e2e/test_graph_evidence.py``), so an adapter test that reads a
query needs a service that finishes it."""


def start_emulator(**config_kwargs: Any) -> Any:
    from m365_emulator import EmulatorConfig, TenantSpec, run_emulator
    from m365_emulator.config import ExchangeSettings, GraphSettings

    tenant = TenantSpec(tenant_id=TENANT, domain=DOMAIN, seed=7, records_per_hour=240.0)
    config_kwargs.setdefault("exchange", ExchangeSettings(**OLD_EXCHANGE))  # type: ignore[arg-type]
    config_kwargs.setdefault("graph", GraphSettings(**QUERIES_THAT_FINISH))
    return run_emulator(EmulatorConfig(tenants=[tenant], **config_kwargs))


def register(handle: Any, **kwargs: Any) -> None:
    from m365_emulator import AppRegistration

    settings: dict[str, Any] = {"tenant_id": TENANT, "client_id": CLIENT_ID, "client_secret": SECRET}
    settings.update(kwargs)
    handle.register_app(AppRegistration(**settings))


@pytest.fixture(scope="module")
def emu() -> Iterator[Emu]:
    with start_emulator() as handle:
        register(handle)
        yield Emu(handle)


@pytest.fixture(autouse=True)
def _calm_faults(request: pytest.FixtureRequest) -> Iterator[None]:
    """Faults are mutable on a running emulator: every test starts and ends without any."""
    yield
    if "emu" in request.fixturenames:
        handle = request.getfixturevalue("emu").handle
        faults = handle.faults
        faults.rate_429 = faults.rate_5xx = faults.malformed_rate = 0.0
        faults.malformed_record_ids = frozenset()
        faults.transient_403_count = 0


def window(hours: float, *, offset_hours: float = 0.0) -> TimeWindow:
    start = DAY + timedelta(hours=offset_hours)
    return TimeWindow(start, start + timedelta(hours=hours))


def wait_for_query(client: GraphAuditClient, query_id: str) -> Any:
    """Polls like the orchestrator would (it uses durable timers; a test just sleeps briefly between polls)."""
    for _ in range(400):
        status = client.get_query(query_id)
        if status.state is not QueryState.PENDING:
            return status
        time.sleep(0.02)
    raise AssertionError(f"query {query_id} never finished")


@dataclass
class Collected:
    ids: list[str]
    pages: list[RecordPage]
    trimmed: int
    duplicates: int


def collect(pages: Any, win: TimeWindow) -> Collected:
    dedupe = Deduplicator()
    ids: list[str] = []
    kept_pages: list[RecordPage] = []
    trimmed = duplicates = 0
    for page in pages:
        kept_pages.append(page)
        kept, removed = trim_to_window(page.records, win)
        trimmed += removed
        unique, dupes = dedupe.filter(kept)
        duplicates += dupes
        ids.extend(r["id"] for r in unique)
    return Collected(ids, kept_pages, trimmed, duplicates)


def graph_collect(client: GraphAuditClient, win: TimeWindow, filters: AuditFilters | None = None) -> Collected:
    """A query's records as the collector reads them: again while short of what the query says it holds
    (``activities.graph_export``), merged by id."""
    from activities.graph_export import GraphReads

    query_id = client.create_query(win, filters or AuditFilters(), display_name=f"test {win.start:%H%M}")
    status = wait_for_query(client, query_id)
    assert status.state is QueryState.SUCCEEDED, status
    try:
        reads = GraphReads(client, query_id, status)
        got = collect(reads.pages(), win)
        assert not reads.incomplete, reads.evidence()
        return got
    finally:
        client.delete_query(query_id)


def exchange_collect(client: ExchangeAuditClient, win: TimeWindow, filters: AuditFilters | None = None) -> Collected:
    """The window read as the lane reads a chunk: ``read_block`` call after call, the cursor carried."""
    calls = read_window(client, win, filters or AuditFilters())
    return collect((page for pages, _ in calls for page in pages), win)
