"""The tenant look-up's answers and cache, over a scripted loopback authority (the emulator's own answers:
test_tenant_lookup.py): the rules a hand mutation showed no other test held (docs/testing.md, "Mutation")."""

from __future__ import annotations

import pytest

from shared.audit import tenant_lookup
from shared.audit.tenant_lookup import TenantDirectory, TenantNotFoundError
from shared.errors import TransientApiError
from tests.audit.scripted_server import Reply, replies, scripted_server

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (400, {"error": "invalid_tenant", "error_description": "AADSTS90002: Tenant 'x' not found."}, "AADSTS90002"),
        (404, {"error": "invalid_tenant", "error_description": "AADSTS90002: Tenant 'x' not found."}, "AADSTS90002"),
        (404, {"error": "invalid_tenant"}, "invalid_tenant"),
        (400, {"error": "invalid_request", "error_description": "AADSTS900023: Specified tenant identifier 'a b' is "
               "neither a valid DNS name, nor a valid external domain."}, "AADSTS900023"),
    ],
)  # fmt: skip
def test_an_unknown_tenant_is_not_found_whether_answered_400_or_404(status: int, body: object, code: str) -> None:
    with scripted_server(replies(Reply(status, body))) as srv, pytest.raises(TenantNotFoundError) as raised:
        TenantDirectory(srv.base_url).guid("nobody.example.com")
    assert raised.value.rule == "not_found" and code in raised.value.message


def test_another_error_of_the_authority_is_transient() -> None:
    with scripted_server(replies(Reply(404, {"error": "not_found"}), Reply(503, None))) as srv:
        for _ in range(2):
            with pytest.raises(TransientApiError):
                TenantDirectory(srv.base_url).guid("somewhere.example.com")


def test_the_cache_lets_the_least_recently_used_name_go_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tenant_lookup, "CACHE_SIZE", 2)
    found = TenantDirectory("https://login.example.test")
    fetched: list[str] = []
    monkeypatch.setattr(found, "_fetch", lambda domain: fetched.append(domain) or TENANT)
    found.guid("a.example.com")
    found.guid("b.example.com")
    found.guid("a.example.com")  # used again: now b is the least recently used
    found.guid("c.example.com")
    found.guid("a.example.com")
    assert fetched == ["a.example.com", "b.example.com", "c.example.com"]
    found.guid("b.example.com")  # b went first
    assert fetched[-1] == "b.example.com"
