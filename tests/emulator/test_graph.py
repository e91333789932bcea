"""Graph audit log queries: lifecycle, paging, filters, caps, bleed, delete, permissions and concurrency."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import requests

from m365_emulator import AppRegistration, Emulator, run_emulator
from tests.emulator.helpers import (
    GRAPH_SCOPE,
    SECRET,
    T0,
    TENANT,
    make_config,
    queries_url,
    read_json,
    session_for,
    wait_for,
)


def _z(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def create(graph: requests.Session, emu: Emulator, start: datetime, end: datetime, **filters: Any) -> dict[str, Any]:
    body = {"displayName": "test", "filterStartDateTime": _z(start), "filterEndDateTime": _z(end), **filters}
    response = graph.post(queries_url(emu), json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


def wait_succeeded(graph: requests.Session, emu: Emulator, query_id: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def done() -> bool:
        seen.update(graph.get(f"{queries_url(emu)}/{query_id}").json())
        return seen["status"] not in ("notStarted", "queued", "running")

    wait_for(done)
    return seen


def pages(
    graph: requests.Session, emu: Emulator, query_id: str, top: int | None = None
) -> Iterator[list[dict[str, Any]]]:
    url: str | None = f"{queries_url(emu)}/{query_id}/records" + (f"?$top={top}" if top else "")
    while url:
        status, body = read_json(graph, "GET", url)  # a broken page (broken_page_rate) is read again
        assert status == 200, body
        yield body["value"]
        url = body.get("@odata.nextLink")


def collect(
    graph: requests.Session, emu: Emulator, start: datetime, end: datetime, **filters: Any
) -> list[dict[str, Any]]:
    query = create(graph, emu, start, end, **filters)
    assert wait_succeeded(graph, emu, query["id"])["status"] == "succeeded"
    return [record for page in pages(graph, emu, query["id"], top=250) for record in page]


def test_query_lifecycle_and_document_shape(graph: requests.Session, emu: Emulator) -> None:
    emu.config.graph.completion_delay_seconds = 2.0  # ample margin for the "not ready" read right after creation
    query = create(graph, emu, T0, T0 + timedelta(hours=2), operationFilters=["FileAccessed"])
    assert query["status"] == "notStarted"
    assert query["@odata.context"].endswith("$metadata#security/auditLog/queries/$entity")
    assert query["filterStartDateTime"] == "2024-05-01T00:00:00Z"
    assert query["operationFilters"] == ["FileAccessed"]
    assert query["approximateReturnedRecordCount"] is None
    not_ready = graph.get(f"{queries_url(emu)}/{query['id']}/records")
    assert not_ready.status_code == 400
    assert not_ready.json()["error"]["message"] == "The query is not ready."
    final = wait_succeeded(graph, emu, query["id"])
    assert final["status"] == "succeeded"
    assert "isRecordCountLimitExceeded" not in final  # absent from the schema until September 2026 (the default)
    assert final["recordCountLimit"] == 1_000_000
    listed = graph.get(queries_url(emu)).json()["value"]
    assert [q["id"] for q in listed] == [query["id"]]


@pytest.mark.parametrize("hours", [1, 5, 26])
def test_pages_hold_exactly_the_ground_truth_plus_bleed_after_the_end(
    graph: requests.Session, emu: Emulator, hours: int
) -> None:
    start, end = T0 + timedelta(minutes=17), T0 + timedelta(hours=hours, minutes=17)
    records = collect(graph, emu, start, end)
    truth = emu.ground_truth_ids(TENANT, start, end)
    inside = [r["id"] for r in records if r["createdDateTime"] < _z(end)]
    bleed = [r for r in records if r["createdDateTime"] >= _z(end)]
    assert inside == truth
    assert len({r["id"] for r in records}) == len(records)
    assert len(bleed) == round(len(truth) * 0.03)
    assert all(end <= datetime.fromisoformat(r["createdDateTime"]) < end + timedelta(hours=10) for r in bleed)
    assert all(r["auditData"]["Id"] == r["id"] for r in records)


def test_top_is_honoured_up_to_the_maximum_page(emu: Emulator, graph: requests.Session) -> None:
    query = create(graph, emu, T0, T0 + timedelta(hours=12))
    wait_succeeded(graph, emu, query["id"])
    sizes = [len(page) for page in pages(graph, emu, query["id"], top=100)]
    assert sizes[:-1] == [100] * (len(sizes) - 1) and 0 < sizes[-1] <= 100
    big = [len(page) for page in pages(graph, emu, query["id"], top=5000)]
    assert big[0] == 1000  # clamped to GraphSettings.max_page_size
    assert sum(big) == sum(sizes)


FILTERS = [
    ({"recordTypeFilters": ["sharePointFileOperation"]}, {"record_types": ["sharePointFileOperation"]}),
    ({"operationFilters": ["UserLoginFailed", "Send"]}, {"operations": ["UserLoginFailed", "Send"]}),
    ({"serviceFilter": "MicrosoftTeams"}, {"services": ["MicrosoftTeams"]}),
    ({"keywordFilter": "Budget.xlsx"}, {"keyword": "Budget.xlsx"}),
]


@pytest.mark.parametrize(("body", "truth_filters"), FILTERS)
def test_filters_select_the_same_records_as_the_ground_truth(
    graph: requests.Session, emu: Emulator, body: dict[str, Any], truth_filters: dict[str, Any]
) -> None:
    start, end = T0, T0 + timedelta(hours=6)
    truth = emu.ground_truth_ids(TENANT, start, end, **truth_filters)
    everything = emu.ground_truth_ids(TENANT, start, end)
    assert 0 < len(truth) < len(everything)
    records = collect(graph, emu, start, end, **body)
    assert [r["id"] for r in records if r["createdDateTime"] < _z(end)] == truth


def test_user_ip_object_and_admin_unit_filters(graph: requests.Session, emu: Emulator) -> None:
    start, end = T0, T0 + timedelta(hours=6)
    sample = list(emu.ground_truth_records(TENANT, start, end))
    file_record = next(r for r in sample if r["service"] == "SharePoint")
    unit_record = next(r for r in sample if r["administrativeUnits"])
    cases = [
        (
            {"userPrincipalNameFilters": [sample[0]["userPrincipalName"]]},
            lambda r: r["userPrincipalName"] == sample[0]["userPrincipalName"],
        ),
        ({"ipAddressFilters": [sample[1]["clientIp"]]}, lambda r: r["clientIp"] == sample[1]["clientIp"]),
        ({"objectIdFilters": [file_record["objectId"]]}, lambda r: r["objectId"] == file_record["objectId"]),
        (
            {"administrativeUnitIdFilters": unit_record["administrativeUnits"]},
            lambda r: unit_record["administrativeUnits"][0] in r["administrativeUnits"],
        ),
    ]
    for body, predicate in cases:
        expected = [r["id"] for r in sample if predicate(r)]
        got = [r["id"] for r in collect(graph, emu, start, end, **body) if r["createdDateTime"] < _z(end)]
        assert got == expected and expected, body


@pytest.mark.parametrize("flag", [True, False])
def test_record_count_limit_caps_the_records_and_the_flag_says_so_only_when_sent(flag: bool) -> None:
    with run_emulator(make_config(graph__record_count_limit=500, graph__limit_flag=flag)) as emu:
        emu.register_app(AppRegistration(TENANT, "app", client_secret=SECRET))
        graph = session_for(emu, GRAPH_SCOPE, "app")
        start, end = T0, T0 + timedelta(hours=8)
        query = create(graph, emu, start, end)
        final = wait_succeeded(graph, emu, query["id"])
        assert final.get("isRecordCountLimitExceeded") is (True if flag else None)
        assert final["recordCountLimit"] == 500
        records = [r["id"] for page in pages(graph, emu, query["id"]) for r in page]
        assert final["approximateReturnedRecordCount"] == len(records) == 500
        assert records == emu.ground_truth_ids(TENANT, start, end)[:500]
        small = create(graph, emu, start, start + timedelta(hours=2))
        assert wait_succeeded(graph, emu, small["id"]).get("isRecordCountLimitExceeded") is (False if flag else None)


def test_delete_is_not_supported_by_default_and_the_query_stays(graph: requests.Session, emu: Emulator) -> None:
    query = create(graph, emu, T0, T0 + timedelta(hours=1))
    response = graph.delete(f"{queries_url(emu)}/{query['id']}")
    assert response.status_code == 404
    body = response.json()
    assert body["Message"].startswith("No HTTP resource was found that matches the request URI")
    assert body["MessageDetail"] == "No type was found that matches the controller named 'queries'."
    assert "error" not in body  # the ASP.NET Web API shape, not an OData error
    assert graph.get(f"{queries_url(emu)}/{query['id']}").status_code == 200
    assert emu.stats.queries_deleted[TENANT] == 0 and emu.stats.deletes_refused[TENANT] == 1


def test_delete_when_supported_frees_the_query_and_later_calls_are_404(graph: requests.Session, emu: Emulator) -> None:
    emu.config.graph.delete_supported = True  # the knob: a service that supports deletion
    query = create(graph, emu, T0, T0 + timedelta(hours=1))
    assert graph.delete(f"{queries_url(emu)}/{query['id']}").status_code == 204
    assert graph.get(f"{queries_url(emu)}/{query['id']}").status_code == 404
    assert graph.delete(f"{queries_url(emu)}/{query['id']}").status_code == 404
    assert emu.stats.queries_created[TENANT] == emu.stats.queries_deleted[TENANT] == 1
    assert emu.graph.active_count(TENANT) == 0


def test_an_unknown_body_property_is_rejected(graph: requests.Session, emu: Emulator) -> None:
    body = {"filterStartDateTime": _z(T0), "filterEndDateTime": _z(T0 + timedelta(hours=1)), "sortOrder": "x"}
    response = graph.post(queries_url(emu), json=body)
    assert response.status_code == 400
    assert "The property 'sortOrder' does not exist on type" in response.json()["error"]["message"]
    assert emu.stats.queries_created[TENANT] == 0


def test_a_tolerated_unknown_property_silently_filters_nothing(graph: requests.Session, emu: Emulator) -> None:
    emu.config.graph.reject_unknown_properties = False  # the worse plausible service: the property does nothing
    start, end = T0, T0 + timedelta(hours=2)
    records = collect(graph, emu, start, end, serviceFilterz="OneDrive")
    assert [r["id"] for r in records if r["createdDateTime"] < _z(end)] == emu.ground_truth_ids(TENANT, start, end)


@pytest.mark.parametrize(
    ("mode", "singular_applies", "plural_applies"),
    [("singular", True, False), ("plural", False, True), ("both", True, True), ("neither", False, False)],
)
def test_both_service_filter_names_are_accepted_and_the_knob_says_which_is_honoured(
    graph: requests.Session, emu: Emulator, mode: str, singular_applies: bool, plural_applies: bool
) -> None:
    """The evidence conflicts (CSDL: serviceFilters; create doc and production clients: serviceFilter)."""
    emu.config.graph.service_filter = mode
    start, end = T0, T0 + timedelta(hours=3)
    everything = emu.ground_truth_ids(TENANT, start, end)
    teams = emu.ground_truth_ids(TENANT, start, end, services=["MicrosoftTeams"])
    for body, applies in (
        ({"serviceFilter": "MicrosoftTeams"}, singular_applies),
        ({"serviceFilters": ["MicrosoftTeams"]}, plural_applies),
    ):
        records = collect(graph, emu, start, end, **body)
        assert [r["id"] for r in records if r["createdDateTime"] < _z(end)] == (teams if applies else everything), body
    echoed = create(graph, emu, start, end, serviceFilter="Exchange")
    assert echoed["serviceFilter"] == "Exchange"


def test_the_singular_service_filter_must_be_a_string(graph: requests.Session, emu: Emulator) -> None:
    body = {"filterStartDateTime": _z(T0), "filterEndDateTime": _z(T0 + timedelta(hours=1)), "serviceFilter": ["x"]}
    response = graph.post(queries_url(emu), json=body)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "Invalid request data: serviceFilter must be a string."


def test_a_tenant_with_auditing_off_refuses_query_creation_as_the_service_does() -> None:
    config = make_config()
    config.tenants[0] = dataclasses.replace(config.tenants[0], auditing_enabled=False)
    with run_emulator(config) as emu:
        emu.register_app(AppRegistration(TENANT, "app", client_secret=SECRET))
        graph = session_for(emu, GRAPH_SCOPE, "app")
        body = {"filterStartDateTime": _z(T0), "filterEndDateTime": _z(T0 + timedelta(hours=1))}
        response = graph.post(queries_url(emu), json=body)
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == "UnknownError"
        assert json.loads(error["message"])["Status"] == "AuditingDisabledTenant"  # a JSON string inside the message
        assert emu.stats.queries_created[TENANT] == 0
        assert graph.get(queries_url(emu)).status_code == 200  # listing still works
        emu.add_tenant(dataclasses.replace(config.tenants[0], auditing_enabled=True))  # turned on: queries again
        assert graph.post(queries_url(emu), json=body).status_code == 201


def test_a_leaking_service_returns_records_outside_the_filters(graph: requests.Session, emu: Emulator) -> None:
    emu.config.graph.filter_leak_rate = 0.2
    start, end = T0, T0 + timedelta(hours=6)
    wanted = set(emu.ground_truth_ids(TENANT, start, end, operations=["FileAccessed"]))
    everything = emu.ground_truth_ids(TENANT, start, end)
    got = [r["id"] for r in collect(graph, emu, start, end, operationFilters=["FileAccessed"])]
    inside = [i for i in got if i in set(everything)]
    leaked = [i for i in inside if i not in wanted]
    assert wanted <= set(inside)  # nothing asked for is missing
    assert 0.1 * (len(everything) - len(wanted)) < len(leaked) < 0.3 * (len(everything) - len(wanted))
    assert got == collect_ids(graph, emu, start, end, operationFilters=["FileAccessed"])  # stable per record


def collect_ids(graph: requests.Session, emu: Emulator, start: datetime, end: datetime, **filters: Any) -> list[str]:
    return [r["id"] for r in collect(graph, emu, start, end, **filters)]


def test_a_per_workload_permission_narrows_what_a_query_returns(emu: Emulator) -> None:
    emu.register_app(
        AppRegistration(
            TENANT, "exo-only", client_secret=SECRET, graph_permissions=("AuditLogsQuery-Exchange.Read.All",)
        )
    )
    graph = session_for(emu, GRAPH_SCOPE, "exo-only")
    start, end = T0, T0 + timedelta(hours=3)
    got = [r["id"] for r in collect(graph, emu, start, end) if r["createdDateTime"] < _z(end)]
    assert got == emu.ground_truth_ids(TENANT, start, end, services=["Exchange"])
    assert len(got) < len(emu.ground_truth_ids(TENANT, start, end))
    emu.config.graph.narrow_to_permissions = False  # the friendlier knob: the role reads everything
    wide = [r["id"] for r in collect(graph, emu, start, end) if r["createdDateTime"] < _z(end)]
    assert wide == emu.ground_truth_ids(TENANT, start, end)


def test_missing_permission_is_403_naming_it(emu: Emulator) -> None:
    emu.register_app(AppRegistration(TENANT, "no-perm", client_secret=SECRET, graph_permissions=()))
    graph = session_for(emu, GRAPH_SCOPE, "no-perm")
    response = graph.post(queries_url(emu), json={"filterStartDateTime": "2024-05-01T00:00:00Z"})
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["code"] == "Authorization_RequestDenied"
    assert "Insufficient privileges" in error["message"] and "AuditLogsQuery.Read.All" in error["message"]


@pytest.mark.parametrize(
    "body",
    [
        {"filterStartDateTime": "2024-05-02T00:00:00Z", "filterEndDateTime": "2024-05-01T00:00:00Z"},
        {"filterStartDateTime": "yesterday"},
        {"operationFilters": "FileAccessed"},
    ],
)
def test_bad_bodies_are_400(graph: requests.Session, emu: Emulator, body: dict[str, Any]) -> None:
    response = graph.post(queries_url(emu), json=body)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("Invalid request data")
    assert emu.stats.queries_created[TENANT] == 0


def test_concurrent_query_limit_is_429_and_peak_is_recorded() -> None:
    # Deletion on: this test frees a slot by deleting a query.
    config = make_config(
        graph__max_concurrent_queries=3, graph__completion_delay_seconds=0.4, graph__delete_supported=True
    )
    with run_emulator(config) as emu:
        emu.register_app(AppRegistration(TENANT, "app", client_secret=SECRET))
        graph = session_for(emu, GRAPH_SCOPE, "app")
        body = {"filterStartDateTime": "2024-05-01T00:00:00Z", "filterEndDateTime": "2024-05-01T01:00:00Z"}
        responses = [graph.post(queries_url(emu), json=body) for _ in range(5)]
        assert [r.status_code for r in responses] == [201, 201, 201, 429, 429]
        assert "Retry-After" not in responses[3].headers  # none by default (CIPP-API found 429s without one)
        assert responses[3].json()["error"]["code"] == "TooManyRequests"
        emu.config.graph.retry_after_on_429 = True
        assert graph.post(queries_url(emu), json=body).headers["Retry-After"] == "1"
        assert emu.stats.peak_concurrency[(TENANT, "graph")] == 3
        assert emu.stats.concurrency_429[(TENANT, "graph")] == 3
        first = responses[0].json()["id"]
        graph.delete(f"{queries_url(emu)}/{first}")  # deleting frees a slot at once
        assert graph.post(queries_url(emu), json=body).status_code == 201
        wait_for(lambda: emu.graph.active_count(TENANT) == 0)  # finished queries free their slots too
        assert all(graph.post(queries_url(emu), json=body).status_code == 201 for _ in range(3))
        assert emu.stats.peak_concurrency[(TENANT, "graph")] == 3


@pytest.mark.parametrize(
    ("knob", "expected"), [("fail_query", "failed"), ("cancel_query", "cancelled"), ("queued_status", "succeeded")]
)
def test_status_knobs(graph: requests.Session, emu: Emulator, knob: str, expected: str) -> None:
    setattr(emu.faults, knob, True)
    emu.config.graph.completion_delay_seconds = 0.3
    query = create(graph, emu, T0, T0 + timedelta(hours=1))
    assert query["status"] == ("queued" if knob == "queued_status" else "notStarted")
    assert wait_succeeded(graph, emu, query["id"])["status"] == expected
    records = graph.get(f"{queries_url(emu)}/{query['id']}/records")
    assert records.status_code == (200 if expected == "succeeded" else 400)


def test_stuck_query_stays_running_and_keeps_its_slot(graph: requests.Session, emu: Emulator) -> None:
    emu.faults.stuck_query = True
    query = create(graph, emu, T0, T0 + timedelta(hours=1))
    emu.faults.stuck_query = False
    normal = create(graph, emu, T0, T0 + timedelta(hours=1))
    wait_succeeded(graph, emu, normal["id"])
    assert graph.get(f"{queries_url(emu)}/{query['id']}").json()["status"] == "running"
    assert emu.graph.active_count(TENANT) == 1


def test_v1_and_beta_both_served_and_unknown_version_rejected(graph: requests.Session, emu: Emulator) -> None:
    assert graph.get(queries_url(emu, "v1.0")).status_code == 200
    assert graph.get(queries_url(emu, "v2.0")).status_code == 400


def test_finished_queries_left_on_the_service_do_not_count_against_the_limit() -> None:
    config = make_config(graph__max_concurrent_queries=2, graph__completion_delay_seconds=0.05)
    with run_emulator(config) as emu:
        emu.register_app(AppRegistration(TENANT, "app", client_secret=SECRET))
        graph = session_for(emu, GRAPH_SCOPE, "app")
        ids = []
        for hour in range(6):  # never deleted (deletion is not supported): finished ones stay listed
            ids.append(create(graph, emu, T0 + timedelta(hours=hour), T0 + timedelta(hours=hour + 1))["id"])
            wait_succeeded(graph, emu, ids[-1])
        assert len(graph.get(queries_url(emu)).json()["value"]) == 6
        assert emu.stats.concurrency_429[(TENANT, "graph")] == 0


def test_the_list_refuses_filter_by_default_and_pages_oldest_first(graph: requests.Session, emu: Emulator) -> None:
    emu.config.graph.list_page_size = 2
    ids = [create(graph, emu, T0, T0 + timedelta(hours=h + 1), displayName=f"q{h}")["id"] for h in range(5)]
    refused = graph.get(queries_url(emu), params={"$filter": "displayName eq 'q1'"})
    assert refused.status_code == 400 and "Query option 'Filter' is not allowed" in refused.json()["error"]["message"]
    listed, url = [], queries_url(emu)
    while url:
        page = graph.get(url).json()
        assert len(page["value"]) <= 2
        listed += [q["id"] for q in page["value"]]
        url = page.get("@odata.nextLink")
    assert listed == ids


def test_the_list_can_ignore_filter(graph: requests.Session, emu: Emulator) -> None:
    emu.config.graph.list_filter = "ignore"
    for name in ("a", "b"):
        create(graph, emu, T0, T0 + timedelta(hours=1), displayName=name)
    found = graph.get(queries_url(emu), params={"$filter": "displayName eq 'a'"}).json()["value"]
    assert [q["displayName"] for q in found] == ["a", "b"]  # every query: the filter did nothing


def test_broken_record_pages_are_stable_per_seed(graph: requests.Session, emu: Emulator) -> None:
    emu.faults.broken_page_rate = 0.5
    query = create(graph, emu, T0, T0 + timedelta(hours=30))
    wait_succeeded(graph, emu, query["id"])
    url = f"{queries_url(emu)}/{query['id']}/records"
    reads = [graph.get(url) for _ in range(12)]
    parsed = []
    for response in reads:
        assert response.status_code == 200
        try:
            parsed.append(response.json()["value"])
        except ValueError:
            assert response.content.startswith(b"{") and not response.content.endswith(b"}")
    assert 0 < len(parsed) < len(reads)
    assert all(p == parsed[0] for p in parsed)
    assert emu.stats.broken_pages[(TENANT, "graph")] == len(reads) - len(parsed)
