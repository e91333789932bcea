"""Issue 25: the Graph audit query service at its least convenient — the cap flag absent, a first read that falls
short, UnknownError 400s, gateways' HTML pages, 429s without Retry-After, queries that fail, vanish or stay running,
a daily submission quota — each a knob with a default (m365_emulator/README.md gives each its evidence)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import requests

from m365_emulator import AppRegistration, Emulator, run_emulator
from m365_emulator.config import FaultConfig, GraphSettings
from tests.emulator.helpers import GRAPH_SCOPE, SECRET, T0, TENANT, make_config, queries_url, session_for, wait_for
from tests.emulator.test_graph import _z, create, pages, wait_succeeded


def test_the_defaults_are_the_least_convenient_plausible_service() -> None:
    settings = GraphSettings()
    assert not settings.limit_flag and settings.send_record_count_limit and not settings.retry_after_on_429
    assert settings.short_read_rate > 0 and settings.unknown_error_rate > 0 and settings.gateway_error_rate > 0
    # Queries the service fails, loses or leaves running: a client submits them again (README)
    assert settings.fail_rate > 0 and settings.vanish_rate > 0 and settings.stuck_rate > 0
    with pytest.raises(ValueError, match="fail_rate"):
        GraphSettings(fail_rate=0.6, vanish_rate=0.6)


def _emulator(**settings: object) -> Emulator:
    return run_emulator(make_config(**{f"graph__{k}": v for k, v in settings.items()}))


def _session(emu: Emulator) -> requests.Session:
    emu.register_app(AppRegistration(TENANT, "faults", client_secret=SECRET))
    return session_for(emu, GRAPH_SCOPE, "faults")


def test_a_first_read_falls_short_and_a_second_read_is_whole() -> None:
    with _emulator(short_read_rate=1.0) as emu:
        graph = _session(emu)
        start, end = T0, T0 + timedelta(hours=4)
        query = create(graph, emu, start, end)
        final = wait_succeeded(graph, emu, query["id"])
        first = [r["id"] for page in pages(graph, emu, query["id"], top=50) for r in page]
        second = [r["id"] for page in pages(graph, emu, query["id"], top=50) for r in page]
        assert 0.4 * len(second) <= len(first) < len(second) == final["approximateReturnedRecordCount"]
        assert second[: len(first)] == first and emu.stats.short_reads[TENANT] == 1
        assert set(emu.ground_truth_ids(TENANT, start, end)) <= set(second)


def test_unknown_errors_and_html_gateway_pages_come_at_a_rate_and_do_nothing() -> None:
    with _emulator(unknown_error_rate=0.4, gateway_error_rate=0.4) as emu:
        graph = _session(emu)
        body = {"filterStartDateTime": _z(T0), "filterEndDateTime": _z(T0 + timedelta(hours=1))}
        answers = [graph.post(queries_url(emu), json=body) for _ in range(30)]
        by_status = {r.status_code for r in answers}
        assert by_status <= {201, 400, 502, 504} and {201, 400} <= by_status and by_status & {502, 504}
        for answer in answers:
            if answer.status_code == 400:
                assert answer.json()["error"]["code"] == "UnknownError" and "AuditingDisabled" not in answer.text
            elif answer.status_code in (502, 504):
                assert answer.headers["Content-Type"].startswith("text/html") and "Retry-After" not in answer.headers
                assert answer.text.startswith("<!DOCTYPE html>") and "Gateway" in answer.text
        created = sum(1 for r in answers if r.status_code == 201)
        assert emu.stats.queries_created[TENANT] == created  # a fault created nothing
        key = (TENANT, "graph")
        assert emu.stats.unknown_errors[key] + emu.stats.gateway_errors[key] == len(answers) - created


@pytest.mark.parametrize(
    ("outcome", "knob"), [("failed", "fail_rate"), ("vanished", "vanish_rate"), ("stuck", "stuck_rate")]
)
def test_queries_fail_vanish_or_stay_running_at_a_rate(outcome: str, knob: str) -> None:
    with _emulator(**{knob: 0.99}) as emu:
        graph = _session(emu)
        query = create(graph, emu, T0, T0 + timedelta(hours=1))
        url = f"{queries_url(emu)}/{query['id']}"
        if outcome == "vanished":  # gone (404) once it would have finished, and from the list too
            wait_for(lambda: graph.get(url).status_code == 404)
            assert "was not found" in graph.get(url).json()["error"]["message"]
            assert all(q["id"] != query["id"] for q in graph.get(queries_url(emu)).json()["value"])
        elif outcome == "failed":
            assert wait_succeeded(graph, emu, query["id"])["status"] == "failed"
        else:
            time.sleep(0.2)  # four times the completion delay
            assert graph.get(url).json()["status"] == "running"


def test_a_tests_sequence_of_outcomes_decides_the_next_queries_and_the_faulted_are_counted() -> None:
    """``faults.query_outcomes``: one outcome per query created, in order, whatever the rates draw; then the rates
    decide again. ``stats.query_faults`` counts the queries a client must give up on (``faulted``)."""
    with _emulator(fail_rate=0.99) as emu:
        graph = _session(emu)
        emu.faults.query_outcomes = ("succeeded", "vanished", "stuck")
        first, lost, stuck, drawn = (create(graph, emu, T0, T0 + timedelta(hours=1)) for _ in range(4))
        assert emu.faults.query_outcomes == ()
        assert wait_succeeded(graph, emu, first["id"])["status"] == "succeeded"
        wait_for(lambda: graph.get(f"{queries_url(emu)}/{lost['id']}").status_code == 404)
        assert graph.get(f"{queries_url(emu)}/{stuck['id']}").json()["status"] == "running"
        assert wait_succeeded(graph, emu, drawn["id"])["status"] == "failed"  # the rate again
        assert emu.stats.queries_created[TENANT] == 4 and emu.stats.faulted(TENANT) == 3
        assert {k[1]: v for k, v in emu.stats.query_faults.items()} == {"vanished": 1, "stuck": 1, "failed": 1}
    with pytest.raises(ValueError, match="query_outcomes"):
        FaultConfig(query_outcomes=("lost",))
