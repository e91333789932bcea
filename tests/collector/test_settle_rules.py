"""A collection's settle pass (``orchestrators.settle``): the rules a hand mutation showed no other test held
(docs/testing.md, "Mutation"). ``finish`` is driven as the orchestrator drives it, over a recording context (the
whole orchestration replayed: tests/collector/test_settle_replay.py)."""

from __future__ import annotations

from collections.abc import Generator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

from orchestrators import settle
from shared.models import ActivityResult, Chunk, JsonDict
from tests.collector.replay_driver import NOW
from tests.collector.test_settle_replay import settle_payload

WINDOWS = [Chunk(NOW - timedelta(hours=2), NOW - timedelta(hours=1)), Chunk(NOW - timedelta(hours=1), NOW)]
FAILURE = {"chunk": WINDOWS[0].span_json(), "kind": "permission", "message": "403", "attempts": 3}


class Recording:
    """What ``finish`` asks of the orchestration context, recorded; every task it yields completes at once."""

    def __init__(self) -> None:
        self.current_utc_datetime = NOW
        self.instance_id = "c1"
        self.asked: list[tuple[str, Any]] = []

    def set_custom_status(self, status: Any) -> None:
        self.asked.append(("status", status))

    def create_timer(self, until: Any) -> str:
        self.asked.append(("timer", until))
        return "timer"

    def call_activity(self, name: str, data: Any) -> str:
        self.asked.append(("activity", name))
        return "activity"

    def new_uuid(self) -> str:
        return "7" * 32

    def continue_as_new(self, data: Any) -> None:
        self.asked.append(("continue_as_new", data))


def finished(
    payload: JsonDict, output: JsonDict, result: ActivityResult | None = None
) -> tuple[JsonDict | None, Recording]:
    """``finish`` run to its end; ``result``: the finalize activity's (by default: both windows provisional)."""
    context = Recording()
    result = result or ActivityResult.success({"provisionalWindows": [c.span_json() for c in WINDOWS]})
    window = SimpleNamespace(status=lambda: {"grid": []})
    steps: Generator[Any, Any, JsonDict | None] = settle.finish(context, payload, output, result, window)  # type: ignore[arg-type]
    answer: Any = None
    try:
        while True:
            task = steps.send(answer)
            answer = {"seal": ""} if task == "activity" else None
    except StopIteration as stop:
        return stop.value, context


def test_a_collection_asked_to_settle_continues_into_its_settle_pass_after_the_band() -> None:
    """The recording context is enough to see a settle pass start (the counterpart of the two tests below)."""
    answer, context = finished(settle_payload(settle=True), {"status": "Completed", "failures": []})
    assert answer is None
    kinds = [kind for kind, _ in context.asked]
    assert kinds == ["status", "timer", "activity", "continue_as_new"]


def test_a_collection_not_asked_to_settle_ends_with_its_first_pass() -> None:
    output = {"status": "Completed", "failures": []}
    answer, context = finished(settle_payload(settle=False), output)
    assert answer is output and context.asked == [], "no timer, no second pass"


def test_a_first_pass_that_failed_is_not_settled() -> None:
    """A Failed collection (the service refused it) reports that; a settle pass would read its windows again under
    the same refusal and report the collection over again a day later."""
    output = {"status": "Failed", "reason": {"kind": "permission", "message": "403"}, "failures": []}
    answer, context = finished(settle_payload(settle=True), output)
    assert answer is output and context.asked == []


def test_the_settle_pass_keeps_the_first_passs_failures_in_its_scope() -> None:
    """Its manifest covers the collection's whole range: the first pass's failed windows stay failed in it."""
    context = SimpleNamespace(current_utc_datetime=NOW, new_uuid=lambda: "9" * 32)
    second = settle.settle_pass_input(settle_payload(settle=True), {"failures": [FAILURE]}, WINDOWS, context)  # type: ignore[arg-type]
    assert second["scope"]["failures"] == [FAILURE]
    assert second["scope"]["provisional"] == [c.span_json() for c in WINDOWS]


def second_pass() -> JsonDict:
    context = SimpleNamespace(current_utc_datetime=NOW, new_uuid=lambda: "9" * 32)
    first = {**settle_payload(settle=True), "state": {"cursor": 6, "executions": 3}}
    return settle.settle_pass_input(first, {"failures": [FAILURE], "status": "CompletedWithFailures"}, WINDOWS, context)  # type: ignore[arg-type]


def test_the_settle_pass_starts_afresh_over_its_windows() -> None:
    """The first pass's window state (its cursor at the end of its plan) is not the second pass's."""
    assert second_pass()["state"] is None


def test_a_settle_pass_reports_the_whole_collection_with_the_first_passs_failures() -> None:
    """Its output is the collection's: the first pass's failed windows stay failed (a clean second pass does not make
    the collection Completed), the records are the manifest's totals over the whole range, and the windows it read
    again and their late records are counted."""
    totals = {"records": 180, "late": 7}
    result = ActivityResult.success({"provisionalWindows": [], "totals": totals})
    output = {"status": "Completed", "failures": [], "records": 60}
    answer, context = finished(second_pass(), output, result)
    assert answer is not None and [kind for kind, _ in context.asked] == [], "no third pass"
    assert answer["status"] == "CompletedWithFailures" and answer["failures"] == [FAILURE]
    assert answer["records"] == 180 and answer["provisionalWindows"] == []
    assert answer["settled"]["windows"] == 2 and answer["settled"]["late"] == 7


def test_a_followers_pass_answers_the_windows_still_provisional() -> None:
    """A follower's pass is scoped without ``settle``: its output hands the follower the windows its manifest still
    lists provisional (``shared.follow.plan.apply`` keeps them to read again), and the follower keeps its totals."""
    payload = {**settle_payload(settle=False), "scope": {"ranges": [], "failures": [], "provisional": []}}
    still = [WINDOWS[1].span_json()]
    result = ActivityResult.success({"provisionalWindows": still, "totals": {"records": 999}})
    output = {"status": "Completed", "failures": [], "records": 60}
    answer, _ = finished(payload, output, result)
    assert answer == {"status": "Completed", "failures": [], "records": 60, "provisionalWindows": still}
