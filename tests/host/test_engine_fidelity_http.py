"""Engine behaviours seen through the Durable HTTP API of an in-process ``LocalHost`` (real HTTP, real SDK)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import requests

from durable_local.host import LocalHost
from tests.host.conftest import APPS, wait_for_status

WEBHOOKS = "/runtime/webhooks/durabletask"


def _serve(**overrides: Any) -> LocalHost:
    fields: dict[str, Any] = {"max_queue_polling_interval": timedelta(milliseconds=100)}
    fields.update(overrides)
    host = LocalHost(APPS / "basic", port=0, store="memory", settings_overrides=fields, drain_timeout=5)
    host.start()
    return host


@pytest.fixture
def limited_host() -> Iterator[LocalHost]:
    host = _serve(max_history_events=6)
    yield host
    host.stop()


def _start(host: LocalHost, name: str, body: Any = None) -> dict[str, Any]:
    response = requests.post(f"{host.base_url}{WEBHOOKS}/orchestrators/{name}", json=body, timeout=30)
    assert response.status_code == 202, response.text
    return dict(response.json())


def test_max_history_events_terminates_without_a_terminate_event_in_history(limited_host: LocalHost) -> None:
    # The seed appends ExecutionTerminated to the prefetched history (a past event, never written): the replay
    # terminates the instance, and only the ExecutionCompleted(Terminated) decision reaches the History table.
    links = _start(limited_host, "chaining")
    final = wait_for_status(links["statusQueryGetUri"])
    reason = "Orchestrator exceeded maximum history size: 6"
    assert (final["runtimeStatus"], final["output"]) == ("Terminated", reason)
    shown = requests.get(links["statusQueryGetUri"] + "&showHistory=true&showHistoryOutput=true", timeout=10)
    assert shown.status_code == 200
    events = shown.json()["historyEvents"]
    assert "ExecutionTerminated" not in [e["EventType"] for e in events]
    (completed,) = [e for e in events if e["EventType"] == "ExecutionCompleted"]
    assert (completed["OrchestrationStatus"], completed["Result"]) == ("Terminated", reason)
