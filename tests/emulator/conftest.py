"""Fixtures for the emulator tests: a running emulator and authenticated requests sessions."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from m365_emulator import AppRegistration, Emulator, run_emulator
from tests.emulator.helpers import CLIENT, EXCHANGE_SCOPE, GRAPH_SCOPE, SECRET, TENANT, make_config, session_for


@pytest.fixture(autouse=True)
def _own_ca_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    # requests lets REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE override a Session's `verify` (msal sets Session.verify),
    # so drop them: these tests must trust exactly the emulator's CA.
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with run_emulator(make_config()) as running:
        running.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
        yield running


@pytest.fixture
def graph(emu: Emulator) -> requests.Session:
    return session_for(emu, GRAPH_SCOPE)


@pytest.fixture
def exo(emu: Emulator) -> requests.Session:
    return session_for(emu, EXCHANGE_SCOPE)
