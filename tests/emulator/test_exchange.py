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
from tests.emulator.helpers import (
    EXCHANGE_SCOPE,
    EXO_HEADERS,
    SECRET,
    T0,
    TENANT,
    invoke_url,
    make_config,
    read_json,
    session_for,
)

HEADERS = EXO_HEADERS


def command(start: datetime, end: datetime, **params: Any) -> dict[str, Any]:
    parameters = {
        "StartDate": start.strftime("%Y-%m-%dT%H:%M:%S"),
        "EndDate": end.strftime("%Y-%m-%dT%H:%M:%S"),
        "SessionCommand": "ReturnLargeSet",
        "ResultSize": 5000,
        **params,
    }
    return {"CmdletInput": {"CmdletName": "Search-UnifiedAuditLog", "Parameters": parameters}}


def search(exo: requests.Session, emu: Emulator, start: datetime, end: datetime, **params: Any) -> requests.Response:
    """One HTTP call: the first page of a cmdlet call's block."""
    return exo.post(invoke_url(emu), json=command(start, end, **params), headers=HEADERS)


def call_rows(exo: requests.Session, emu: Emulator, body: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """Every row of one cmdlet call, following nextLink with the same body (as public clients do); and pages read."""
    url: str | None = invoke_url(emu)
    rows: list[dict[str, Any]] = []
    pages = 0
    while url:
        status, page = read_json(exo, "POST", url, json=body, headers=HEADERS)
        assert status == 200, page
        rows += page["value"]
        pages += 1
        url = page.get("@odata.nextLink")
    return rows, pages


def drain(exo: requests.Session, emu: Emulator, start: datetime, end: datetime, **params: Any) -> list[dict[str, Any]]:
    session_id = str(uuid.uuid4())
    rows: list[dict[str, Any]] = []
    while True:
        block, _ = call_rows(exo, emu, command(start, end, SessionId=session_id, **params))
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
    other = {"CmdletInput": {"CmdletName": "Get-Mailbox", "Parameters": {}}}
    other_cmdlet = exo.post(invoke_url(emu), json=other, headers=HEADERS)
    assert other_cmdlet.status_code == 400 and "not recognized" in other_cmdlet.json()["error"]["message"]
    switch = search(exo, emu, T0, T0 + timedelta(hours=1), SessionId="z", HighCompleteness="yes")
    assert switch.status_code == 400 and "HighCompleteness" in switch.json()["error"]["message"]


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
    body = command(T0, T0 + timedelta(hours=1), SessionCommand=None, ResultSize=10)
    assert exo.post(invoke_url(emu, "contoso.onmicrosoft.com"), json=body, headers=HEADERS).status_code == 200
    assert exo.post(invoke_url(emu, "fabrikam.onmicrosoft.com"), json=body, headers=HEADERS).status_code == 401


def test_missing_exchange_permission_is_403_naming_it(emu: Emulator) -> None:
    emu.register_app(AppRegistration(TENANT, "limited", client_secret=SECRET, exchange_manage_as_app=False))
    response = search(session_for(emu, EXCHANGE_SCOPE, "limited"), emu, T0, T0 + timedelta(hours=1), SessionId="s")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "AccessDenied"
    assert "Exchange.ManageAsApp" in response.json()["error"]["message"]


def test_missing_role_is_named_only_inside_the_cmdlet_error(emu: Emulator) -> None:
    """Default: 400 "Error executing cmdlet"; the reason is in error.details and innererror.internalException."""
    emu.register_app(AppRegistration(TENANT, "no-role", client_secret=SECRET, exchange_role=False))
    response = search(session_for(emu, EXCHANGE_SCOPE, "no-role"), emu, T0, T0 + timedelta(hours=1), SessionId="s")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["message"] == "Error executing cmdlet" and "role" not in error["message"]
    _code, kind, text = error["details"][0]["message"].split("|", 2)
    assert kind.endswith("CmdletAccessDeniedException") and "no-role isn't supported in this scenario" in text
    assert error["innererror"]["internalException"]["message"] == text


def test_missing_role_in_the_plain_style_is_a_403_naming_the_role(emu: Emulator) -> None:
    emu.config.exchange.error_style = "plain"
    emu.register_app(AppRegistration(TENANT, "no-role", client_secret=SECRET, exchange_role=False))
    response = search(session_for(emu, EXCHANGE_SCOPE, "no-role"), emu, T0, T0 + timedelta(hours=1), SessionId="s")
    assert response.status_code == 403 and response.json()["error"]["code"] == "AccessDenied"
    assert "View-Only Audit Logs" in response.json()["error"]["message"]


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


# --- paging of one cmdlet call -----------------------------------------------------------------------------------
def test_a_block_comes_in_pages_of_1000_with_a_next_link_posted_with_the_same_body(
    exo: requests.Session, emu: Emulator
) -> None:
    start, end = T0, T0 + timedelta(hours=24)  # ~2,900 records at 120 per hour
    truth = emu.ground_truth_ids(TENANT, start, end)
    assert 2000 < len(truth) < 5000
    body = command(start, end, SessionId="paged")
    first = exo.post(invoke_url(emu), json=body, headers=HEADERS).json()
    assert len(first["value"]) == 1000 and "$skiptoken=" in first["@odata.nextLink"]
    assert first["@odata.nextLink"].startswith(f"{emu.exchange_base_url}/adminapi/beta/{TENANT}/InvokeCommand?")
    link = first["@odata.nextLink"]
    assert exo.get(link, headers=HEADERS).status_code == 405  # InvokeCommand is POST only, nextLink pages too
    other = command(start, end, SessionId="paged", ResultSize=4000)
    assert exo.post(link, json=other, headers=HEADERS).status_code == 400  # a different body does not continue it
    status, again = read_json(exo, "POST", link, json=body, headers=HEADERS)
    status2, twice = read_json(exo, "POST", link, json=body, headers=HEADERS)
    assert status == status2 == 200 and again["value"] == twice["value"]  # a page can be read again
    rows = first["value"] + call_rows_from(exo, link, body)
    assert [r["Identity"] for r in rows] == truth
    assert [r["ResultIndex"] for r in rows] == list(range(1, len(truth) + 1))
    assert search(exo, emu, start, end, SessionId="paged").json()["value"] == []  # the block took everything


def call_rows_from(exo: requests.Session, url: str | None, body: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    while url:
        status, page = read_json(exo, "POST", url, json=body, headers=HEADERS)
        assert status == 200, page
        rows += page["value"]
        url = page.get("@odata.nextLink")
    return rows


@pytest.mark.parametrize(("mode", "size"), [("fixed", 5000), ("fixed", 300), ("mix", 1000)])
def test_page_size_knobs_keep_sessions_exact(emu: Emulator, mode: str, size: int) -> None:
    emu.config.exchange.page_size_mode = mode
    emu.config.exchange.page_size = size
    exo = session_for(emu, EXCHANGE_SCOPE)
    start, end = T0, T0 + timedelta(hours=60)  # ~7,200 records: two blocks of 5,000
    session_id = str(uuid.uuid4())
    rows: list[dict[str, Any]] = []
    page_counts = []
    while True:
        block, pages = call_rows(exo, emu, command(start, end, SessionId=session_id))
        if not block:
            break
        rows += block
        page_counts.append(pages)
    assert [r["Identity"] for r in rows] == emu.ground_truth_ids(TENANT, start, end)
    if mode == "fixed":
        assert page_counts == [-(-5000 // size), -(-(len(rows) - 5000) // size)]
    else:
        assert max(page_counts) > 1  # the mix draws sizes below 5,000 too


def test_the_prefer_header_does_not_change_the_page_size(exo: requests.Session, emu: Emulator) -> None:
    body = command(T0, T0 + timedelta(hours=24), SessionId="prefer")
    page = exo.post(invoke_url(emu), json=body, headers={**HEADERS, "Prefer": "odata.maxpagesize=5000"}).json()
    assert len(page["value"]) == 1000 and "@odata.nextLink" in page


def test_broken_next_link_pages_are_stable_per_seed_and_a_reread_gets_the_page(emu: Emulator) -> None:
    emu.faults.broken_page_rate = 0.5
    exo = session_for(emu, EXCHANGE_SCOPE)
    body = command(T0, T0 + timedelta(hours=40), SessionId="broken")
    link = exo.post(invoke_url(emu), json=body, headers=HEADERS).json()["@odata.nextLink"]
    reads = [exo.post(link, json=body, headers=HEADERS) for _ in range(12)]
    good = [r for r in reads if _parses(r)]
    assert good and len(good) < len(reads) and all(r.status_code == 200 for r in reads)
    assert all(r.json()["value"] == good[0].json()["value"] for r in good)
    assert emu.stats.broken_pages[(TENANT, "exchange")] == len(reads) - len(good)
    first_page = exo.post(invoke_url(emu), json=command(T0, T0 + timedelta(hours=1), SessionId="b2"), headers=HEADERS)
    assert _parses(first_page)  # a block's first page is never broken: it cannot be read again


def _parses(response: requests.Response) -> bool:
    try:
        response.json()
    except ValueError:
        return False
    return True


# --- routing ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "anchor",
    [
        "SystemMailbox{bb558c35-97f1-4cb9-8ff7-d53741dc928c}",  # the bare form an older client sent
        "APP:SystemMailbox{bb558c35-97f1-4cb9-8ff7-d53741dc928c}@fabrikam.onmicrosoft.com",
        "APP:SystemMailbox{bb558c35-97f1-4cb9-8ff7-d53741dc928c}@11111111-2222-3333-4444-555555555555",
        "UPN:admin@contoso.onmicrosoft.com",
        "",
    ],
)
def test_a_wrong_anchor_mailbox_is_answered_like_a_misrouted_request(
    exo: requests.Session, emu: Emulator, anchor: str
) -> None:
    body = command(T0, T0 + timedelta(hours=1), SessionId="r")
    response = exo.post(invoke_url(emu), json=body, headers={**HEADERS, "X-AnchorMailbox": anchor})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "ErrorIncorrectRoutingHint" and "does not match the target" in error["message"]
    assert emu.stats.anchors[anchor] == 1


def test_anchor_knobs(exo: requests.Session, emu: Emulator) -> None:
    body = command(T0, T0 + timedelta(hours=1), SessionId="k")
    by_guid = {**HEADERS, "X-AnchorMailbox": f"APP:SystemMailbox{{bb558c35-97f1-4cb9-8ff7-d53741dc928c}}@{TENANT}"}
    assert exo.post(invoke_url(emu), json=body, headers=by_guid).status_code == 200  # the GUID form routes (default)
    emu.config.exchange.anchor_accepts_tenant_id = False
    assert exo.post(invoke_url(emu), json=body, headers=by_guid).status_code == 400
    emu.config.exchange.anchor_error = "stale"
    stale = exo.post(invoke_url(emu), json=body, headers=by_guid)
    assert stale.status_code == 503 and stale.json()["error"]["code"] == "MailboxInfoStale"
    emu.config.exchange.anchor_error = "routing_hint"
    emu.config.exchange.anchor_domain = "contosoltd.onmicrosoft.com"  # the failure mode: the right form, wrong domain
    assert exo.post(invoke_url(emu), json=body, headers=HEADERS).status_code == 400
    emu.config.exchange.check_anchor = False
    assert exo.post(invoke_url(emu), json=body, headers={**HEADERS, "X-AnchorMailbox": "x"}).status_code == 200


def test_high_completeness_switch_is_accepted_and_counted(exo: requests.Session, emu: Emulator) -> None:
    assert search(exo, emu, T0, T0 + timedelta(hours=1), SessionId="h", HighCompleteness=True).status_code == 200
    assert search(exo, emu, T0, T0 + timedelta(hours=1), SessionId="i", HighCompleteness=False).status_code == 200
    assert emu.stats.high_completeness_calls[(TENANT, "exchange")] == 1
