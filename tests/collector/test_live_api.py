"""What the live page reads: the summary's header and grid (from a real window's custom status), failures while the
collection runs, the recent-collections list and its ``top`` rule. Over a fake Durable client; the pages themselves
are tested in a real browser (tests/browser)."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

from http_api import live, service, view
from shared import names
from shared.models import ActivityError, ActivityResult
from shared.sources.registry import window_for
from shared.window.machine import CollectionSpec, CollectionWindow
from tests.collector.test_http_service import BODY, NOW, FakeClient, call, start


def expand(states: str) -> str:
    return "".join(letter * int(run) for letter, run in re.findall(r"([a-z])(\d+)", states))


def running_window(client: FakeClient, collection_id: str) -> CollectionWindow:
    payload = client.started[-1][2]
    window = window_for(CollectionSpec.from_json(payload["spec"]))
    window.budget.free_slots = 3  # as if the budget had said three slots are free
    if window.spec.source == "exchange":  # as if its first lane's probe had shown a quiet tenant: lanes start unsplit
        window.source.sizing.learn(window.spec.planned_chunk(0), {"rows": 0, "exact": True})
    for step in window.fill():  # the tenant budget (on by default) grants the first lanes their slots
        window.on_budget(step.lane, {"granted": True, "grant": step.lane + 1, "leaseUntil": "2999-01-01T00:00:00Z"})
    client.instances[collection_id].runtime_status = SimpleNamespace(value="Running")
    return window


def test_summary_carries_the_header_and_the_grid_of_a_running_collection() -> None:
    client = FakeClient()
    start(client, {**BODY, "collectionId": "live-1", "source": "exchange"})
    window = running_window(client, "live-1")
    bad = ActivityResult(False, error=ActivityError("permanent", "<script>alert(1)</script> refused"))
    window.on_result(0, bad)
    window.fill()  # lane 2 asks for a slot: it waits for tenant budget until the answer
    client.instances["live-1"].custom_status = json.dumps(window.status())  # the SDK hands custom status as text
    body = call(service.collection_summary(client, "live-1")).body
    assert body["collection"] == {
        "tenantId": "contoso.onmicrosoft.com",
        "source": "exchange",
        "maxConcurrency": 2,
        "startedAt": "2024-11-18T12:00:00Z",
        "filters": {},
        "startDate": "2024-11-17T10:00:00Z",
        "endDate": "2024-11-18T10:00:00Z",
        "intervalMinutes": 240.0,
    }
    # started two hours after the range ended: all but its first two hours may still gain late records
    assert body["latency"] == {
        "assumedHours": 24.0,
        "provisional": [{"start": "2024-11-17T12:00:00Z", "end": "2024-11-18T10:00:00Z"}],
        "settledAfter": "2024-11-19T10:00:00Z",
        "final": False,
    }
    grid = body["grid"]
    assert grid["cells"] == 6 and grid["intervalSeconds"] == 4 * 3600
    assert expand(grid["states"]) == "frbppp"
    assert [(lane["cell"], lane["state"], lane["phase"]) for lane in grid["lanes"]] == [
        (1, "r", "collect"),
        (2, "b", "waiting for tenant budget"),
    ]
    budget = {"capacity": 3, "held": 1, "asking": 1, "state": "waiting for tenant budget", "waits": 0, "lost": 0}
    assert body["budget"] == budget
    (failure,) = body["failures"]  # while running: the latest failures from custom status, with their fix
    assert failure["window"] == "2024-11-17T10:00:00Z/2024-11-17T14:00:00Z"
    assert failure["reason"] == "<script>alert(1)</script> refused" and failure["fix"]
    assert body["outputPrefix"] == "contoso.onmicrosoft.com/live-1/"


def test_summary_grid_is_exact_from_the_output_once_the_collection_ends() -> None:
    client = FakeClient()
    start(client, {**BODY, "collectionId": "live-2"})
    window = running_window(client, "live-2")
    client.instances["live-2"].runtime_status = SimpleNamespace(value="Completed")
    window.state.cursor = 6
    window.lanes.clear()
    client.instances["live-2"].output = window.output("memory://m")
    grid = call(service.collection_summary(client, "live-2")).body["grid"]
    assert grid["states"] == "d6" and grid["lanes"] == []


def test_summary_of_a_collection_without_progress_yet_has_an_unknown_grid() -> None:
    client = FakeClient()
    start(client, {**BODY, "collectionId": "live-3"})
    grid = call(service.collection_summary(client, "live-3")).body["grid"]
    assert grid["cells"] == 6 and grid["known"] is False and grid["states"] == ""


@dataclass
class ListingClient:
    """Lists one page at most, like the SDK (no ``top``, no continuation token)."""

    statuses: list[Any] = field(default_factory=list)
    page: int = live.LIST_PAGE
    calls: list[datetime | None] = field(default_factory=list)

    async def get_status_by(self, created_time_from: datetime | None = None, **_: Any) -> list[Any]:
        self.calls.append(created_time_from)
        return [s for s in self.statuses if created_time_from is None or s.created_time >= created_time_from][
            : self.page
        ]

    async def get_status_all(self) -> list[Any]:
        return await self.get_status_by(None)


def instance(i: int, age: timedelta, *, name: str = names.ORCHESTRATOR_COLLECT) -> SimpleNamespace:
    return SimpleNamespace(
        name=name,
        instance_id=f"c{i:03d}",
        created_time=NOW - age,
        last_updated_time=NOW,
        runtime_status=SimpleNamespace(value="Running"),
        custom_status={"percent": 12.5, "records": 7},
        output=None,
        input_=None,
    )


def test_recent_collections_newest_first_widening_the_window_until_enough() -> None:
    client = ListingClient([instance(i, timedelta(hours=i * 13)) for i in range(12)])
    client.statuses.append(instance(99, timedelta(minutes=5), name="some_other_orchestrator"))
    listed = asyncio.run(live.recent_collections(client, NOW, 5))
    assert [row["collectionId"] for row in listed["collections"]] == ["c000", "c001", "c002", "c003", "c004"]
    assert listed["more"] is True  # twelve exist
    assert client.calls == [NOW - timedelta(days=1), NOW - timedelta(days=7)]  # 2 in a day, 12 in a week
    row = listed["collections"][0]
    assert (row["runtimeStatus"], row["percent"], row["records"]) == ("Running", 12.5, 7)


def test_recent_collections_keep_the_complete_narrower_answer_when_a_page_is_cut() -> None:
    # 3 in the last day, 400 older: the week's page is full (maybe cut), so the day's complete answer is kept
    client = ListingClient([instance(i, timedelta(hours=i)) for i in range(3)])
    client.statuses += [instance(i, timedelta(days=2, minutes=i)) for i in range(3, 403)]
    listed = asyncio.run(live.recent_collections(client, NOW, 50))
    assert [row["collectionId"] for row in listed["collections"]] == ["c000", "c001", "c002"]
    assert listed["more"] is True


def test_top_must_be_a_whole_number_within_the_page() -> None:
    assert view.parse_top(None) == view.DEFAULT_TOP and view.parse_top("7") == 7
    for bad in ("0", "101", "-1", "x", "1.5", "٣"):
        assert isinstance(view.parse_top(bad), str), bad


def test_retry_collection_shows_its_explicit_windows_as_cells() -> None:
    # a retry collection (what retry-failed starts) covers explicit windows: two adjacent failed ones here
    client = FakeClient()
    start(client, {**BODY, "collectionId": "live-4"})
    parent = CollectionSpec.from_json(client.started[-1][2]["spec"])
    windows = (parent.planned_chunk(1), parent.planned_chunk(2))
    retry = replace(parent, collection_id="live-4-retry-1", plan=None, explicit=windows, parent_collection_id="live-4")
    asyncio.run(
        client.start_new(names.ORCHESTRATOR_COLLECT, "live-4-retry-1", service.orchestration_input(retry, {}, NOW))
    )
    body = call(service.collection_summary(client, "live-4-retry-1")).body
    assert body["grid"]["cells"] == 2 and body["grid"]["windows"] == [[0.0, 14400.0, 2]]
    assert body["collection"]["windows"] == 2 and body["parentCollectionId"] == "live-4"
    assert body["collection"]["startDate"] == "2024-11-17T14:00:00Z"


def test_recent_collections_order_by_start_not_by_the_latest_execution() -> None:
    # continue-as-new gives an instance a new created time; the input's startedAt keeps when the collection began
    older = instance(1, timedelta(minutes=1))
    older.input_ = {"startedAt": "2024-11-18T08:00:00Z"}
    newer = instance(2, timedelta(hours=2))
    newer.input_ = {"startedAt": "2024-11-18T10:00:00.5Z"}
    listed = asyncio.run(live.recent_collections(ListingClient([older, newer]), NOW, 5))
    assert [row["collectionId"] for row in listed["collections"]] == ["c002", "c001"]
    assert listed["collections"][0]["startedAt"] == "2024-11-18T10:00:00.5Z"


def test_a_terminated_collection_shows_nothing_in_flight() -> None:
    """Terminated (no output): its last custom status still lists lanes in flight and a lane waiting for budget;
    nothing runs any more, so the summary shows those windows as pending (a retry picks them up) and no budget state
    (adversarial review G3)."""
    client = FakeClient()
    start(client, {**BODY, "collectionId": "live-9", "source": "exchange"})
    window = running_window(client, "live-9")
    window.on_result(0, ActivityResult(False, error=ActivityError("permanent", "refused")))
    window.fill()
    client.instances["live-9"].custom_status = json.dumps(window.status())
    running = call(service.collection_summary(client, "live-9")).body
    assert running["progress"]["inFlight"] == 2 and running["budget"]["state"] == "waiting for tenant budget"
    client.instances["live-9"].runtime_status = SimpleNamespace(value="Terminated")
    body = call(service.collection_summary(client, "live-9")).body
    assert body["progress"]["inFlight"] == 0 and body["windowsInFlight"] == []
    assert expand(body["grid"]["states"]) == "fppppp" and body["grid"]["lanes"] == []
    assert (body["budget"]["held"], body["budget"]["asking"], body["budget"]["state"]) == (0, 0, None)
    assert body["failures"] == running["failures"]  # what failed stays shown


def test_a_settling_collection_says_until_when_and_a_settled_one_what_arrived_late() -> None:
    client = FakeClient()
    start(client, {**BODY, "collectionId": "settle-1", "settle": True})
    window = running_window(client, "settle-1")
    until = "2024-11-19T12:00:00Z"
    client.instances["settle-1"].custom_status = json.dumps(
        {**window.status(), "settling": {"until": until, "windows": 6}}
    )
    body = call(service.collection_summary(client, "settle-1")).body
    assert body["settling"] == {"until": until, "windows": 6}
    assert body["settled"] is None
    settled = {"firstStartedAt": "a", "startedAt": "b", "windows": 6, "late": 12}
    client.instances["settle-1"].output = json.dumps({**window.output(None), "settled": settled})
    client.instances["settle-1"].runtime_status = SimpleNamespace(value="Completed")
    body = call(service.collection_summary(client, "settle-1")).body
    assert body["settling"] is None and body["settled"] == settled
