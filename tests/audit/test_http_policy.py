"""The retry and error-mapping policy of AuditHttpClient, over real loopback HTTP with a fake sleep and clock."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
import requests

from shared.audit.config import AuditApiConfig
from shared.audit.http import ApiIdentity, AuditHttpClient, json_body, parse_retry_after
from shared.errors import AuthenticationError, MissingPermissionError, PermanentApiError, TransientApiError
from shared.records.raw_json import split_page
from tests.audit.scripted_server import FakeTokens, Reply, replies, scripted_server

API = ApiIdentity(name="Test API", scope="https://example.test/.default", permission="Perm.Read.All")
NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
OK = Reply(200, {"ok": True})


def make_client(base_url: str, **overrides: object) -> tuple[AuditHttpClient, list[float], FakeTokens]:
    settings: dict[str, object] = {
        "tenant_id": "contoso.onmicrosoft.com",
        "client_id": "app",
        "client_secret": "s3cret-value",
        "graph_base_url": base_url,
        "max_attempts": 6,
        "max_retry_wait_seconds": 120.0,
        "http_timeout_seconds": 5.0,
    }
    settings.update(overrides)
    config = AuditApiConfig(**settings)  # type: ignore[arg-type]
    waits: list[float] = []
    tokens = FakeTokens()
    client = AuditHttpClient(config, tokens, API, sleep=waits.append, clock=lambda: NOW)
    return client, waits, tokens


def test_429_retry_after_seconds_is_honoured() -> None:
    with scripted_server(replies(Reply(429, {"error": {"code": "TooMany"}}, {"Retry-After": "7"}), OK)) as srv:
        client, waits, _ = make_client(srv.base_url)
        assert client.request_json("GET", f"{srv.base_url}/x") == {"ok": True}
    assert waits == [7.0]
    assert len(srv.requests) == 2


def test_retry_after_http_date_is_relative_to_the_clock() -> None:
    when = format_datetime(NOW + timedelta(seconds=42), usegmt=True)
    with scripted_server(replies(Reply(503, None, {"Retry-After": when}), OK)) as srv:
        client, waits, _ = make_client(srv.base_url)
        client.request_json("GET", f"{srv.base_url}/x")
    assert waits == [42.0]


def test_retry_after_is_capped() -> None:
    with scripted_server(replies(Reply(429, None, {"Retry-After": "3600"}), OK)) as srv:
        client, waits, _ = make_client(srv.base_url, max_retry_wait_seconds=30.0)
        client.request_json("GET", f"{srv.base_url}/x")
    assert waits == [30.0]


def test_exchange_style_wait_in_429_message_is_used() -> None:
    body = {"error": {"code": "TooManyRequests", "message": "Too many concurrent requests. Retry after 12 seconds."}}
    with scripted_server(replies(Reply(429, body), OK)) as srv:
        client, waits, _ = make_client(srv.base_url)
        client.request_json("GET", f"{srv.base_url}/x")
    assert waits == [12.0]


def test_backoff_without_retry_after_grows_and_stays_under_cap() -> None:
    with scripted_server(replies(Reply(502), Reply(500), Reply(504), Reply(503), OK)) as srv:
        client, waits, _ = make_client(srv.base_url, max_retry_wait_seconds=3.0)
        assert client.request_json("GET", f"{srv.base_url}/x") == {"ok": True}
    assert len(waits) == 4
    assert all(0 < w <= 3.0 for w in waits)
    assert waits[1] >= 2.0  # exponential: second wait starts at 2 s before jitter


def test_gives_up_after_max_attempts_with_retry_after() -> None:
    with scripted_server(replies(Reply(429, None, {"Retry-After": "5"}))) as srv:
        client, waits, _ = make_client(srv.base_url, max_attempts=4)
        with pytest.raises(TransientApiError) as info:
            client.request_json("GET", f"{srv.base_url}/x")
    assert len(srv.requests) == 4
    assert len(waits) == 3
    assert info.value.retry_after == 5.0
    assert info.value.status == 429


def test_connection_errors_are_retried_then_transient() -> None:
    with scripted_server(replies(OK)) as srv:
        dead_url = srv.base_url
    client, waits, _ = make_client(dead_url, max_attempts=3)
    with pytest.raises(TransientApiError):
        client.request_json("GET", f"{dead_url}/x")
    assert len(waits) == 2


def test_permanent_403_names_the_permission_without_retrying() -> None:
    body = {"error": {"code": "Authorization_RequestDenied", "message": "Insufficient privileges."}}
    with scripted_server(replies(Reply(403, body))) as srv:
        client, waits, _ = make_client(srv.base_url)
        with pytest.raises(MissingPermissionError) as info:
            client.request_json("GET", f"{srv.base_url}/x")
    assert info.value.permission == "Perm.Read.All"
    assert "Perm.Read.All" in str(info.value)
    assert len(srv.requests) == 1 and waits == []


def test_transient_403_is_retried_then_succeeds() -> None:
    body = {"error": {"code": "Forbidden", "message": "try later"}}
    with scripted_server(replies(Reply(403, body), Reply(403, body), OK)) as srv:
        client, _, _ = make_client(srv.base_url, transient_403_attempts=3)
        assert client.request_json("GET", f"{srv.base_url}/x") == {"ok": True}
    assert len(srv.requests) == 3


def test_persistent_403_stops_after_its_own_budget() -> None:
    with scripted_server(replies(Reply(403, {"error": {"code": "Forbidden"}}))) as srv:
        client, _, _ = make_client(srv.base_url, transient_403_attempts=2, max_attempts=10)
        with pytest.raises(TransientApiError) as info:
            client.request_json("GET", f"{srv.base_url}/x")
    assert len(srv.requests) == 3  # first try + 2 retries
    assert info.value.status == 403
    assert "Perm.Read.All" in str(info.value)


def test_401_refreshes_token_once() -> None:
    with scripted_server(replies(Reply(401, {"error": {"code": "InvalidAuthenticationToken"}}), OK)) as srv:
        client, waits, tokens = make_client(srv.base_url)
        assert client.request_json("GET", f"{srv.base_url}/x") == {"ok": True}
    assert tokens.invalidated == 1
    assert srv.requests[0].headers["Authorization"] != srv.requests[1].headers["Authorization"]
    assert waits == []


def test_second_401_is_authentication_error_without_token(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    unauthorized = Reply(401, {"error": {"code": "InvalidAuthenticationToken", "message": "bad"}})
    with scripted_server(replies(unauthorized)) as srv:
        client, _, tokens = make_client(srv.base_url)
        with pytest.raises(AuthenticationError) as info:
            client.request_json("GET", f"{srv.base_url}/x")
    assert tokens.invalidated == 1 and len(srv.requests) == 2
    assert FakeTokens.SECRET_TOKEN not in str(info.value)
    assert FakeTokens.SECRET_TOKEN not in caplog.text
    assert "s3cret-value" not in caplog.text


def test_other_4xx_is_permanent_with_server_code() -> None:
    body = {"error": {"code": "BadRequest", "message": "Invalid request data"}}
    with scripted_server(replies(Reply(400, body))) as srv:
        client, waits, _ = make_client(srv.base_url)
        with pytest.raises(PermanentApiError) as info:
            client.request_json("POST", f"{srv.base_url}/x", json_body={"a": 1})
    assert not isinstance(info.value, TransientApiError)
    assert "BadRequest" in str(info.value) and "Invalid request data" in str(info.value)
    assert info.value.status == 400 and waits == []


def test_404_allowed_returns_none_and_garbled_json_is_retried() -> None:
    with scripted_server(replies(Reply(404, {"error": {"code": "NotFound"}}))) as srv:
        client, _, _ = make_client(srv.base_url)
        assert client.request_json("DELETE", f"{srv.base_url}/x", not_found_ok=True) is None
    with scripted_server(replies(Reply(200, raw=b'{"value": [tru'), OK)) as srv:
        client, waits, _ = make_client(srv.base_url)
        assert client.request_json("GET", f"{srv.base_url}/x") == {"ok": True}
    assert len(waits) == 1


def test_a_body_is_decoded_once_with_every_digit_and_nan_is_not_json() -> None:
    big = 123456789012345678901234567890
    body = f'{{"value": [{{"n": {big}, "f": 1e-7, "s": "\\u00e9"}}]}}'.encode()
    with scripted_server(replies(Reply(200, raw=body))) as srv:
        client, _, _ = make_client(srv.base_url)
        assert client.request_json("GET", f"{srv.base_url}/x") == {"value": [{"n": big, "f": 1e-7, "s": "\u00e9"}]}
    # NaN is no JSON value (RFC 8259): such a body is unreadable, like a cut-off one, and read again.
    with scripted_server(replies(Reply(200, raw=b'{"value": [NaN]}'), OK)) as srv:
        client, waits, _ = make_client(srv.base_url)
        assert client.request_json("GET", f"{srv.base_url}/x") == {"ok": True}
    assert len(waits) == 1


def test_a_body_in_another_declared_charset_is_decoded_by_requests() -> None:
    response = requests.Response()
    response._content = '{"name": "J\u00fcrgen"}'.encode("latin-1")
    response.headers["Content-Type"] = "application/json; charset=ISO-8859-1"
    response.encoding = "ISO-8859-1"
    assert json_body(response) == {"name": "J\u00fcrgen"}
    response.encoding = "utf-8"
    response._content = '{"name": "J\u00fcrgen"}'.encode()
    assert json_body(response) == {"name": "J\u00fcrgen"}


def test_retry_wait_scale_shrinks_waits() -> None:
    with scripted_server(replies(Reply(429, None, {"Retry-After": "10"}), OK)) as srv:
        config = AuditApiConfig(tenant_id="contoso.onmicrosoft.com", client_id="a", client_secret="s")
        waits: list[float] = []
        client = AuditHttpClient(config, FakeTokens(), API, sleep=waits.append, retry_wait_scale=0.01)
        client.request_json("GET", f"{srv.base_url}/x")
    assert waits == [pytest.approx(0.1)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0", 0.0), ("2.5", 2.5), (" 30 ", 30.0), ("garbage", None), (None, None), ("-3", 0.0)],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, now=NOW) == expected


def test_parse_retry_after_date_in_the_past_is_zero() -> None:
    assert parse_retry_after(format_datetime(NOW - timedelta(minutes=1), usegmt=True), now=NOW) == 0.0


def test_a_429_is_logged_as_a_throttling_event_with_the_tenant_and_the_chunk(caplog: pytest.LogCaptureFixture) -> None:
    """docs/operations.md's "throttling by tenant over time" counts these events."""
    from shared.log_fields import chunk_context, parse_event

    caplog.set_level(logging.INFO, logger="shared.audit.http")
    chunk = {"start": "2024-06-03T00:00:00Z", "end": "2024-06-03T04:00:00Z"}
    replies_ = replies(Reply(429, {"error": {"code": "TooMany"}}, {"Retry-After": "7"}), Reply(503, {}), OK)
    with scripted_server(replies_) as srv, chunk_context({"collectionId": "c-1", "chunk": chunk}, source="graph"):
        client, _, _ = make_client(srv.base_url)
        assert client.request_json("GET", f"{srv.base_url}/x") == {"ok": True}
    events = [e for e in (parse_event(r.getMessage()) for r in caplog.records) if e is not None]
    assert events == [
        {
            "event": "api.throttled",
            "collectionId": "c-1",
            "source": "graph",
            "chunkStart": "2024-06-03T00:00:00Z",
            "chunkEnd": "2024-06-03T04:00:00Z",
            "tenantId": "contoso.onmicrosoft.com",
            "api": "Test API",
            "status": 429,
            "attempt": 1,
            "retryAfterSeconds": 7.0,
            "waitSeconds": 7.0,
        }
    ]  # the 503 is retried too, but it is not throttling


