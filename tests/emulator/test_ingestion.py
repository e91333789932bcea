"""Late records: a record created at t is searchable from t + its ingestion delay, on the emulator's clock.

Defaults are the least convenient plausible service: nothing is searchable at once, most records within 60-90
minutes, a share only up to a day later. Tests move the emulator's clock instead of waiting.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import requests

from m365_emulator import AppRegistration, Emulator, IngestionSettings, run_emulator
from tests.emulator.helpers import CLIENT, EXCHANGE_SCOPE, GRAPH_SCOPE, SECRET, TENANT, make_config, session_for
from tests.emulator.test_exchange import drain
from tests.emulator.test_graph import collect

T = datetime(2024, 5, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def graph_ids(graph: requests.Session, emu: Emulator, start: datetime, end: datetime) -> list[str]:
    """Ids a Graph query over [start, end) returns, its boundary bleed trimmed off."""
    stamp = end.strftime("%Y-%m-%dT%H:%M:%SZ")
    return [r["id"] for r in collect(graph, emu, start, end) if r["createdDateTime"] < stamp]


class MovedClock:
    """The emulator's clock, moved by the test."""

    def __init__(self, now: datetime) -> None:
        self.moment = now

    def __call__(self) -> datetime:
        return self.moment


@pytest.fixture
def clock() -> MovedClock:
    return MovedClock(T + 3 * HOUR)


@pytest.fixture
def emu(clock: MovedClock) -> Iterator[Emulator]:
    with run_emulator(make_config(), clock=clock) as running:
        running.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
        yield running


def test_a_graph_query_returns_what_was_ingested_when_it_was_created(emu: Emulator, clock: MovedClock) -> None:
    graph = session_for(emu, GRAPH_SCOPE)
    window = (T + HOUR, T + 2 * HOUR)  # ended an hour "ago": most records are still on their way
    everything = emu.ground_truth_ids(TENANT, *window)
    early = graph_ids(graph, emu, *window)
    assert early == emu.ground_truth_ids(TENANT, *window, visible_at=clock.moment)
    assert 0 < len(early) < len(everything), "some records are searchable, many are not yet"
    clock.moment += timedelta(days=1)  # every delay is at most a day
    assert graph_ids(graph, emu, *window) == everything


def test_an_exchange_session_sees_what_was_ingested_when_it_started(emu: Emulator, clock: MovedClock) -> None:
    exo = session_for(emu, EXCHANGE_SCOPE)
    window = (T + HOUR, T + 2 * HOUR)
    early = [row["Identity"] for row in drain(exo, emu, *window)]
    assert early == emu.ground_truth_ids(TENANT, *window, visible_at=clock.moment)
    clock.moment += timedelta(days=1)
    assert [row["Identity"] for row in drain(exo, emu, *window)] == emu.ground_truth_ids(TENANT, *window)


def test_default_delays_are_mostly_60_to_90_minutes_and_at_most_a_day(emu: Emulator) -> None:
    delays = emu.ingestion_delays(TENANT, T, T + 48 * HOUR)
    assert len(delays) > 1000
    values = sorted(delays.values())
    assert values[0] >= 3600 and values[-1] <= 86400, "nothing searchable at once, nothing later than a day"
    typical = sum(1 for v in values if v <= 5400) / len(values)
    assert 0.8 < typical < 0.97, f"{typical:.2f} within 90 minutes: most, not all"
    assert sum(1 for v in values if v > 6 * 3600) > 0, "some records come hours late"
    assert delays == emu.ingestion_delays(TENANT, T, T + 48 * HOUR), "a stable draw per record"


def test_the_friendly_knob_makes_records_searchable_at_once(clock: MovedClock) -> None:
    config = make_config()
    config.ingestion = IngestionSettings.immediate()
    with run_emulator(config, clock=clock) as emu:
        emu.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
        graph = session_for(emu, GRAPH_SCOPE)
        window = (clock.moment - HOUR, clock.moment)
        assert graph_ids(graph, emu, *window) == emu.ground_truth_ids(TENANT, *window)


def test_the_emulator_clock_defaults_to_the_wall_clock() -> None:
    with run_emulator(make_config()) as emu:
        assert abs((emu.now() - datetime.now(UTC)).total_seconds()) < 5


def test_records_not_yet_created_are_never_returned(emu: Emulator, clock: MovedClock) -> None:
    """A window reaching into the emulator's future holds only what has happened (and been ingested) so far."""
    graph = session_for(emu, GRAPH_SCOPE)
    window = (clock.moment - 2 * HOUR, clock.moment + 5 * HOUR)
    found = graph_ids(graph, emu, *window)
    assert found == emu.ground_truth_ids(TENANT, *window, visible_at=clock.moment)
    assert len(found) < len(emu.ground_truth_ids(TENANT, *window))
