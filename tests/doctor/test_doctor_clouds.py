"""The doctor's token probes ask for the audience of the configured cloud, as the adapters do (issue 25, item 7):
a GCC High or DoD tenant's token is issued for its own Exchange and Graph hosts, so a doctor that asked for the global
audience would report a permission problem the collector does not have."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from shared.doctor import exchange_probe, graph_probe
from shared.doctor.model import Budget, ProbeResult, skipped
from tests.audit.test_national_clouds import config


def _recording(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[str]:
    """Record the scope each token probe asks for; the probe then stops (no token: the rest is skipped)."""
    asked: list[str] = []

    def probe_token(probe: str, tokens: object, scope: str, **_: object) -> tuple[ProbeResult, None]:
        asked.append(scope)
        return skipped(probe, "recorded"), None

    monkeypatch.setattr(module, "probe_token", probe_token)
    monkeypatch.setattr(module, "token_provider_for", lambda _config: object())
    return asked


@pytest.mark.parametrize(
    ("cloud", "exchange", "graph"),
    [
        ("global", "https://outlook.office365.com/.default", "https://graph.microsoft.com/.default"),
        ("usgovhigh", "https://outlook.office365.us/.default", "https://graph.microsoft.us/.default"),
        ("usgovdod", "https://outlook-dod.office365.us/.default", "https://dod-graph.microsoft.us/.default"),
    ],
)
def test_token_probes_ask_for_the_configured_clouds_audience(
    monkeypatch: pytest.MonkeyPatch, cloud: str, exchange: str, graph: str
) -> None:
    now = lambda: datetime(2026, 12, 4, tzinfo=UTC)  # noqa: E731
    asked_exchange = _recording(monkeypatch, exchange_probe)
    exchange_probe.ExchangeProbe(config(cloud), Budget(60.0), now).run()
    asked_graph = _recording(monkeypatch, graph_probe)
    graph_probe.GraphProbe(config(cloud), Budget(60.0), now).start()
    assert (asked_exchange, asked_graph) == ([exchange], [graph])
