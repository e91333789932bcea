"""Fixtures of the collector's acceptance tests: an emulator factory (each test picks its tenant volume and knobs)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import datetime

import pytest

from m365_emulator import AppRegistration, Emulator, EmulatorConfig, TenantSpec, run_emulator
from tests.e2e.harness import CLIENT, SECRET, TENANT

MakeEmulator = Callable[..., Emulator]


@pytest.fixture
def make_emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[MakeEmulator]:
    """``make_emulator(records_per_hour=..., configure=fn, register=True)`` starts an emulator for this test."""
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    with ExitStack() as stack:

        def make(
            *,
            records_per_hour: float = 60.0,
            configure: Callable[[EmulatorConfig], None] | None = None,
            register: bool = True,
            clock: Callable[[], datetime] | None = None,
        ) -> Emulator:
            config = EmulatorConfig(tenants=[TenantSpec(TENANT, seed=23, records_per_hour=records_per_hour)])
            config.graph.completion_delay_seconds = 0.05
            config.graph.concurrency_retry_after_seconds = 0
            config.exchange.concurrency_retry_after_seconds = 0
            config.faults.retry_after_seconds = 0
            if configure is not None:
                configure(config)
            running = stack.enter_context(run_emulator(config, clock=clock))
            if register:
                running.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
            return running

        yield make
