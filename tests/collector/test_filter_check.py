"""The filter check (pure): what it trims, and everything it must keep because the record cannot tell."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.audit.filter_check import FilterCheck, describe, parse_address
from shared.audit.ports import AuditFilters


def record(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "r1",
        "createdDateTime": "2024-06-03T00:00:01Z",
        "auditLogRecordType": "exchangeItem",
        "operation": "Send",
        "userPrincipalName": "Adele.Vance@contoso.com",
        "userId": "Adele.Vance@contoso.com",
        "clientIp": "203.0.113.7",
        "objectId": "https://contoso.sharepoint.com/sites/Finance/Shared Documents/Budget.xlsx",
        "service": "Exchange",
        "auditData": {"UserId": "Adele.Vance@contoso.com"},
    }
    base.update(fields)
    return base


def check(**filters: Any) -> FilterCheck:
    found = FilterCheck.of(AuditFilters(**filters))
    assert found is not None
    return found


def test_no_checkable_filter_means_no_check() -> None:
    assert FilterCheck.of(AuditFilters()) is None
    assert FilterCheck.of(AuditFilters(keyword="budget")) is None  # a keyword cannot be judged from the record


@pytest.mark.parametrize(
    ("filters", "kept", "trimmed"),
    [
        ({"record_types": ("ExchangeItem",)}, {}, {"auditLogRecordType": "sharePointFileOperation"}),
        ({"operations": ("send", "FileAccessed")}, {"operation": "SEND"}, {"operation": "MailItemsAccessed"}),
        ({"user_principal_names": ("adele.vance@contoso.com",)}, {}, {
            "userPrincipalName": "megan@contoso.com", "userId": "megan@contoso.com", "auditData": {}}),
        ({"service": "exchange"}, {}, {"service": "SharePoint"}),
        ({"ip_addresses": ("203.0.113.7",)}, {"clientIp": "203.0.113.7:51234"}, {"clientIp": "198.51.100.2"}),
        ({"ip_addresses": ("2001:db8::1",)}, {"clientIp": "[2001:DB8::1]:443"}, {"clientIp": "2001:db8::2"}),
        ({"ip_addresses": ("203.0.113.7",)}, {"clientIp": "::ffff:203.0.113.7"}, {"clientIp": "::ffff:203.0.113.8"}),
        ({"object_ids": ("Budget.xlsx",)}, {}, {"objectId": "https://contoso.sharepoint.com/Notes.txt"}),
        ({"object_ids": ("https://contoso.sharepoint.com/sites/finance/*",)}, {}, {"objectId": "https://x/sites/Legal/a"}),
    ],
)  # fmt: skip
def test_each_checkable_filter_trims_what_cannot_match_and_keeps_what_can(
    filters: dict[str, Any], kept: dict[str, Any], trimmed: dict[str, Any]
) -> None:
    verify = check(**filters)
    assert verify.keeps(record(**kept))
    assert not verify.keeps(record(**trimmed))


def test_a_field_the_record_lacks_cannot_be_judged_so_the_record_is_kept() -> None:
    everything = check(
        record_types=("exchangeItem",), operations=("Send",), user_principal_names=("x@y",), service="Exchange",
        ip_addresses=("192.0.2.1",), object_ids=("thing",),
    )  # fmt: skip
    bare = {"id": "r2", "createdDateTime": "2024-06-03T00:00:01Z", "auditData": {}}
    assert everything.keeps(bare)
    assert everything.keeps(record(clientIp="not an address", auditData={}, userPrincipalName=None, userId=None,
                                   objectId=None, operation=None, auditLogRecordType=None, service=None))  # fmt: skip


def test_any_user_field_or_address_field_may_carry_the_match() -> None:
    verify = check(user_principal_names=("svc@contoso.com",), ip_addresses=("192.0.2.1",))
    data = {"UserId": "SVC@contoso.com", "ActorIpAddress": "192.0.2.1"}
    assert verify.keeps(record(userPrincipalName="", userId="", clientIp=None, auditData=data))


def test_filters_combine_with_and_values_with_or() -> None:
    verify = check(operations=("Send", "FileAccessed"), service="Exchange")
    assert verify.keeps(record(operation="Send", service="Exchange"))
    assert not verify.keeps(record(operation="Send", service="SharePoint"))
    assert not verify.keeps(record(operation="MailItemsAccessed", service="Exchange"))


def test_the_manifest_names_checked_and_trusted_filters() -> None:
    filters = AuditFilters(operations=("Send",), keyword="budget", service="Exchange")
    assert describe(FilterCheck.of(filters), filters) == {"checked": ["operations", "service"], "trusted": ["keyword"]}
    assert describe(None, AuditFilters()) == {"checked": [], "trusted": []}


@pytest.mark.parametrize(
    ("text", "address"),
    [("203.0.113.7", "203.0.113.7"), ("203.0.113.7:80", "203.0.113.7"), ("[::1]:8080", "::1"), ("::1", "::1"),
     ("", None), ("somewhere", None)],
)  # fmt: skip
def test_record_addresses_are_read_with_or_without_a_port(text: str, address: str | None) -> None:
    parsed = parse_address(text)
    assert (str(parsed) if parsed is not None else None) == address


FIELD_VALUES = (
    st.none()
    | st.integers(0, 3)
    | st.sampled_from(
        ["Send", "send ", "exchangeItem", "Adele.Vance@contoso.com", "203.0.113.7:443", "[2001:db8::1]:443", "x", ""]
    )
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "auditLogRecordType",
                "operation",
                "userPrincipalName",
                "userId",
                "service",
                "clientIp",
                "objectId",
                "id",
                "other",
            ]
        ),
        FIELD_VALUES,
    ),
    st.none()
    | st.just("a string")
    | st.dictionaries(
        st.sampled_from(["UserId", "ClientIP", "ClientIPAddress", "ActorIpAddress", "ObjectId", "Other"]), FIELD_VALUES
    ),
)
def test_a_record_kept_as_bytes_is_judged_as_its_decoded_value_is(fields: dict[str, Any], data: Any) -> None:
    """``keeps_item`` reads only the fields the check needs from the record's JSON bytes, with the same verdict."""
    value = {**fields, **({"auditData": data} if data is not None else {})}
    line = json.dumps(value).encode()
    for filters in (
        {"operations": ("send",)},
        {"user_principal_names": ("adele.vance@contoso.com",), "service": "Exchange"},
        {"ip_addresses": ("203.0.113.7", "2001:db8::1")},
        {"object_ids": ("x*",), "record_types": ("ExchangeItem",)},
    ):
        found = check(**filters)
        assert found.keeps_item(line) == found.keeps(value)
