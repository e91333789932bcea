"""Request rules added for the Graph source in issue 17: the service filter."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from shared.requests.validation import InvalidRequest
from shared.settings import Settings
from shared.sources.registry import validate_collection_request

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


# -- plan size (issue 17, item 5): a month of Graph is tens of queries, not hundreds --------------------------------
def test_a_graph_request_without_an_interval_plans_a_query_a_day() -> None:
    month = good(startDate="2026-11-01T00:00:00Z", endDate="2026-12-01T00:00:00Z")
    request = validate_collection_request(month, SETTINGS, NOW)
    assert (request.interval_minutes, request.chunk_count, request.interval_defaulted) == (1440, 30, True)
    exchange = validate_collection_request({**month, "source": "exchange"}, SETTINGS, NOW)
    assert (exchange.interval_minutes, exchange.chunk_count) == (60, 720)  # Exchange keeps an hour per chunk
    chosen = validate_collection_request({**month, "intervalMinutes": 60}, SETTINGS, NOW)
    assert (chosen.chunk_count, chosen.interval_defaulted) == (720, False)  # the user's choice stays theirs


def test_the_default_interval_stays_within_the_configured_bounds() -> None:
    narrow = Settings(max_interval_minutes=720, graph_default_interval_minutes=1440)
    assert validate_collection_request(good(), narrow, NOW).interval_minutes == 720


# -- retention (issue 17, item 6): older than 180 days is legitimate for some tenants -------------------------------
def test_a_start_300_days_back_is_accepted_and_ten_years_is_the_hard_limit() -> None:
    request = validate_collection_request(good(startDate="2026-02-07T00:00:00Z", endDate="2026-02-08T00:00:00Z"),
                                          SETTINGS, NOW)  # fmt: skip
    assert request.chunk_count == 1
    with pytest.raises(InvalidRequest) as caught:
        validate_collection_request(good(startDate="2016-11-01T00:00:00Z", endDate="2016-11-02T00:00:00Z"), SETTINGS,
                                    NOW)  # fmt: skip
    assert (caught.value.field, caught.value.rule) == ("startDate", "retention")
    assert "COLLECTOR_MAX_LOOKBACK_DAYS" in caught.value.message
