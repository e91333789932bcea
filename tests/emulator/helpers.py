"""Constants and helpers shared by the emulator tests (fixtures live in conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msal
import requests

from m365_emulator import Emulator, EmulatorConfig, TenantSpec

TENANT = "7a1f2c3d-4b5e-4f60-8a71-92b3c4d5e6f7"
DOMAIN = "contoso.onmicrosoft.com"
CLIENT = "0b1c2d3e-4f50-4a61-8b72-93c4d5e6f708"
SECRET = "emulator-test-secret"
GRAPH_SCOPE = "https://graph.microsoft.com/.default"
EXCHANGE_SCOPE = "https://outlook.office365.com/.default"
T0 = datetime(2024, 5, 1, tzinfo=UTC)


OLD_EXCHANGE = {
    "exchange__result_count": "total",
    "exchange__over_delivery": 0.0,
    "exchange__session_mode": "continue",
    "exchange__unsorted": False,
    "exchange__cancel_warning_rate": 0.0,
    "exchange__transient_400_rate": 0.0,
    "exchange__false_answer_rate": 0.0,
    "exchange__page_size_mode": "fixed",
}
"""The Exchange service before 2026 (true totals, sessions that continue, rows in order, 1,000-row pages, no disguised
failures or false empty answers): the tests of session and paging mechanics run on it; ``test_exchange_knobs.py``
runs each knob and the defaults."""


CALM_GRAPH = {
    "graph__unknown_error_rate": 0.0,
    "graph__gateway_error_rate": 0.0,
    "graph__fail_rate": 0.0,
    "graph__vanish_rate": 0.0,
    "graph__stuck_rate": 0.0,
    "graph__short_read_rate": 0.0,
}
"""Graph without the faults it answers at a rate (``test_graph_faults.py`` runs them and the defaults): the tests of
query and paging mechanics run on it."""


def make_config(**settings: object) -> EmulatorConfig:
    """A one-tenant config; ``graph__page_size=10`` style keywords set section fields (Exchange: ``OLD_EXCHANGE``,
    Graph: ``CALM_GRAPH`` unless overridden)."""
    config = EmulatorConfig(tenants=[TenantSpec(TENANT, DOMAIN, seed=7, records_per_hour=120.0)])
    config.graph.completion_delay_seconds = 0.05
    for name, value in {**OLD_EXCHANGE, **CALM_GRAPH, **settings}.items():
        section, _, field = name.partition("__")
        setattr(getattr(config, section), field, value)
    return config


def msal_app(
    emu: Emulator, client_id: str = CLIENT, credential: object = SECRET, tenant: str = TENANT
) -> msal.ConfidentialClientApplication:
    return msal.ConfidentialClientApplication(
        client_id,
        client_credential=credential,
        authority=f"{emu.authority_host}/{tenant}",
        instance_discovery=False,
        verify=emu.ca_bundle,
    )


def session_for(emu: Emulator, scope: str, client_id: str = CLIENT, credential: object = SECRET) -> requests.Session:
    result = msal_app(emu, client_id, credential).acquire_token_for_client([scope])
    assert "access_token" in result, result
    session = requests.Session()
    session.verify = emu.ca_bundle
    session.headers["Authorization"] = f"Bearer {result['access_token']}"
    return session


def queries_url(emu: Emulator, version: str = "beta") -> str:
    return f"{emu.graph_base_url}/{version}/security/auditLog/queries"


def invoke_url(emu: Emulator, tenant: str = TENANT) -> str:
    return f"{emu.exchange_base_url}/adminapi/beta/{tenant}/InvokeCommand"


def wait_for(predicate: Callable[[], bool], attempts: int = 500) -> None:
    """Poll a condition driven by the emulator's short completion delay (bounded, not a timed assertion)."""
    for _ in range(attempts):
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError("condition never became true")


ANCHOR = "APP:SystemMailbox{bb558c35-97f1-4cb9-8ff7-d53741dc928c}@contoso.onmicrosoft.com"
EXO_HEADERS = {
    "X-CmdletName": "Search-UnifiedAuditLog",
    "X-ResponseFormat": "json",
    "X-ClientApplication": "ExoManagementModule",
    "X-AnchorMailbox": ANCHOR,
    "Prefer": "odata.maxpagesize=1000",
}


def read_json(session: requests.Session, method: str, url: str, **kwargs: Any) -> tuple[int, Any]:
    """(status, parsed body) of a call, read again when a 200 body does not parse — what a careful client does.

    The emulator serves a small share of re-readable pages as broken JSON by default (``broken_page_rate``).
    """
    for _ in range(8):
        response = session.request(method, url, **kwargs)
        try:
            return response.status_code, response.json() if response.content else None
        except ValueError:
            if response.status_code != 200:
                raise
    raise AssertionError(f"{url} never answered parseable JSON")
