from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shared.requests.validation import CollectionRequest, InvalidRequest
from shared.settings import Settings
from shared.sources.registry import validate_collection_request

NOW = datetime(2024, 11, 18, 12, 0, tzinfo=UTC)
SETTINGS = Settings(max_chunks=100, max_concurrency=5, max_filter_values=3, retention_days=180, max_lookback_days=300)


def good(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "tenantId": "contoso.onmicrosoft.com",
        "startDate": "2024-11-17T10:14:59",
        "endDate": "2024-11-18T10:14:59Z",
        "intervalMinutes": 240,
        "maxConcurrency": 2,
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not _DROP}


_DROP = object()


def test_valid_request_is_normalised() -> None:
    req = validate_collection_request(good(source="Exchange", filters={"ipAddresses": [" 10.0.0.1 "]}), SETTINGS, NOW)
    assert req.start == datetime(2024, 11, 17, 10, 14, 59, tzinfo=UTC)  # timezone-less = UTC
    assert req.chunk_count == 6
    assert req.source == "exchange"
    assert req.filters.ip_addresses == ("10.0.0.1",)
    assert req.collection_id is None


def test_defaults_come_from_settings() -> None:
    req = validate_collection_request(good(maxConcurrency=_DROP), Settings(default_concurrency=4), NOW)
    assert req.max_concurrency == 4
    assert req.source == "graph"


def test_guid_tenant_and_collection_id_accepted() -> None:
    body = good(tenantId="72F988BF-86F1-41AF-91AB-2D7CD011DB47", collectionId="case-42_a")
    req = validate_collection_request(body, SETTINGS, NOW)
    assert req.tenant_id == "72f988bf-86f1-41af-91ab-2d7cd011db47"
    assert req.collection_id == "case-42_a"


MALFORMED: list[tuple[str, Any, str, str]] = [
    ("not an object", ["x"], "body", "type"),
    ("unknown field", good(extra=1), "extra", "unknown_field"),
    ("missing tenant", good(tenantId=_DROP), "tenantId", "required"),
    ("tenant not a string", good(tenantId=12), "tenantId", "type"),
    ("tenant bad shape", good(tenantId="contoso"), "tenantId", "format"),
    ("tenant path traversal", good(tenantId="../etc.com"), "tenantId", "format"),
    ("missing start", good(startDate=_DROP), "startDate", "required"),
    ("start not a string", good(startDate=20241117), "startDate", "type"),
    ("start not ISO", good(startDate="17/11/2024"), "startDate", "format"),
    ("end not ISO", good(endDate="yesterday"), "endDate", "format"),
    ("end before start", good(endDate="2024-11-17T10:00:00Z"), "endDate", "order"),
    ("end equals start", good(endDate="2024-11-17T10:14:59Z"), "endDate", "order"),
    ("end in future", good(endDate="2024-11-19T00:00:00Z"), "endDate", "future"),
    ("start beyond retention", good(startDate="2024-01-01T00:00:00Z"), "startDate", "retention"),
    ("interval fractional", good(intervalMinutes=1.5), "intervalMinutes", "whole_number"),
    ("interval string", good(intervalMinutes="60"), "intervalMinutes", "type"),
    ("interval bool", good(intervalMinutes=True), "intervalMinutes", "type"),
    ("interval zero", good(intervalMinutes=0), "intervalMinutes", "range"),
    ("interval too large", good(intervalMinutes=10**6), "intervalMinutes", "range"),
    ("too many chunks", good(intervalMinutes=1), "intervalMinutes", "too_many_chunks"),
    ("concurrency zero", good(maxConcurrency=0), "maxConcurrency", "range"),
    ("concurrency above max", good(maxConcurrency=6), "maxConcurrency", "range"),
    ("concurrency not number", good(maxConcurrency="3"), "maxConcurrency", "type"),
    ("source unknown", good(source="management"), "source", "choice"),
    ("source not string", good(source=1), "source", "choice"),
    ("filters not object", good(filters=["x"]), "filters", "type"),
    ("unknown filter", good(filters={"colour": ["red"]}), "filters.colour", "unknown_field"),
    ("operations not list", good(filters={"operations": "New-InboxRule"}), "filters.operations", "type"),
    ("operations with numbers", good(filters={"operations": [1]}), "filters.operations", "type"),
    ("too many operations", good(filters={"operations": ["a", "b", "c", "d"]}), "filters.operations", "count"),
    ("operation bad chars", good(filters={"operations": ["New InboxRule;"]}), "filters.operations", "characters"),
    ("record type bad chars", good(filters={"recordTypes": ["exchange-item"]}), "filters.recordTypes", "characters"),
    ("user id bad chars", good(filters={"userIds": ["a b@contoso.com"]}), "filters.userIds", "characters"),
    ("user id too long", good(filters={"userIds": ["a" * 300]}), "filters.userIds", "length"),
    ("empty filter value", good(filters={"userIds": ["  "]}), "filters.userIds", "empty"),
    ("bad ip", good(filters={"ipAddresses": ["10.0.0.300"]}), "filters.ipAddresses", "format"),
    ("object id control char", good(filters={"objectIds": ["a\nb"]}), "filters.objectIds", "characters"),
    ("object id too long", good(filters={"objectIds": ["x" * 1025]}), "filters.objectIds", "length"),
    ("keyword not string", good(filters={"keyword": 5}), "filters.keyword", "type"),
    ("keyword too long", good(filters={"keyword": "k" * 257}), "filters.keyword", "length"),
    ("keyword control char", good(filters={"keyword": "a\x00"}), "filters.keyword", "characters"),
    (
        "exchange with two record types",
        good(source="exchange", filters={"recordTypes": ["ExchangeItem", "SharePoint"]}),
        "filters.recordTypes",
        "single_value",
    ),
    ("collection id unsafe", good(collectionId="../x"), "collectionId", "format"),
    ("collection id too long", good(collectionId="a" * 65), "collectionId", "format"),
    ("collection id not string", good(collectionId=7), "collectionId", "format"),
    # GET /api/collections/view is the list page: a collection named so could never show its summary
    ("collection id is the list page", good(collectionId="View"), "collectionId", "reserved"),
    # Durable instance ids are case-insensitive in places (DTFx sessions, the entity message sorter), blob names are
    # not: "Incident-7" and "incident-7" ran as two collections and one hung on the tenant budget.
    ("collection id with capitals", good(collectionId="Incident-7"), "collectionId", "lowercase"),
    # ``$`` also matches before a final newline: the id would become an instance id and a blob path component.
    # (The newline is a control character, so the rule for every request string catches it first.)
    ("collection id trailing newline", good(collectionId="c1\n"), "collectionId", "characters"),
]


