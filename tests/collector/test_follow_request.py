"""``POST /api/follows`` bodies follow a collection's rules wherever a field is the same, the source's filters too."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from http_api.follow_request import validate_follow_request
from shared.requests.validation import InvalidRequest
from shared.settings import Settings
from shared.sources.registry import validate_collection_request

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)
TENANT = "contoso.onmicrosoft.com"


@pytest.mark.parametrize(
    ("filters", "field", "rule"),
    [
        ({"service": "Exchange"}, "filters.service", "graph_only"),
        ({"recordTypes": ["ExchangeAdmin", "SharePoint"]}, "filters.recordTypes", "single_value"),
    ],
)
def test_an_exchange_follower_refuses_the_filters_an_exchange_collection_refuses(
    filters: dict[str, object], field: str, rule: str
) -> None:
    settings = Settings.from_env({})
    collection = {"tenantId": TENANT, "source": "exchange", "filters": filters,
                  "startDate": "2026-12-01T00:00:00Z", "endDate": "2026-12-02T00:00:00Z"}  # fmt: skip
    with pytest.raises(InvalidRequest) as refused_collection:
        validate_collection_request(collection, settings, NOW)
    with pytest.raises(InvalidRequest) as refused_follow:
        validate_follow_request({"tenantId": TENANT, "source": "exchange", "filters": filters}, settings, NOW)
    assert (refused_follow.value.field, refused_follow.value.rule) == (field, rule)
    assert (refused_collection.value.field, refused_collection.value.rule) == (field, rule)


def test_a_graph_follower_keeps_its_service_filter() -> None:
    follow = validate_follow_request(
        {"tenantId": TENANT, "source": "graph", "filters": {"service": "Exchange"}}, Settings.from_env({}), NOW
    )
    assert follow.filters.service == "Exchange"
