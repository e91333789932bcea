"""Exchange adapter against an InvokeCommand that pages its answers the way public clients say it does.

The scripted API below models ``Search-UnifiedAuditLog -SessionCommand ReturnLargeSet`` over HTTP: every cmdlet call
takes the session's next block of ``ResultSize`` rows, and the service hands that block out in HTTP pages of its own
size with an ``@odata.nextLink`` that the client POSTs again with the same body (what CIPP's ``New-ExoRequest.ps1``
and GreyCorbel's ExoHelper do). Page tokens are stateless, so a page can be read again; a block's first call is not.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from shared.audit.config import AuditApiConfig
from shared.audit.exchange import SYSTEM_MAILBOX, ExchangeAuditClient
from shared.audit.exchange_paging import SessionBrokenError, SessionCursor
from shared.audit.exchange_session import read_window
from shared.audit.http import AmbiguousResponseError
from shared.audit.ports import AuditFilters, TimeWindow
from shared.errors import ConfigError, NeedsSplitError, PermanentApiError
from shared.records.rules import Deduplicator
from tests.audit.scripted_server import FakeTokens, Recorded, Reply, scripted_server

WINDOW = TimeWindow(datetime(2024, 3, 1, tzinfo=UTC), datetime(2024, 3, 1, 2, tzinfo=UTC))
DOMAIN = "contoso.onmicrosoft.com"
ANCHOR = "APP:SystemMailbox{bb558c35-97f1-4cb9-8ff7-d53741dc928c}@contoso.onmicrosoft.com"


def _row(index: int, count: int) -> dict[str, Any]:
    audit = {"Id": f"rec-{index:06d}", "CreationTime": "2024-03-01T00:10:00", "Operation": "Send", "Workload": "x"}
    return {"RecordType": "ExchangeItem", "AuditData": json.dumps(audit), "ResultIndex": index, "ResultCount": count}


@dataclass
class PagedInvokeCommand:
    """A paging InvokeCommand: ``page_size`` picks each HTTP page's size from (session id, first index)."""

    count: int
    page_size: Callable[[str, int], int]
    base: list[str] = field(default_factory=list)
    progress: dict[str, int] = field(default_factory=dict)
    """Rows each SessionId has handed out (its blocks so far)."""
    lose_block: tuple[int, int] | None = None
    """(session number, block number): that block's first response is lost (the session advanced, the answer 503)."""
    fail_first_continuation: bool = False
    """The first nextLink read answers 503 (nothing advanced: page tokens are stateless)."""
    failed_tokens: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    blocks: dict[str, int] = field(default_factory=dict)
    served_tokens: list[str] = field(default_factory=list)

    def handle(self, request: Recorded) -> Reply:
        assert request.method == "POST", "InvokeCommand takes POST only, nextLink pages too"
        params = request.body["CmdletInput"]["Parameters"]
        session = params["SessionId"]
        query = parse_qs(urlsplit(request.path).query)
        if "$skiptoken" in query:
            token = query["$skiptoken"][0]
            if self.fail_first_continuation and not self.failed_tokens:
                self.failed_tokens.append(token)
                return Reply(503, {"error": {"code": "ServiceUnavailable", "message": "try later"}})
            self.served_tokens.append(token)
            token_session, start, last = token.split(".")
            assert token_session == session, "a nextLink is POSTed with the body of the call it continues"
            return self._page(session, int(start), int(last))
        if session not in self.sessions:
            self.sessions.append(session)
        done = self.progress.get(session, 0)
        size = int(params["ResultSize"])
        block_last = min(done + size, self.count)
        self.progress[session] = block_last
        self.blocks[session] = self.blocks.get(session, 0) + 1
        if self.lose_block == (self.sessions.index(session) + 1, self.blocks[session]):
            return Reply(503, {"error": {"code": "ServiceUnavailable", "message": "The service is unavailable."}})
        if done >= self.count:
            return Reply(200, {"value": []})
        return self._page(session, done + 1, block_last)

    def _page(self, session: str, start: int, last: int) -> Reply:
        size = max(1, self.page_size(session, start))
        end = min(start + size - 1, last)
        body: dict[str, Any] = {"value": [_row(i, self.count) for i in range(start, end + 1)]}
        if end < last:
            body["@odata.nextLink"] = (
                f"{self.base[0]}/adminapi/beta/{DOMAIN}/InvokeCommand?$skiptoken={session}.{end + 1}.{last}"
            )
        return Reply(200, body)


def client_for(base_url: str, **kwargs: Any) -> ExchangeAuditClient:
    config = AuditApiConfig(tenant_id=DOMAIN, client_id="app", client_secret="s", exchange_base_url=base_url)
    return ExchangeAuditClient(config, tokens=FakeTokens(), sleep=lambda _: None, **kwargs)


