"""Request rules added for the Graph source in issue 17: the service filter."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from shared.settings import Settings
from shared.validation import InvalidRequest, validate_collection_request

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)
SETTINGS = Settings()


def good(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "tenantId": "contoso.onmicrosoft.com",
        "startDate": "2026-11-01T00:00:00Z",
        "endDate": "2026-11-02T00:00:00Z",
    }
    body.update(changes)
    return body


def test_a_service_filter_is_one_service_name() -> None:
    request = validate_collection_request(good(filters={"service": " Exchange "}), SETTINGS, NOW)
    assert request.filters.service == "Exchange"
    assert request.to_json()["filters"] == {"service": "Exchange"}


@pytest.mark.parametrize(
    ("filters", "source", "rule"),
    [
        ({"service": ["Exchange"]}, "graph", "type"),
        ({"service": "Share Point"}, "graph", "characters"),
        ({"service": "Exchange"}, "exchange", "graph_only"),
    ],
)
def test_a_bad_service_filter_is_a_400_naming_it(filters: dict[str, Any], source: str, rule: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        validate_collection_request(good(filters=filters, source=source), SETTINGS, NOW)
    assert (caught.value.field, caught.value.rule) == ("filters.service", rule)
