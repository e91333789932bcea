"""Fixtures of the doctor tests: one emulator per module (its knobs are live and restored after each test) with an
app registration per failure mode, and the app settings (an environment mapping) that point the doctor at it."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from m365_emulator import AppRegistration, Emulator, EmulatorConfig, TenantSpec, run_emulator

TENANT = "5d7e2c41-8a3b-4f6e-9c1d-2b3a4c5d6e7f"
DOMAIN = "contoso.onmicrosoft.com"
CLIENT = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
SECRET = "doctor-Secret~value-8421"
NO_GRAPH_CLIENT = "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
NO_ROLE_CLIENT = "2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e"
NO_MANAGE_CLIENT = "3c4d5e6f-7a8b-4c9d-8e1f-2a3b4c5d6e7f"


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    config = EmulatorConfig(tenants=[TenantSpec(TENANT, domain=DOMAIN, seed=5, records_per_hour=400.0)])
    config.graph.completion_delay_seconds = 0.05
    # Queries that fail or vanish stay at the emulator's defaults (the doctor submits them again); one that stays
    # running does not: within its minutes the doctor cannot tell a stuck query from a slow one, so it waits out its
    # time budget and reports the query unfinished (test_doctor_emulator.py,
    # test_a_query_that_never_finishes_is_reported_within_the_time_budget), and every other test here reads records.
    config.graph.stuck_rate = 0.0
    with run_emulator(config) as running:
        running.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
        running.register_app(AppRegistration(TENANT, NO_GRAPH_CLIENT, client_secret=SECRET, graph_permissions=()))
        running.register_app(AppRegistration(TENANT, NO_ROLE_CLIENT, client_secret=SECRET, exchange_role=False))
        running.register_app(
            AppRegistration(TENANT, NO_MANAGE_CLIENT, client_secret=SECRET, exchange_manage_as_app=False)
        )
        yield running


@pytest.fixture
def knobs(emu: Emulator) -> Iterator[Emulator]:
    """The module's emulator; every Graph and Exchange knob a test turns is put back afterwards."""
    graph, exchange = dataclasses.asdict(emu.config.graph), dataclasses.asdict(emu.config.exchange)
    faults = dataclasses.replace(emu.faults)
    yield emu
    for name, value in graph.items():
        setattr(emu.config.graph, name, value)
    for name, value in exchange.items():
        setattr(emu.config.exchange, name, value)
    emu.faults = faults


def app_env(emu: Emulator, output: dict[str, str], **overrides: str) -> dict[str, str]:
    """App settings pointing the doctor at the emulator; ``output`` selects the output store."""
    env = {
        "AUDIT_CLIENT_ID": CLIENT,
        "AUDIT_CLIENT_SECRET": SECRET,
        "AUDIT_AUTHORITY_HOST": emu.authority_host,
        "AUDIT_GRAPH_BASE_URL": emu.graph_base_url,
        "AUDIT_EXCHANGE_BASE_URL": emu.exchange_base_url,
        "AUDIT_FEED_BASE_URL": emu.feed_base_url,
        "AUDIT_CA_BUNDLE": str(emu.ca_bundle),
        "AUDIT_MAX_RETRY_WAIT_SECONDS": "0.05",
        **output,
    }
    env.update(overrides)
    return env


def folder_output(path: Path) -> dict[str, str]:
    return {"OUTPUT_FOLDER": str(path)}


def process_env(env: dict[str, str]) -> dict[str, Any]:
    """``env`` for a child process: this one's environment without any collector setting or CA override."""
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AUDIT_", "OUTPUT_", "COLLECTOR_")) and k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
    }
    return {**keep, **env}