def collect_ids(client: ExchangeAuditClient, **kwargs: Any) -> tuple[list[str], int]:
    """The window read call after call as the lane reads a chunk (``read_window``: ``read_block`` with the cursor
    carried, a broken session started over); ids as a consumer that de-duplicates by id (the chunk writer) keeps
    them, and how many repeats it dropped."""
    dedupe = Deduplicator()
    ids: list[str] = []
    for pages, _ in read_window(client, WINDOW, AuditFilters(), **kwargs):
        for page in pages:
            unique, _ = dedupe.filter(page.records)
            ids += [r["id"] for r in unique]
    return ids, dedupe.duplicates_removed


def expected(count: int) -> list[str]:
    return [f"rec-{i:06d}" for i in range(1, count + 1)]


@pytest.mark.parametrize(
    ("name", "page_size"),
    [
        ("1000 per page", lambda _s, _i: 1000),
        ("5000 per page", lambda _s, _i: 5000),
        (
            "a seeded mix",
            lambda s, i: random.Random(f"{s}:{i}").choice([1000, 5000, random.Random(i).randint(1, 5000)]),
        ),
    ],
)
def test_a_window_is_exact_whatever_page_size_the_service_picks(name: str, page_size: Any) -> None:
    api = PagedInvokeCommand(count=12_345, page_size=page_size)
    with scripted_server(api.handle) as srv:
        api.base.append(srv.base_url)
        ids, repeats = collect_ids(client_for(srv.base_url))
    assert ids == expected(12_345), name
    assert repeats == 0
    session_calls = [r for r in srv.requests if "$skiptoken" not in r.path]
    assert [r.body["CmdletInput"]["Parameters"]["ResultSize"] for r in session_calls] == [5000] * 3


def test_requests_ask_for_1000_rows_and_route_with_the_app_only_anchor() -> None:
    api = PagedInvokeCommand(count=2_500, page_size=lambda _s, _i: 1000)
    with scripted_server(api.handle) as srv:
        api.base.append(srv.base_url)
        ids, _ = collect_ids(client_for(srv.base_url))
    assert len(ids) == 2_500
    for request in srv.requests:
        assert request.headers["Prefer"] == "odata.maxpagesize=1000"
        assert request.headers["X-AnchorMailbox"] == ANCHOR
    next_pages = [r for r in srv.requests if "$skiptoken" in r.path]
    assert len(next_pages) == 2  # 2,500 rows of one block: 1,000 + 1,000 + 500
    assert all(r.body == srv.requests[0].body for r in next_pages)  # the same body, re-sent


def test_a_next_link_to_another_host_is_refused_before_any_request_goes_there() -> None:
    api = PagedInvokeCommand(count=2_500, page_size=lambda _s, _i: 1000)
    with scripted_server(api.handle) as srv:
        api.base.append("https://evil.example.com")
        pages = client_for(srv.base_url).read_block(WINDOW, AuditFilters(), SessionCursor("s-1"), record_type=None)
        assert len(next(pages).records) == 1000
        with pytest.raises(PermanentApiError, match="outside"):
            next(pages)


def test_a_failed_next_link_page_is_read_again_without_duplicates_or_gaps() -> None:
    api = PagedInvokeCommand(count=4_200, page_size=lambda _s, _i: 1000, fail_first_continuation=True)
    with scripted_server(api.handle) as srv:
        api.base.append(srv.base_url)
        ids, repeats = collect_ids(client_for(srv.base_url))
    assert ids == expected(4_200) and repeats == 0
    assert len(api.sessions) == 1  # the failed page did not start a new session
    failed = api.failed_tokens[0]
    assert api.served_tokens.count(failed) == 1  # the same page read again once, after the 503


def test_a_lost_block_response_restarts_the_session_instead_of_skipping_a_block() -> None:
    # Block 2 of the session advances, then its answer is lost. Sending that call again would hand out block 3; the
    # reader starts a fresh session instead, and the repeats of block 1 are removed by id downstream.
    api = PagedInvokeCommand(count=12_000, page_size=lambda _s, _i: 1000, lose_block=(1, 2))
    with scripted_server(api.handle) as srv:
        api.base.append(srv.base_url)
        ids, repeats = collect_ids(client_for(srv.base_url))
    assert ids == expected(12_000)
    assert repeats == 5000  # the first session's block 1, delivered again by the restarted session
    assert len(api.sessions) == 2  # the session that lost block 2, its replacement


