"""What the window does with a Graph lane's query once the chunk is decided, and how it reports it.

Query DELETE is not supported by the service today (it answers 404 "No HTTP resource was found"), so deletion is a
setting that is off by default: the lane ends after its export and the query is counted as left on the service. When
deletion is on, only a 2xx counts as deleted.
"""

from __future__ import annotations

import random

from shared import names
from shared.models import ActivityError, ActivityResult
from shared.sources.registry import window_for
from shared.window.machine import CollectionWindow
from shared.window.state import CallActivity, Carried, RunOptions
from tests.collector.window_sim import collected, happy, run, spec

NO_QUERIES = {"deleted": 0, "leftOnService": 0, "deleteUnsupported": 0, "deleteFailed": 0}


def _to_export(window: CollectionWindow) -> CallActivity:
    window.fill()
    window.on_result(0, ActivityResult.success({"queryId": "q-1"}))
    (export,) = window.on_timer(0)
    assert isinstance(export, CallActivity) and export.name == names.ACTIVITY_GRAPH_COLLECT
    return export


def test_deletion_is_off_by_default_and_the_query_is_reported_left_on_the_service() -> None:
    assert RunOptions().delete_queries is False
    window = window_for(spec(1, 1))
    export = _to_export(window)
    assert window.on_result(0, collected(export, 4)) == []  # no DELETE step: the lane is done
    assert window.finished and window.state.completed == 1
    output = window.output("m")
    assert output["queries"] == {**NO_QUERIES, "leftOnService": 1}
    assert window.status()["queries"] == output["queries"]


def test_a_failed_query_is_resubmitted_twice_then_the_chunk_fails_and_each_is_left_on_the_service() -> None:
    """Issue 25: a query that ended failed is submitted again (a new name: ``resubmit``), at most twice."""
    window = window_for(spec(1, 1))
    window.fill()
    for attempt in range(3):
        window.on_result(0, ActivityResult.success({"queryId": f"q-{attempt}"}))
        window.on_timer(0)
        steps = window.on_result(0, ActivityResult.success({"outcome": "failed", "rawStatus": "failed"}))
        if attempt < 2:
            (submit,) = steps
            assert isinstance(submit, CallActivity) and submit.name == names.ACTIVITY_GRAPH_SUBMIT
            assert submit.input["resubmit"] == attempt + 1 and submit.input["queryId"] is None
    assert steps == [] and window.state.failed == 1
    (failure,) = window.output(None)["failures"]
    assert failure["kind"] == "query_failed" and "resubmitted 2x" in failure["message"]
    assert window.output(None)["queries"]["leftOnService"] == 3


def test_with_deletion_on_only_a_2xx_counts_as_deleted() -> None:
    outcomes = [
        ({"deleted": True, "disposition": "deleted"}, "deleted"),
        ({"deleted": False, "disposition": "deleteUnsupported", "reason": "404"}, "deleteUnsupported"),
        ({"deleted": False, "disposition": "deleteFailed", "kind": "transient"}, "deleteFailed"),
        ({"deleted": True}, "deleteFailed"),  # an answer without a disposition is not taken as a deletion
    ]
    for data, counted in outcomes:
        window = window_for(spec(1, 1, delete_queries=True))
        export = _to_export(window)
        (delete,) = window.on_result(0, collected(export))
        assert isinstance(delete, CallActivity) and delete.name == names.ACTIVITY_GRAPH_DELETE
        assert window.on_result(0, ActivityResult.success(data)) == []
        assert window.output("m")["queries"] == {**NO_QUERIES, counted: 1}, data


def test_a_crashed_delete_is_a_failed_delete() -> None:
    window = window_for(spec(1, 1, delete_queries=True))
    export = _to_export(window)
    window.on_result(0, collected(export))
    crashed = ActivityResult(False, error=ActivityError("activity_crashed", "worker lost"))
    assert window.on_result(0, crashed) == []
    assert window.state.completed == 1 and window.output("m")["queries"]["deleteFailed"] == 1


def test_query_counts_survive_continue_as_new() -> None:
    window = window_for(spec(6, 2, m=3))
    run(window, happy, random.Random(3))
    assert window.should_continue_as_new
    carried = window.carry()
    counted = carried.sections["queries"]["leftOnService"]
    assert counted + len(carried.lanes) == 3  # three chunks started, each lane done or carried
    again = window_for(window.spec, Carried.from_json(carried.to_json()))
    assert again.source.queries == carried.sections["queries"]
    old = Carried.from_json({"cursor": 0, "completed": 0, "failed": 0, "records": 0, "splits": 0})
    assert window_for(window.spec, old).source.queries == NO_QUERIES


def test_exchange_collections_have_no_queries_and_pass_high_completeness() -> None:
    window = window_for(spec(2, 2, "exchange", high_completeness=True))
    steps = window.fill()
    assert all(isinstance(s, CallActivity) and s.input["highCompleteness"] is True for s in steps)
    assert window.output(None).get("queries") is None
    plain = window_for(spec(1, 1, "exchange"))
    (step,) = plain.fill()
    assert isinstance(step, CallActivity) and step.input["highCompleteness"] is False


def test_run_options_round_trip_the_new_fields() -> None:
    options = RunOptions(delete_queries=True, high_completeness=True)
    assert RunOptions.from_json(options.to_json()) == options
    assert RunOptions.from_json({}) == RunOptions()