@pytest.mark.parametrize(("case", "body", "field", "rule"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_request_names_field_and_rule(case: str, body: Any, field: str, rule: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        validate_collection_request(body, SETTINGS, NOW)
    assert (caught.value.field, caught.value.rule) == (field, rule), case
    payload = caught.value.to_json()["error"]
    assert payload["field"] == field and payload["rule"] == rule and payload["message"]


def test_malformed_cases_are_distinct_and_many() -> None:
    assert len({(m[2], m[3], m[0]) for m in MALFORMED}) == len(MALFORMED) >= 25


def test_too_many_chunks_suggests_the_smallest_fitting_interval() -> None:
    body = good(startDate="2024-11-08T12:00:00Z", endDate="2024-11-18T12:00:00Z", intervalMinutes=60)
    with pytest.raises(InvalidRequest) as caught:
        validate_collection_request(body, SETTINGS, NOW)
    # 10 days = 14,400 minutes; 100 chunks at most -> 144 minutes.
    assert "intervalMinutes >= 144" in caught.value.message
    assert validate_collection_request(good(**{**body, "intervalMinutes": 144}), SETTINGS, NOW).chunk_count == 100


def test_retention_boundary_is_inclusive() -> None:
    start = NOW - timedelta(days=180)
    body = good(startDate=start.isoformat(), endDate=(start + timedelta(hours=1)).isoformat(), intervalMinutes=60)
    assert validate_collection_request(body, SETTINGS, NOW).chunk_count == 1


# -- look-alike and invisible characters (issue 12, item 3) --------------------------------------------------
KELVIN = "\u212a"  # KELVIN SIGN: str.lower() turns it into ASCII "k"
LOOKALIKES: list[tuple[str, Any, str, str]] = [
    # Case folding before an ASCII check silently turned these into another (valid-looking) tenant.
    ("tenant with Kelvin sign", good(tenantId=f"{KELVIN}ontoso.onmicrosoft.com"), "tenantId", "ascii"),
    (
        "guid tenant with a fullwidth digit",
        good(tenantId="72f988bf-86f1-41af-91ab-2d7cd011db4\uff17"),
        "tenantId",
        "ascii",
    ),
    ("tenant with dotless i", good(tenantId="contoso.onm\u0131crosoft.com"), "tenantId", "ascii"),
    # Whitespace around a tenant was stripped by accident; it is rejected on purpose now.
    ("tenant trailing newline", good(tenantId="contoso.onmicrosoft.com\n"), "tenantId", "characters"),
    ("tenant trailing space", good(tenantId="contoso.onmicrosoft.com "), "tenantId", "whitespace"),
    ("tenant leading tab", good(tenantId="\tcontoso.onmicrosoft.com"), "tenantId", "characters"),
    ("tenant no-break space", good(tenantId="contoso.onmicrosoft.com\u00a0"), "tenantId", "whitespace"),
    # Invisible and line-breaking characters: Unicode categories Cc, Cf, Zl, Zp (and lone surrogates, Cs).
    ("keyword bidi override", good(filters={"keyword": "invoice\u202etxt.exe"}), "filters.keyword", "characters"),
    ("keyword line separator", good(filters={"keyword": "a\u2028b"}), "filters.keyword", "characters"),
    ("keyword paragraph separator", good(filters={"keyword": "a\u2029"}), "filters.keyword", "characters"),
    ("keyword C1 next line", good(filters={"keyword": "a\u0085b"}), "filters.keyword", "characters"),
    ("keyword zero-width space", good(filters={"keyword": "pass\u200bword"}), "filters.keyword", "characters"),
    ("keyword lone surrogate", good(filters={"keyword": "a\ud800"}), "filters.keyword", "characters"),
    ("object id bidi", good(filters={"objectIds": ["https://x/\u202egpj.exe"]}), "filters.objectIds", "characters"),
    ("object id C1", good(filters={"objectIds": ["a\u0085"]}), "filters.objectIds", "characters"),
    # A separator at the end was stripped away before the pattern check, so the value passed.
    (
        "operation trailing line separator",
        good(filters={"operations": ["New-InboxRule\u2028"]}),
        "filters.operations",
        "characters",
    ),
    ("user id trailing C1", good(filters={"userIds": ["ceo@contoso.com\u0085"]}), "filters.userIds", "characters"),
    (
        "record type with BOM",
        good(filters={"recordTypes": ["\ufeffExchangeItem"]}),
        "filters.recordTypes",
        "characters",
    ),
    (
        "ip with trailing paragraph separator",
        good(filters={"ipAddresses": ["10.0.0.1\u2029"]}),
        "filters.ipAddresses",
        "characters",
    ),
    ("collection id with Kelvin sign", good(collectionId=f"case-{KELVIN}"), "collectionId", "format"),
    ("source with C1", good(source="graph\u0085"), "source", "characters"),
    ("date with line separator", good(endDate="2024-11-18T10:14:59Z\u2028"), "endDate", "characters"),
]


@pytest.mark.parametrize(("case", "body", "field", "rule"), LOOKALIKES, ids=[m[0] for m in LOOKALIKES])
def test_lookalike_and_invisible_characters_are_rejected(case: str, body: Any, field: str, rule: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        validate_collection_request(body, SETTINGS, NOW)
    assert (caught.value.field, caught.value.rule) == (field, rule), (case, caught.value.message)
    assert caught.value.message


def test_ascii_case_is_still_normalised_and_ordinary_spaces_inside_a_keyword_kept() -> None:
    req = validate_collection_request(
        good(tenantId="Contoso.OnMicrosoft.COM", filters={"keyword": "quarterly report\u3000final"}), SETTINGS, NOW
    )
    assert req.tenant_id == "contoso.onmicrosoft.com"
    assert req.filters.keyword == "quarterly report\u3000final"  # an ideographic space (Zs) is a visible gap


def test_an_invisible_character_error_names_the_code_point() -> None:
    with pytest.raises(InvalidRequest) as caught:
        validate_collection_request(good(filters={"keyword": "a\u202eb"}), SETTINGS, NOW)
    assert "U+202E" in caught.value.message


def test_settle_is_asked_per_request_with_a_default_from_settings() -> None:
    assert validate_collection_request(good(), SETTINGS, NOW).settle is False
    assert validate_collection_request(good(settle=True), SETTINGS, NOW).settle is True
    eager = Settings(max_chunks=100, max_concurrency=5, settle_default=True)
    assert validate_collection_request(good(), eager, NOW).settle is True
    assert validate_collection_request(good(settle=False), eager, NOW).settle is False
    with pytest.raises(InvalidRequest) as raised:
        validate_collection_request(good(settle="yes"), SETTINGS, NOW)
    assert (raised.value.field, raised.value.rule) == ("settle", "type")
    assert CollectionRequest.from_json(validate_collection_request(good(settle=True), SETTINGS, NOW).to_json()).settle


def test_the_settle_default_setting_is_read() -> None:
    assert Settings.from_env({"COLLECTOR_SETTLE_DEFAULT": "true"}).settle_default is True
    assert Settings.from_env({}).settle_default is False