def test_high_completeness_is_passed_as_the_cmdlet_switch() -> None:
    api = PagedInvokeCommand(count=10, page_size=lambda _s, _i: 1000)
    with scripted_server(api.handle) as srv:
        api.base.append(srv.base_url)
        client = client_for(srv.base_url)
        assert client.probe(WINDOW, high_completeness=True).rows == 10
        ids, _ = collect_ids(client, high_completeness=True)
        plain, _ = collect_ids(client)
    assert len(ids) == 10 and len(plain) == 10
    flags = [r.body["CmdletInput"]["Parameters"].get("HighCompleteness") for r in srv.requests]
    assert flags == [True, True, None]  # the probe, the session with the switch, the session without


@pytest.mark.parametrize("status", [404, 410])
@pytest.mark.parametrize("how", ["probe", "read_block"])
def test_a_missing_invoke_command_endpoint_names_the_setting_and_dooms(status: int, how: str) -> None:
    body = {"Message": "No HTTP resource was found that matches the request URI."}
    with scripted_server(lambda _: Reply(status, body)) as srv, pytest.raises(ConfigError) as info:
        client = client_for(srv.base_url)
        if how == "probe":
            client.probe(WINDOW)
        else:
            list(client.read_block(WINDOW, AuditFilters(), SessionCursor("s-1"), record_type=None))
    assert info.value.dooms_collection and "AUDIT_EXCHANGE_BASE_URL" in str(info.value)
    assert "/adminapi/beta/contoso.onmicrosoft.com/InvokeCommand" in str(info.value)


@pytest.mark.parametrize("tenant", ["contoso.com", "sub.contoso.onmicrosoft.com"])
def test_a_tenant_named_neither_by_guid_nor_initial_domain_cannot_be_routed(tenant: str) -> None:
    config = AuditApiConfig(tenant_id=tenant, client_id="app", client_secret="s")
    with pytest.raises(ConfigError) as info:
        ExchangeAuditClient(config, tokens=FakeTokens())
    assert info.value.setting == "tenant_id" and "onmicrosoft.com" in str(info.value) and "GUID" in str(info.value)


@pytest.mark.parametrize(
    ("tenant", "anchor"),
    [
        ("72f988bf-86f1-41af-91ab-2d7cd011db47", "APP:" + SYSTEM_MAILBOX + "@72f988bf-86f1-41af-91ab-2d7cd011db47"),
        ("72F988BF-86F1-41AF-91AB-2D7CD011DB47", "APP:" + SYSTEM_MAILBOX + "@72f988bf-86f1-41af-91ab-2d7cd011db47"),
        ("Contoso.onmicrosoft.com", "APP:" + SYSTEM_MAILBOX + "@contoso.onmicrosoft.com"),
    ],
)
def test_a_tenant_guid_is_routed_with_the_app_anchor_at_the_guid(tenant: str, anchor: str) -> None:
    """CIPP (since 2025-02) and ExoHelper send APP:SystemMailbox{...}@<tenant id>; the initial domain still works."""
    api = PagedInvokeCommand(count=10, page_size=lambda _s, _i: 1000)
    with scripted_server(api.handle) as srv:
        api.base.append(srv.base_url)
        config = AuditApiConfig(tenant_id=tenant, client_id="app", client_secret="s", exchange_base_url=srv.base_url)
        client = ExchangeAuditClient(config, tokens=FakeTokens(), sleep=lambda _: None)
        assert client.probe(WINDOW).rows == 10
    assert srv.requests[0].headers["X-AnchorMailbox"] == anchor


def _blocks(client: ExchangeAuditClient, cursor: SessionCursor, **kwargs: Any) -> list[list[str]]:
    """One cmdlet call per block until a short call closes the session, the cursor carried between them as its JSON
    fields (another process each)."""
    out: list[list[str]] = []
    while cursor.last is None or cursor.last.full:
        ids = [r["id"] for page in client.read_block(WINDOW, AuditFilters(), cursor, record_type=None, **kwargs)
               for r in page.records]  # fmt: skip
        out.append(ids)
        carried = SessionCursor(cursor.session_id, next_index=cursor.next_index, calls=cursor.calls)
        carried.last = cursor.last
        cursor = carried
    return out


def test_a_session_read_one_call_at_a_time_is_exact_with_the_cursor_carried_between_calls() -> None:
    api = PagedInvokeCommand(count=12_345, page_size=lambda _s, _i: 1000)
    with scripted_server(api.handle) as srv:
        api.base.append(srv.base_url)
        blocks = _blocks(client_for(srv.base_url), SessionCursor("s-1"))
    assert [len(b) for b in blocks] == [5000, 5000, 2345]  # one cmdlet call each, its 1,000-row pages followed
    assert [i for b in blocks for i in b] == expected(12_345)
    assert api.sessions == ["s-1"]


