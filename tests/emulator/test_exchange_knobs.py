"""The 2026 Search-UnifiedAuditLog knobs of the emulator: what ResultCount says, whether a session's later calls go on,
rows out of order, failures disguised as a 200 with a warning or a 400, and moreRecordsAvailable — and their
defaults, which are the least convenient plausible service (m365_emulator/README.md gives each its evidence)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import requests

from m365_emulator import AppRegistration, Emulator, run_emulator
from m365_emulator.config import ExchangeSettings
from tests.emulator.helpers import EXCHANGE_SCOPE, EXO_HEADERS, SECRET, T0, TENANT, invoke_url, make_config, session_for

START, END = T0, T0 + timedelta(hours=2)  # ~240 records at 120 an hour


def command(size: int, session: str, **params: Any) -> dict[str, Any]:
    parameters = {
        "StartDate": START.strftime("%Y-%m-%dT%H:%M:%S"),
        "EndDate": END.strftime("%Y-%m-%dT%H:%M:%S"),
        "SessionCommand": "ReturnLargeSet",
        "SessionId": session,
        "ResultSize": size,
        **params,
    }
    return {"CmdletInput": {"CmdletName": "Search-UnifiedAuditLog", "Parameters": parameters}}


def one_call(exo: requests.Session, emu: Emulator, size: int, session: str) -> tuple[list[dict[str, Any]], Any]:
    """Every row of one cmdlet call (its nextLinks POSTed with the same body), and its last page."""
    url: str | None = invoke_url(emu)
    rows: list[dict[str, Any]] = []
    page: Any = None
    while url:
        response = exo.post(url, json=command(size, session), headers=EXO_HEADERS)
        assert response.status_code == 200, response.text
        page = response.json()
        rows += page["value"]
        url = page.get("@odata.nextLink")
    return rows, page


@pytest.fixture
def knobs() -> Iterator[tuple[Emulator, requests.Session]]:
    """An emulator on the old service; each test turns one knob."""
    with run_emulator(make_config()) as emu:
        emu.register_app(AppRegistration(TENANT, "knobs", client_secret=SECRET))
        yield emu, session_for(emu, EXCHANGE_SCOPE, "knobs")


def test_the_defaults_are_the_least_convenient_plausible_service() -> None:
    settings = ExchangeSettings()
    assert (settings.result_count, settings.session_mode, settings.more_records_available) == (
        "capped",
        "restart",
        "absent",
    )
    assert settings.unsorted and settings.unsorted_across_pages and settings.over_delivery > 0
    assert settings.cancel_warning_rate > 0 and settings.transient_400_rate > 0
    assert settings.page_size_mode == "mix" and settings.false_answer_rate > 0 and 0 < settings.false_bogus_share < 1
    assert settings.anchor_accepts_tenant_id  # public clients anchor by the tenant GUID; nothing says it fails
    with pytest.raises(ValueError, match="session_mode"):
        ExchangeSettings(session_mode="sometimes")
    with pytest.raises(ValueError, match="result_count"):
        ExchangeSettings(result_count="approximate")


@pytest.mark.parametrize(
    ("mode", "over", "asked_few", "asked_many"),
    [("total", 0.0, "n", "n"), ("total", 0.1, "0.9n", "0.9n"), ("capped", 0.0, 50, "n"), ("size", 0.0, 50, 5000)],
)
def test_result_count_says_what_the_mode_says(
    knobs: tuple[Emulator, requests.Session], mode: str, over: float, asked_few: Any, asked_many: Any
) -> None:
    emu, exo = knobs
    emu.config.exchange.result_count, emu.config.exchange.over_delivery = mode, over
    n = len(emu.ground_truth_ids(TENANT, START, END))
    expected = {"n": n, "0.9n": int(n * 0.9)}
    few, _ = one_call(exo, emu, 50, str(uuid.uuid4()))
    many, _ = one_call(exo, emu, 5000, str(uuid.uuid4()))
    assert len(few) == 50 and len(many) == n > 50  # what is delivered never depends on the knob
    assert {r["ResultCount"] for r in few} == {expected.get(asked_few, asked_few)}
    assert {r["ResultCount"] for r in many} == {expected.get(asked_many, asked_many)}


@pytest.mark.parametrize(("mode", "second"), [("continue", [51, 100]), ("restart", [1, 50]), ("empty", None)])
def test_a_sessions_later_call_continues_starts_over_or_is_empty(
    knobs: tuple[Emulator, requests.Session], mode: str, second: list[int] | None
) -> None:
    emu, exo = knobs
    emu.config.exchange.session_mode = mode
    session = str(uuid.uuid4())
    first, _ = one_call(exo, emu, 50, session)
    later, _ = one_call(exo, emu, 50, session)
    assert sorted(r["ResultIndex"] for r in first) == list(range(1, 51))
    indexes = sorted(r["ResultIndex"] for r in later)
    assert (indexes[0], indexes[-1]) == tuple(second) if second else indexes == []
    if mode == "restart":
        assert sorted(r["Identity"] for r in later) == sorted(r["Identity"] for r in first)


def test_unsorted_pages_are_a_stable_shuffle_of_the_next_rows(knobs: tuple[Emulator, requests.Session]) -> None:
    emu, exo = knobs
    emu.config.exchange.unsorted, emu.config.exchange.page_size = True, 40
    emu.config.exchange.unsorted_across_pages = False
    emu.faults.broken_page_rate = 0.0
    session = str(uuid.uuid4())
    response = exo.post(invoke_url(emu), json=command(100, session), headers=EXO_HEADERS).json()
    indexes = [r["ResultIndex"] for r in response["value"]]
    assert sorted(indexes) == list(range(1, 41)) and indexes != sorted(indexes)
    times = [r["CreationDate"] for r in response["value"]]
    assert times != sorted(times)
    link = response["@odata.nextLink"]
    again = [exo.post(link, json=command(100, session), headers=EXO_HEADERS).json()["value"] for _ in range(2)]
    assert again[0] == again[1]  # a page read again is the same page, in the same order
    assert sorted(r["ResultIndex"] for r in again[0]) == list(range(41, 81))


def test_rows_unsorted_across_pages_give_no_page_a_contiguous_run(knobs: tuple[Emulator, requests.Session]) -> None:
    """Issue 25: the call's whole block shuffled, then cut into pages: each page is a scatter of the block's indexes,
    the call as a whole exactly 1..n; a page read again is the same page."""
    emu, exo = knobs
    emu.config.exchange.unsorted, emu.config.exchange.page_size = True, 40
    emu.faults.broken_page_rate = 0.0
    session = str(uuid.uuid4())
    url: str | None = invoke_url(emu)
    pages: list[list[int]] = []
    links: list[str] = []
    while url:
        body = exo.post(url, json=command(100, session), headers=EXO_HEADERS).json()
        pages.append([r["ResultIndex"] for r in body["value"]])
        url = body.get("@odata.nextLink")
        links += [url] if url else []
    assert [len(p) for p in pages] == [40, 40, 20]
    assert sorted(i for p in pages for i in p) == list(range(1, 101))  # the call: exactly the block
    assert all(max(p) - min(p) + 1 > len(p) for p in pages)  # no page a contiguous run
    again = exo.post(links[0], json=command(100, session), headers=EXO_HEADERS).json()["value"]
    assert [r["ResultIndex"] for r in again] == pages[1]
    emu.exchange._blocks = type(emu.exchange._blocks)()  # forgotten: rebuilt from the token, the same rows
    rebuilt = exo.post(links[0], json=command(100, session), headers=EXO_HEADERS).json()["value"]
    assert rebuilt == again


@pytest.mark.parametrize("share", [0.0, 1.0])
def test_a_windows_first_call_may_answer_nothing_falsely_and_a_fresh_session_the_truth(
    knobs: tuple[Emulator, requests.Session], share: float
) -> None:
    emu, exo = knobs
    emu.config.exchange.false_answer_rate, emu.config.exchange.false_bogus_share = 0.999, share
    first, _ = one_call(exo, emu, 50, session := str(uuid.uuid4()))
    if share == 0.0:
        assert first == []
    else:
        (bogus,) = first
        assert bogus["ResultIndex"] == -1 and bogus["ResultCount"] > 0 and bogus["Identity"]
    assert emu.stats.false_answers[(TENANT, "exchange")] == 1
    again, _ = one_call(exo, emu, 50, session)  # the same session: untouched, its first block now
    fresh, _ = one_call(exo, emu, 50, str(uuid.uuid4()))  # a fresh session: false only at false_repeat_rate (0)
    assert sorted(r["ResultIndex"] for r in again) == sorted(r["ResultIndex"] for r in fresh) == list(range(1, 51))
    other, _ = one_call(exo, emu, 60, str(uuid.uuid4()))  # ResultSize is not part of the question
    assert len(other) == 60
    emu.config.exchange.false_repeat_rate = 0.999
    repeated, _ = one_call(exo, emu, 50, str(uuid.uuid4()))
    assert [r["ResultIndex"] for r in repeated] == ([-1] if share else [])


def _outcomes(emu: Emulator, exo: requests.Session, calls: int) -> list[str]:
    out = []
    for _ in range(calls):
        response = exo.post(invoke_url(emu), json=command(10, str(uuid.uuid4())), headers=EXO_HEADERS)
        body = response.json()
        if response.status_code == 400:
            details = body["error"]["details"][0]["message"]
            out.append(next(code for code in ("CmdletProxy", "ServerBusy", "Transient", "Backend") if code in details))
        elif body.get("@adminapi.warnings"):
            assert body["value"] == [] and "canceled" in body["@adminapi.warnings"][0]
            out.append("warning")
        else:
            assert response.status_code == 200 and len(body["value"]) == 10
            out.append("rows")
    return out


def test_disguised_failures_are_drawn_stably_per_seed(knobs: tuple[Emulator, requests.Session]) -> None:
    emu, exo = knobs
    emu.config.exchange.cancel_warning_rate = emu.config.exchange.transient_400_rate = 0.3
    first = _outcomes(emu, exo, 40)
    assert {"rows", "warning"} <= set(first) and len(set(first) - {"rows", "warning"}) >= 2
    stats = emu.stats
    assert stats.cancel_warnings[(TENANT, "exchange")] == first.count("warning")
    assert stats.transient_400s[(TENANT, "exchange")] == len(first) - first.count("warning") - first.count("rows")
    with run_emulator(make_config(exchange__cancel_warning_rate=0.3, exchange__transient_400_rate=0.3)) as twin:
        twin.register_app(AppRegistration(TENANT, "knobs", client_secret=SECRET))
        assert _outcomes(twin, session_for(twin, EXCHANGE_SCOPE, "knobs"), 40) == first  # the same draws


def test_more_records_available_is_present_and_honest_when_asked(knobs: tuple[Emulator, requests.Session]) -> None:
    emu, exo = knobs
    session = str(uuid.uuid4())
    _, page = one_call(exo, emu, 100, session)
    assert "AuditSearchRequestMetadata" not in page  # absent by default
    emu.config.exchange.more_records_available = "present"
    n = len(emu.ground_truth_ids(TENANT, START, END))
    flags = []
    while True:
        rows, page = one_call(exo, emu, 100, session)
        flags.append(page["AuditSearchRequestMetadata"]["moreRecordsAvailable"])
        if not rows:
            break
    assert flags[-2:] == [False, False] and all(flags[: (n - 100) // 100])


def test_a_tenant_may_refuse_high_completeness(knobs: tuple[Emulator, requests.Session]) -> None:
    emu, exo = knobs
    accepted = exo.post(invoke_url(emu), json=command(5, str(uuid.uuid4()), HighCompleteness=True), headers=EXO_HEADERS)
    assert accepted.status_code == 200
    emu.config.exchange.high_completeness = False  # "isn't available in all organizations"
    refused = exo.post(invoke_url(emu), json=command(5, str(uuid.uuid4()), HighCompleteness=True), headers=EXO_HEADERS)
    assert refused.status_code == 400
    assert "cannot be found that matches parameter name 'HighCompleteness'" in refused.text
    without = exo.post(invoke_url(emu), json=command(5, str(uuid.uuid4())), headers=EXO_HEADERS)
    assert without.status_code == 200
