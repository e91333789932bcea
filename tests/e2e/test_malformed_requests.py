"""Issue 6, item 5: malformed requests get a 400 naming the field and rule; none starts anything or writes output."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.e2e.conftest import MakeEmulator
from tests.e2e.harness import START, TENANT, Host, serve

_DROP = object()
_END = START + timedelta(hours=6)
_FUTURE = (datetime.now(UTC) + timedelta(days=2)).isoformat()


def good(**overrides: Any) -> dict[str, Any]:
    request: dict[str, Any] = {
        "tenantId": TENANT,
        "startDate": START.isoformat(),
        "endDate": _END.isoformat(),
        "intervalMinutes": 60,
        "maxConcurrency": 2,
        "source": "graph",
        "collectionId": "never-started",
    }
    for key, value in overrides.items():
        if value is _DROP:
            request.pop(key, None)
        else:
            request[key] = value
    return request


# (case, body or raw bytes, field, rule)
MALFORMED: list[tuple[str, Any, str, str]] = [
    ("not json", b"{not json", "body", "json"),
    ("array body", [1, 2], "body", "type"),
    ("unknown field", good(colour="red"), "colour", "unknown_field"),
    ("missing tenant", good(tenantId=_DROP), "tenantId", "required"),
    ("tenant number", good(tenantId=7), "tenantId", "type"),
    ("tenant bad shape", good(tenantId="contoso"), "tenantId", "format"),
    ("missing start", good(startDate=_DROP), "startDate", "required"),
    ("start not ISO", good(startDate="03/06/2024"), "startDate", "format"),
    ("missing end", good(endDate=_DROP), "endDate", "required"),
    ("end before start", good(endDate=(START - timedelta(hours=1)).isoformat()), "endDate", "order"),
    ("end equals start", good(endDate=START.isoformat()), "endDate", "order"),
    ("end in the future", good(endDate=_FUTURE), "endDate", "future"),
    ("start before retention", good(startDate="1990-01-01T00:00:00Z"), "startDate", "retention"),
    ("interval fraction", good(intervalMinutes=2.5), "intervalMinutes", "whole_number"),
    ("interval string", good(intervalMinutes="60"), "intervalMinutes", "type"),
    ("interval zero", good(intervalMinutes=0), "intervalMinutes", "range"),
    ("interval huge", good(intervalMinutes=10**7), "intervalMinutes", "range"),
    ("concurrency zero", good(maxConcurrency=0), "maxConcurrency", "range"),
    ("concurrency above max", good(maxConcurrency=1000), "maxConcurrency", "range"),
    ("concurrency string", good(maxConcurrency="2"), "maxConcurrency", "type"),
    ("source unknown", good(source="management"), "source", "choice"),
    ("filters not object", good(filters=["x"]), "filters", "type"),
    ("unknown filter", good(filters={"colour": ["red"]}), "filters.colour", "unknown_field"),
    ("operations not list", good(filters={"operations": "New-InboxRule"}), "filters.operations", "type"),
    ("bad ip", good(filters={"ipAddresses": ["10.0.0.300"]}), "filters.ipAddresses", "format"),
    ("user id with space", good(filters={"userIds": ["a b@contoso.com"]}), "filters.userIds", "characters"),
    ("keyword number", good(filters={"keyword": 5}), "filters.keyword", "type"),
    ("collection id traversal", good(collectionId="../x"), "collectionId", "format"),
    ("collection id number", good(collectionId=7), "collectionId", "format"),
    # Issue 12: hostile shapes and look-alike characters.
    ("nested 1,000 deep", b"[" * 1000 + b"]" * 1000, "body", "depth"),
    ("duplicate tenantId", b'{"tenantId": "../x", ' + json.dumps(good()).encode()[1:], "tenantId", "duplicate_key"),
    ("tenant with Kelvin sign", good(tenantId="\u212aontoso.onmicrosoft.com"), "tenantId", "ascii"),
    ("tenant trailing space", good(tenantId=f"{TENANT} "), "tenantId", "whitespace"),
    ("keyword bidi override", good(filters={"keyword": "a\u202eb"}), "filters.keyword", "characters"),
    ("operation line separator", good(filters={"operations": ["Send\u2028"]}), "filters.operations", "characters"),
    # Issue 18: a domain the sign-in authority does not know names no tenant (and so no budget).
    ("tenant domain unknown", good(tenantId="no-such-tenant.onmicrosoft.com"), "tenantId", "not_found"),
]


@pytest.fixture
def host(make_emulator: MakeEmulator, tmp_path: Path) -> Iterator[Host]:
    with serve(make_emulator(), tmp_path) as running:
        yield running


def test_at_least_25_distinct_malformed_cases() -> None:
    assert len(MALFORMED) >= 25
    assert len({(field, rule) for _, _, field, rule in MALFORMED}) >= 25


def test_each_malformed_request_is_a_400_naming_field_and_rule_and_starts_nothing(host: Host) -> None:
    before = host.instances()
    wrong: list[str] = []
    for case, request, field, rule in MALFORMED:
        response = host.post(None, raw=request) if isinstance(request, bytes) else host.post(request)
        error = (
            response.json().get("error", {})
            if response.headers.get("content-type", "").startswith("application/json")
            else {}
        )
        if response.status_code != 400 or (error.get("field"), error.get("rule")) != (field, rule):
            wrong.append(f"{case}: {response.status_code} {response.text[:200]}")
        elif not error.get("message"):
            wrong.append(f"{case}: no message")
    assert wrong == []
    # The app's other routes read no body: a hostile one is ignored, never a 500.
    for path in ("/api/collections/never-started/retry-failed", "/api/collections/never-started"):
        response = requests.request(
            "POST" if path.endswith("retry-failed") else "GET", f"{host.base}{path}", data=b"[" * 5000, timeout=30
        )
        assert response.status_code == 404, (path, response.status_code, response.text[:200])
    assert host.instances() == before
    assert host.written_files() == []
    # The same host still starts a valid request: the 400s were about the requests, not a broken app.
    assert host.post(good(collectionId="valid-after")).status_code == 202