def test_a_call_whose_session_moved_on_without_the_caller_is_a_broken_session() -> None:
    api = PagedInvokeCommand(count=12_000, page_size=lambda _s, _i: 1000)
    with scripted_server(api.handle) as srv:
        api.base.append(srv.base_url)
        client = client_for(srv.base_url)
        cursor = SessionCursor("s-1")
        assert len([p for p in client.read_block(WINDOW, AuditFilters(), cursor, record_type=None)]) == 5
        stale = SessionCursor("s-1")  # the cursor before that call: its result never reached the lane
        with pytest.raises(SessionBrokenError):
            list(client.read_block(WINDOW, AuditFilters(), stale, record_type=None))


def test_a_lost_first_page_of_a_call_is_ambiguous_and_nothing_is_yielded() -> None:
    api = PagedInvokeCommand(count=12_000, page_size=lambda _s, _i: 1000, lose_block=(1, 2))
    with scripted_server(api.handle) as srv:
        api.base.append(srv.base_url)
        client = client_for(srv.base_url)
        cursor = SessionCursor("s-1")
        list(client.read_block(WINDOW, AuditFilters(), cursor, record_type=None))
        with pytest.raises(AmbiguousResponseError):
            next(iter(client.read_block(WINDOW, AuditFilters(), cursor, record_type=None)))
    assert cursor.next_index == 5001  # the caller starts a new session; this one stays where it was


def test_a_session_over_the_cap_splits_or_is_read_until_it_reaches_the_cap() -> None:
    api = PagedInvokeCommand(count=12_000, page_size=lambda _s, _i: 1000)
    with scripted_server(api.handle) as srv:
        api.base.append(srv.base_url)
        client = client_for(srv.base_url, session_cap=7_500)
        with pytest.raises(NeedsSplitError):  # the count announces more than the cap: a claim of "more" is trusted
            list(client.read_block(WINDOW, AuditFilters(), SessionCursor("s-1"), record_type=None))
        calls = list(read_window(client, WINDOW, AuditFilters(), splittable=False))
    assert [sum(len(p.records) for p in pages) for pages, _ in calls] == [5000, 5000]
    (evidence,) = calls[-1][1].evidence
    assert not evidence["complete"] and "cap of 7,500 rows" in evidence["detail"]


@pytest.mark.parametrize(
    ("count", "page"),
    [
        (1_001, 1000),  # one row past a 1,000-row page
        (3_001, 1000),  # page size x 3 + 1
        (5_001, 1000),  # one row past a 5,000-row call (its last row on a page of its own, in the next call)
        (5_001, 5000),
        (10_001, 5000),  # call size x 2 + 1
        (4_999, 1000),
        (7, 3),  # page size x 2 + 1 with tiny pages
    ],
)
def test_a_session_ending_one_past_a_page_or_call_boundary_loses_no_row(count: int, page: int) -> None:
    """Issue 18.9: the last row, alone on its page or in its call, must be read (and nothing read twice)."""
    api = PagedInvokeCommand(count=count, page_size=lambda _s, _i: page)
    with scripted_server(api.handle) as srv:
        api.base.append(srv.base_url)
        ids, repeats = collect_ids(client_for(srv.base_url))
    assert ids == expected(count) and repeats == 0


@pytest.mark.parametrize(
    "link",
    [
        "http://outlook.office365.com/adminapi/beta/contoso.onmicrosoft.com/InvokeCommand?$skiptoken=a",
        "https://outlook.office365.com.evil.example/adminapi/beta/x/InvokeCommand?$skiptoken=a",
        "https://evil.example/adminapi/beta/x/InvokeCommand",
        "https://outlook.office365.com:8443/adminapi/beta/x/InvokeCommand",
    ],
)
def test_a_next_link_off_the_configured_origin_is_refused_plain_http_on_the_same_host_too(link: str) -> None:
    """Issue 18.9: the bearer token goes wherever the link points, so a link on the right host but over http://
    (the token in clear) is refused like a link to another host."""
    config = AuditApiConfig(tenant_id=DOMAIN, client_id="app", client_secret="s")
    client = ExchangeAuditClient(config, tokens=FakeTokens())
    with pytest.raises(PermanentApiError, match=r"outside https://outlook\.office365\.com"):
        client._checked_next_link(link)
    same = "https://OUTLOOK.office365.com/adminapi/beta/contoso.onmicrosoft.com/InvokeCommand?$skiptoken=a"
    assert client._checked_next_link(same) == same
