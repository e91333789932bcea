"""The filter check's rules a hand mutation showed no other test held (docs/testing.md, "Mutation"): casefolding on
both sides, the ``userId`` field on its own, and the names the manifest gives the checked filters."""

from __future__ import annotations

from typing import Any

import pytest

from shared.audit.filter_check import FilterCheck, describe
from shared.audit.ports import AuditFilters
from tests.collector.test_filter_check import check, record


def users(name: str) -> dict[str, Any]:
    return {"userPrincipalName": name, "userId": name, "auditData": {"UserId": name}}


@pytest.mark.parametrize(
    ("wanted", "seen"),
    [("straße@contoso.com", "STRASSE@contoso.com"), ("STRASSE@contoso.com", "Straße@contoso.com")],
)
def test_texts_compare_casefolded_on_both_sides_not_just_lowered(wanted: str, seen: str) -> None:
    """``casefold`` makes ``ß`` and ``ss`` one text, ``lower`` does not: such a record is kept whichever side has
    which spelling (a record is trimmed only when it cannot match)."""
    assert check(user_principal_names=(wanted,)).keeps(record(**users(seen)))
    assert check(operations=("Maßnahme",)).keeps(record(operation="MASSNAHME"))
    assert not check(user_principal_names=(wanted,)).keeps(record(**users("strasser@contoso.com")))


def test_a_record_carrying_only_user_id_is_judged_by_it() -> None:
    verify = check(user_principal_names=("adele.vance@contoso.com",))
    only_user_id = {"userPrincipalName": None, "userId": "megan@contoso.com", "auditData": {}}
    assert not verify.keeps(record(**only_user_id))
    assert verify.keeps(record(**{**only_user_id, "userId": "ADELE.VANCE@contoso.com"}))


def test_the_manifest_names_the_user_filter_as_the_request_spells_it() -> None:
    filters = AuditFilters(user_principal_names=("adele.vance@contoso.com",), ip_addresses=("192.0.2.1",))
    assert describe(FilterCheck.of(filters), filters)["checked"] == ["userIds", "ipAddresses"]
