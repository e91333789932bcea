"""The doctor's Graph queries, when the service fails or loses one (issue 25, item 9): submitted again under a name of
its own, twice at most, as the collector does, and the report says what the service did. The emulator decides each
query's fate in order (``faults.query_outcomes``: the doctor's probe query is created first, then the service-filter
probe's two); run from here the doctor holds no tenant budget, and says that nothing counts its submissions.

Before: a failed probe query failed ``graph.query`` ("the service reports it failed"), a lost one (404) failed it with
the adapter's error, and the service-filter probe reported a failed query as "did not finish in time".
"""

from __future__ import annotations

from pathlib import Path

from m365_emulator import Emulator
from shared.doctor import Outcome, run_doctor
from tests.doctor.conftest import DOMAIN, TENANT, app_env, folder_output

FINE = ("succeeded",)
"""A query the service finishes (every query of a run is decided by the test, not by the emulator's draws)."""


def test_a_failed_probe_query_is_submitted_again_and_the_report_says_so(knobs: Emulator, tmp_path: Path) -> None:
    knobs.faults.query_outcomes = ("failed", *FINE * 3)
    created = knobs.stats.queries_created[TENANT]

    report = run_doctor(app_env(knobs, folder_output(tmp_path)), DOMAIN, "graph")

    query = report.result("graph.query")
    assert query.outcome is Outcome.OK, query.line
    assert "the service failed the first query; the second succeeded" in query.detail
    assert "-r1'" in query.detail  # the query read is the one submitted again, under a name of its own
    assert "no tenant budget counts the doctor's submissions here" in query.detail
    assert report.result("graph.records").outcome is Outcome.OK
    assert report.result("graph.list").outcome is Outcome.OK  # the look-up by name finds the query submitted again
    assert "as do the 1 given up on" in report.result("graph.delete").detail
    assert knobs.stats.queries_created[TENANT] == created + 1 + 3  # the one given up on, then the usual three


def test_a_lost_probe_query_is_submitted_again(knobs: Emulator, tmp_path: Path) -> None:
    knobs.faults.query_outcomes = ("vanished", *FINE * 3)

    report = run_doctor(app_env(knobs, folder_output(tmp_path)), DOMAIN, "graph")

    query = report.result("graph.query")
    assert query.outcome is Outcome.OK, query.line
    assert "the service lost the first query (404 when checked); the second succeeded" in query.detail
    assert report.ok, report.lines()


def test_three_failed_queries_fail_the_probe_with_what_the_service_did(knobs: Emulator, tmp_path: Path) -> None:
    knobs.faults.query_outcomes = ("failed", "vanished", "failed")
    created = knobs.stats.queries_created[TENANT]

    report = run_doctor(app_env(knobs, folder_output(tmp_path)), DOMAIN, "graph")

    query = report.result("graph.query")
    assert query.outcome is Outcome.FAILED, query.line
    assert (
        "the service failed the first query; the service lost the second query (404 when checked); the service failed "
        "the third query (submitted 3 times, the collector's bound)"
    ) in query.detail
    assert "submits such a query again, twice at most" in query.fix
    assert report.result("graph.records").outcome is Outcome.SKIPPED
    assert knobs.stats.queries_created[TENANT] == created + 3  # never a fourth


def test_a_failed_query_of_the_service_filter_probe_is_submitted_again(knobs: Emulator, tmp_path: Path) -> None:
    knobs.faults.query_outcomes = (*FINE, "failed", *FINE * 2)  # the probe query, then graph.filters' first

    report = run_doctor(app_env(knobs, folder_output(tmp_path)), DOMAIN, "graph")

    filters = report.result("graph.filters")
    assert filters.outcome is Outcome.OK, filters.line
    assert "serviceFilter was honoured (the service failed the first query; the second succeeded" in filters.detail
    assert "serviceFilters was ignored" in filters.detail  # the default service honours the singular only
    assert "could not be checked" not in filters.detail
