"""Exchange Search-UnifiedAuditLog through InvokeCommand: sessions, paging, caps, filters, limits, permissions."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
import requests

from m365_emulator import AppRegistration, Emulator, run_emulator
from tests.emulator.helpers import EXCHANGE_SCOPE, SECRET, T0, TENANT, invoke_url, make_config, session_for

HEADERS = {
    "X-CmdletName": "Search-UnifiedAuditLog",
    "X-ResponseFormat": "json",
    "X-ClientApplication": "ExoManagementModule",
    "X-AnchorMailbox": "SystemMailbox{bb558c35-97f1-4cb9-8ff7-d53741dc928c}",
    "Prefer": "odata.maxpagesize=1000",
}


def search(exo: requests.Session, emu: Emulator, start: datetime, end: datetime, **params: Any) -> requests.Response:
    parameters = {
        "StartDate": start.strftime("%Y-%m-%dT%H:%M:%S"),
        "EndDate": end.strftime("%Y-%m-%dT%H:%M:%S"),
        "SessionCommand": "ReturnLargeSet",
        "ResultSize": 5000,
        **params,
    }
    body = {"CmdletInput": {"CmdletName": "Search-UnifiedAuditLog", "Parameters": parameters}}
    return exo.post(invoke_url(emu), json=body, headers=HEADERS)


def drain(exo: requests.Session, emu: Emulator, start: datetime, end: datetime, **params: Any) -> list[dict[str, Any]]:
    session_id = str(uuid.uuid4())
    rows: list[dict[str, Any]] = []
    while True:
        response = search(exo, emu, start, end, SessionId=session_id, **params)
        assert response.status_code == 200, response.text
        block = response.json()["value"]
        if not block:
            return rows
        rows.extend(block)


def test_session_pages_sequential_blocks_equal_to_ground_truth(exo: requests.Session, emu: Emulator) -> None:
    start, end = T0 + timedelta(minutes=5), T0 + timedelta(hours=9)
    rows = drain(exo, emu, start, end, ResultSize=300)
    truth = emu.ground_truth_ids(TENANT, start, end)
    assert [row["Identity"] for row in rows] == truth
    assert [row["ResultIndex"] for row in rows] == list(range(1, len(truth) + 1))
    assert {row["ResultCount"] for row in rows} == {len(truth)}
    first = rows[0]
    assert set(first) >= {"RecordType", "CreationDate", "UserIds", "Operations", "AuditData", "ResultIndex", "Identity"}
    audit = json.loads(first["AuditData"])  # a JSON string, as the real service returns it
    assert audit["Id"] == first["Identity"] and audit["Operation"] == first["Operations"]


def test_result_size_blocks_and_maximum(exo: requests.Session, emu: Emulator) -> None:
    start, end = T0, T0 + timedelta(hours=4)
    session_id = str(uuid.uuid4())
    sizes = []
    while block := search(exo, emu, start, end, SessionId=session_id, ResultSize="100").json()["value"]:
        sizes.append(len(block))
    assert sizes[:-1] == [100] * (len(sizes) - 1)
    too_big = search(exo, emu, start, end, SessionId=str(uuid.uuid4()), ResultSize=5001)
    assert too_big.status_code == 400 and "ResultSize" in too_big.json()["error"]["message"]


def test_session_cap_leaves_result_count_above_what_can_be_paged() -> None:
    with run_emulator(make_config(exchange__session_cap=400)) as emu:
        emu.register_app(AppRegistration(TENANT, "app", client_secret=SECRET))
        exo = session_for(emu, EXCHANGE_SCOPE, "app")
        start, end = T0, T0 + timedelta(hours=8)
        rows = drain(exo, emu, start, end, ResultSize=150)
        truth = emu.ground_truth_ids(TENANT, start, end)
        assert len(rows) == 400 < len(truth)
        assert rows[-1]["ResultCount"] == len(truth)
        assert [r["Identity"] for r in rows] == truth[:400]


@pytest.mark.parametrize(
    ("params", "truth_filters"),
    [
        ({"RecordType": "SharePointFileOperation"}, {"record_types": ["sharePointFileOperation"]}),
        ({"Operations": ["UserLoggedIn", "MessageSent"]}, {"operations": ["UserLoggedIn", "MessageSent"]}),
        ({"Operations": "UserLoggedIn,MessageSent"}, {"operations": ["UserLoggedIn", "MessageSent"]}),
        ({"FreeText": "Roadmap.pptx"}, {"keyword": "Roadmap.pptx"}),
    ],
)
def test_filters_match_ground_truth(
    exo: requests.Session, emu: Emulator, params: dict[str, Any], truth_filters: dict[str, Any]
) -> None:
    start, end = T0, T0 + timedelta(hours=6)
    truth = emu.ground_truth_ids(TENANT, start, end, **truth_filters)
    assert 0 < len(truth) < len(emu.ground_truth_ids(TENANT, start, end))
    assert [r["Identity"] for r in drain(exo, emu, start, end, **params)] == truth


def test_user_ip_and_object_filters(exo: requests.Session, emu: Emulator) -> None:
    start, end = T0, T0 + timedelta(hours=6)
    sample = list(emu.ground_truth_records(TENANT, start, end))
    user, ip, obj = sample[0]["userPrincipalName"], sample[3]["clientIp"], sample[5]["objectId"]
    for params, key, value in (({"UserIds": [user]}, "userPrincipalName", user), ({"IPAddresses": ip}, "clientIp", ip),
                               ({"ObjectIds": [obj]}, "objectId", obj)):  # fmt: skip
        expected = [r["id"] for r in sample if r[key] == value]
        assert [row["Identity"] for row in drain(exo, emu, start, end, **params)] == expected


def test_bad_parameters_are_400(exo: requests.Session, emu: Emulator) -> None:
    reversed_window = search(exo, emu, T0 + timedelta(hours=1), T0, SessionId="x")
    assert reversed_window.status_code == 400
    two_types = search(
        exo, emu, T0, T0 + timedelta(hours=1), SessionId="y", RecordType=["ExchangeItem", "ExchangeAdmin"]
    )
    assert two_types.status_code == 400
    other_cmdlet = exo.post(invoke_url(emu), json={"CmdletInput": {"CmdletName": "Get-Mailbox", "Parameters": {}}})
    assert other_cmdlet.status_code == 400


def test_without_session_command_the_first_block_comes_back_each_time(exo: requests.Session, emu: Emulator) -> None:
    start, end = T0, T0 + timedelta(hours=3)
    first = search(exo, emu, start, end, SessionCommand=None, ResultSize=50).json()["value"]
    again = search(exo, emu, start, end, SessionCommand=None, ResultSize=50).json()["value"]
    assert (
        [r["Identity"] for r in first]
        == [r["Identity"] for r in again]
        == emu.ground_truth_ids(TENANT, start, end)[:50]
    )


def test_tenant_by_domain_in_url_and_mismatched_tenant(exo: requests.Session, emu: Emulator) -> None:
    body = {"CmdletInput": {"CmdletName": "Search-UnifiedAuditLog", "Parameters": {
        "StartDate": "2024-05-01T00:00:00", "EndDate": "2024-05-01T01:00:00", "ResultSize": 10}}}  # fmt: skip
    assert exo.post(invoke_url(emu, "contoso.onmicrosoft.com"), json=body).status_code == 200
    assert exo.post(invoke_url(emu, "fabrikam.onmicrosoft.com"), json=body).status_code == 401


@pytest.mark.parametrize(
    ("manage_as_app", "role", "named"), [(False, True, "Exchange.ManageAsApp"), (True, False, "View-Only Audit Logs")]
)
def test_missing_exchange_permission_or_role_is_403(emu: Emulator, manage_as_app: bool, role: bool, named: str) -> None:
    emu.register_app(
        AppRegistration(
            TENANT, "limited", client_secret=SECRET, exchange_manage_as_app=manage_as_app, exchange_role=role
        )
    )
    exo = session_for(emu, EXCHANGE_SCOPE, "limited")
    response = search(exo, emu, T0, T0 + timedelta(hours=1), SessionId="s")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "AccessDenied"
    assert named in response.json()["error"]["message"]


def test_concurrent_requests_over_the_limit_get_429_with_the_wait_at_the_end() -> None:
    config = make_config(exchange__max_concurrent_sessions=2)
    config.faults.slow_page_seconds = 0.4  # keep requests in flight long enough to overlap
    with run_emulator(config) as emu:
        emu.register_app(AppRegistration(TENANT, "app", client_secret=SECRET))
        sessions = [session_for(emu, EXCHANGE_SCOPE, "app") for _ in range(6)]
        results: list[requests.Response] = []
        barrier = threading.Barrier(len(sessions))

        def call(exo: requests.Session) -> None:
            barrier.wait()
            results.append(search(exo, emu, T0, T0 + timedelta(hours=1), SessionId=str(uuid.uuid4()), ResultSize=10))

        threads = [threading.Thread(target=call, args=(s,)) for s in sessions]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        statuses = sorted(r.status_code for r in results)
        assert statuses.count(200) >= 2 and statuses.count(429) >= 1
        assert set(statuses) <= {200, 429}
        throttled = next(r for r in results if r.status_code == 429)
        words = throttled.json()["error"]["message"].split(" ")
        assert words[-2] == throttled.headers["Retry-After"] == "1" and words[-1] == "seconds."
        assert emu.stats.peak_concurrency[(TENANT, "exchange")] == 2
        assert emu.stats.concurrency_429[(TENANT, "exchange")] == statuses.count(429)
        assert emu.stats.current_concurrency[(TENANT, "exchange")] == 0