def test_a_records_page_is_split_from_its_bytes_and_a_broken_one_is_read_again() -> None:
    """``request_page`` hands a 2xx body's UTF-8 bytes to the page's own reader (the Graph adapter splits a records
    page there); a page that reader refuses is unreadable, read again like a cut-off JSON body."""
    seen: list[bytes] = []

    def split(body: bytes) -> Any:
        seen.append(body)
        return split_page(body, members=("@odata.nextLink",))

    page = b'{"value":[{"id":"a"}, {"id":"b"}],"@odata.nextLink":null}'
    with scripted_server(replies(Reply(200, raw=b'{"value":[{"id":"a"},'), Reply(200, raw=page))) as srv:
        client, waits, _ = make_client(srv.base_url)
        answer = client.request_page(f"{srv.base_url}/records", split=split)
    assert [bytes(item) for item in answer.items] == [b'{"id":"a"}', b'{"id":"b"}'] and len(waits) == 1
    assert seen[-1] == page


def test_a_records_page_in_another_declared_charset_is_decoded_whole() -> None:
    body = '{"value":[{"name":"J\u00fcrgen"}]}'.encode("latin-1")
    headers = {"Content-Type": "application/json; charset=ISO-8859-1"}
    with scripted_server(replies(Reply(200, raw=body, headers=headers))) as srv:
        client, _, _ = make_client(srv.base_url)
        answer = client.request_page(f"{srv.base_url}/records", split=lambda _: pytest.fail("split a latin-1 body"))
    assert isinstance(answer, dict) and answer["value"][0]["name"].startswith("J")  # decoded by json_body
