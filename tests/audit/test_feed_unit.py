"""The feed adapter's pure parts and its HTTP edges over a scripted loopback API: the documented record shape, the
listing rules, next-page and content links kept on the configured host, the AF codes, the cloud's token audience,
its settings, and the window reader over the in-memory fake."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from shared.audit.config import AuditApiConfig
from shared.audit.feed import ActivityFeedClient
from shared.audit.feed_cloud import feed_scope
from shared.audit.feed_errors import FeedSubscriptionError
from shared.audit.feed_paging import listing_pieces, next_page_link
from shared.audit.feed_reading import FeedReadReport, read_published
from shared.audit.feed_records import feed_item
from shared.audit.normalise import page_of
from shared.audit.ports import FeedContent, MalformedRecord, TimeWindow
from shared.errors import ConfigError, PermanentApiError, TransientApiError
from shared.settings import Settings
from tests.audit.scripted_server import FakeTokens, Recorded, Reply, replies, scripted_server
from tests.support.feed_fake import T0, FakeFeedApi, feed_record

TENANT = "41463f53-8812-40f4-890f-865bf6e35190"
HOUR = timedelta(hours=1)

DOCUMENTED_BLOB = [  # the reference's "Retrieve content" sample response, two of its records
    {
        "CreationTime": "2015-06-29T20:03:19",
        "Id": "80c76bd2-9d81-4c57-a97a-accfc3443dca",
        "Operation": "PasswordLogonInitialAuthUsingPassword",
        "OrganizationId": TENANT,
        "RecordType": 9,
        "ResultStatus": "failed",
        "UserKey": "1153977025279851686@contoso.onmicrosoft.com",
        "UserType": 0,
        "Workload": "AzureActiveDirectory",
        "ClientIP": "134.170.188.221",
        "ObjectId": "admin@contoso.onmicrosoft.com",
        "UserId": "admin@contoso.onmicrosoft.com",
    },
    {
        "CreationTime": "2015-06-29T20:04:55",
        "Id": "b567caf0-088e-4c1c-a4ea-633a1e3d66c8",
        "Operation": "Add User.",
        "OrganizationId": TENANT,
        "RecordType": 8,
        "ResultStatus": "success",
        "UserType": 0,
        "Workload": "AzureActiveDirectory",
        "ObjectId": "user001@contoso.onmicrosoft.com",
        "UserId": "admin@contoso.onmicrosoft.com",
    },
]


def descriptor(base: str, n: int, content_type: str = "Audit.Exchange") -> dict[str, str]:
    content_id = f"2024031{n}$audit_exchange"
    return {
        "contentType": content_type,
        "contentId": content_id,
        "contentUri": f"{base}/api/v1.0/{TENANT}/activity/feed/audit/{content_id}",
        "contentCreated": f"2024-03-11T0{n}:00:51.748Z",
        "contentExpiration": f"2024-03-18T0{n}:00:51.748Z",
    }


def client_for(base_url: str, sleeps: list[float] | None = None, **overrides: Any) -> ActivityFeedClient:
    settings: dict[str, Any] = {
        "tenant_id": TENANT,
        "client_id": "app",
        "client_secret": "s",
        "feed_base_url": base_url,
    }
    settings.update(overrides)
    waits = sleeps if sleeps is not None else []
    return ActivityFeedClient(
        AuditApiConfig(**settings),
        tokens=FakeTokens(),
        sleep=waits.append,
        clock=lambda: datetime(2024, 3, 11, 12, tzinfo=UTC),
    )


WINDOW = TimeWindow(datetime(2024, 3, 11, tzinfo=UTC), datetime(2024, 3, 11, 6, tzinfo=UTC))


# -- records ------------------------------------------------------------------------------------------------------


def test_the_documented_blob_is_normalised_like_every_source() -> None:
    page = page_of(DOCUMENTED_BLOB, feed_item)

    assert [r["auditLogRecordType"] for r in page.records] == [
        "azureActiveDirectoryAccountLogon",
        "azureActiveDirectory",
    ]
    first = page.records[0]
    assert first["id"] == "80c76bd2-9d81-4c57-a97a-accfc3443dca"
    assert first["createdDateTime"] == "2015-06-29T20:03:19Z"  # the feed's times carry no zone: UTC
    assert (first["service"], first["userType"], first["clientIp"]) == (
        "AzureActiveDirectory",
        "regular",
        "134.170.188.221",
    )
    assert first["auditData"] == DOCUMENTED_BLOB[0]
    assert page.times == [datetime(2015, 6, 29, 20, 3, 19, tzinfo=UTC), datetime(2015, 6, 29, 20, 4, 55, tzinfo=UTC)]


def test_an_unknown_record_type_keeps_its_number_and_a_broken_record_is_quarantined_whole() -> None:
    unknown = feed_item({**DOCUMENTED_BLOB[1], "RecordType": 9999})
    broken = feed_item({"Id": "x1", "Operation": "Send"})

    assert isinstance(unknown, tuple) and unknown[0]["auditLogRecordType"] == "9999"
    assert isinstance(broken, MalformedRecord)
    assert broken.record_id == "x1" and broken.raw == '{"Id":"x1","Operation":"Send"}'


# -- listing rules ------------------------------------------------------------------------------------------------


def test_a_window_is_listed_in_twelve_hour_pieces_widened_to_whole_seconds() -> None:
    start = datetime(2024, 3, 10, 0, 0, 0, 500_000, tzinfo=UTC)
    pieces = listing_pieces(TimeWindow(start, start + timedelta(hours=30)))

    assert [(p.start.isoformat(), p.end.isoformat()) for p in pieces] == [
        ("2024-03-10T00:00:00+00:00", "2024-03-10T12:00:00+00:00"),
        ("2024-03-10T12:00:00+00:00", "2024-03-11T00:00:00+00:00"),
        ("2024-03-11T00:00:00+00:00", "2024-03-11T06:00:01+00:00"),
    ]


def test_both_next_page_header_spellings_are_read() -> None:
    assert next_page_link({"nextpageuri": "https://a/1"}) == "https://a/1"
    assert next_page_link({"NextPageUrl": " https://a/2 "}) == "https://a/2"
    assert next_page_link({"Content-Type": "application/json"}) is None


@pytest.mark.parametrize(
    ("base", "scope"),
    [
        ("https://manage.office.com", "https://manage.office.com/.default"),
        ("https://manage-gcc.office.com/", "https://manage-gcc.office.com/.default"),
        ("https://manage.office365.us", "https://manage.office365.us/.default"),
        ("https://manage.protection.apps.mil", "https://manage.protection.apps.mil/.default"),
        ("https://127.0.0.1:8443/manage", "https://manage.office.com/.default"),
    ],
)
def test_the_token_audience_follows_the_cloud(base: str, scope: str) -> None:
    assert feed_scope(base) == scope


# -- over a scripted API ------------------------------------------------------------------------------------------


def test_pages_follow_the_header_on_the_configured_host_and_carry_the_publisher_once() -> None:
    def handle(request: Recorded) -> Reply:
        query = parse_qs(urlsplit(request.path).query)
        if "nextPage" not in query:
            query_text = f"nextPage=2&PublisherIdentifier={TENANT}"
            link = f"{server.base_url}/api/v1/{TENANT}/activity/feed/subscriptions/content?{query_text}"
            return Reply(200, [descriptor(server.base_url, 1)], {"NextPageUri": link})
        return Reply(200, [descriptor(server.base_url, 2), descriptor(server.base_url, 1)])

    with scripted_server(handle) as server:
        contents = list(client_for(server.base_url).list_content("Audit.Exchange", WINDOW))

    assert [c.content_id for c in contents] == ["20240311$audit_exchange", "20240312$audit_exchange"]
    assert contents[0].created == datetime(2024, 3, 11, 1, 0, 51, 748_000, tzinfo=UTC)
    first, second = (parse_qs(urlsplit(r.path).query) for r in server.requests)
    assert first == {
        "contentType": ["Audit.Exchange"],
        "startTime": ["2024-03-11T00:00:00"],
        "endTime": ["2024-03-11T06:00:00"],
        "PublisherIdentifier": [TENANT],
    }
    assert second["PublisherIdentifier"] == [TENANT]  # already in the link: not sent twice


def test_a_next_page_or_content_link_to_another_host_is_never_followed() -> None:
    elsewhere = "https://attacker.example/api/v1.0/x/activity/feed/subscriptions/content?nextPage=2"
    with scripted_server(replies(Reply(200, [], {"NextPageUri": elsewhere}))) as server:
        client = client_for(server.base_url)
        with pytest.raises(PermanentApiError, match="points outside"):
            list(client.list_content("Audit.Exchange", WINDOW))
        foreign = FeedContent("Audit.Exchange", "c1", "https://attacker.example/blob", WINDOW.start, WINDOW.end)
        with pytest.raises(PermanentApiError, match="contentUri points outside"):
            client.fetch(foreign)
    assert len(server.requests) == 1


def test_the_same_next_page_twice_is_an_error_not_a_loop() -> None:
    def handle(_: Recorded) -> Reply:
        return Reply(
            200,
            [],
            {"NextPageUri": f"{server.base_url}/api/v1.0/{TENANT}/activity/feed/subscriptions/content?nextPage=9"},
        )

    with scripted_server(handle) as server, pytest.raises(PermanentApiError, match="same next page"):
        list(client_for(server.base_url).list_content("Audit.Exchange", WINDOW))


def test_a_descriptor_without_its_uri_is_refused() -> None:
    broken = {"contentId": "c1", "contentCreated": "2024-03-11T01:00:00Z", "contentExpiration": "2024-03-18T01:00:00Z"}
    with scripted_server(replies(Reply(200, [broken]))) as server, pytest.raises(PermanentApiError, match="contentUri"):
        list(client_for(server.base_url).list_content("Audit.Exchange", WINDOW))


def test_af429_as_a_403_without_retry_after_and_internal_errors_are_retried() -> None:
    throttled = Reply(403, {"error": {"code": "AF429", "message": "Too many requests. Method=GetBlob, PublisherId=x"}})
    internal = Reply(500, {"error": {"code": "AF50000", "message": "An internal error occurred. Retry the request."}})
    sleeps: list[float] = []
    with scripted_server(replies(throttled, internal, Reply(200, DOCUMENTED_BLOB))) as server:
        content = FeedContent(
            "Audit.AzureActiveDirectory", "c1", f"{server.base_url}/blob/c1", WINDOW.start, WINDOW.end
        )
        page = client_for(server.base_url, sleeps).fetch(content)

    assert len(page.records) == 2
    assert len(server.requests) == 3 and len(sleeps) == 2
    assert parse_qs(urlsplit(server.requests[0].path).query) == {"PublisherIdentifier": [TENANT]}


def test_af429_is_throttling_not_a_forbidden_answer_and_gives_up_only_after_every_attempt() -> None:
    throttled = Reply(403, {"error": {"code": "AF429", "message": "Too many requests."}})
    with scripted_server(replies(*[throttled] * 4, Reply(200, []))) as server:
        # a plain 403 is retried at most transient_403_attempts times; AF429 as often as any throttling
        assert client_for(server.base_url, max_attempts=6, transient_403_attempts=1).list_subscriptions() == []
    with scripted_server(replies(throttled)) as server, pytest.raises(TransientApiError):
        client_for(server.base_url, max_attempts=3).list_subscriptions()
    assert len(server.requests) == 3


def test_other_codes_keep_the_http_layer_reading() -> None:
    missing = Reply(400, {"error": {"code": "AF20001", "message": "Missing parameter: contentType."}})
    with scripted_server(replies(missing)) as server, pytest.raises(PermanentApiError, match="AF20001") as raised:
        client_for(server.base_url).list_subscriptions()
    assert not isinstance(raised.value, FeedSubscriptionError)


# -- settings -----------------------------------------------------------------------------------------------------


def test_the_feed_settings_reach_the_adapter_config() -> None:
    publisher = "5b0c1d2e-3f40-4a51-8b62-73c4d5e6f7a8"
    settings = Settings.from_env(
        {"AUDIT_FEED_BASE_URL": "https://manage.office365.us", "AUDIT_FEED_PUBLISHER_ID": publisher}
    )
    config = AuditApiConfig(**{**settings.audit.config_kwargs(TENANT), "client_id": "app", "client_secret": "s"})

    assert (config.feed_root, config.feed_publisher_id) == ("https://manage.office365.us", publisher)
    assert Settings.from_env({}).audit.feed_base_url == "https://manage.office.com"
    with pytest.raises(ConfigError, match="AUDIT_FEED_PUBLISHER_ID"):
        Settings.from_env({"AUDIT_FEED_PUBLISHER_ID": "contoso"})
    with pytest.raises(ConfigError, match="feed_base_url"):
        AuditApiConfig(tenant_id=TENANT, client_id="a", client_secret="s", feed_base_url="http://manage.office.com")


# -- the window reader over the fake ------------------------------------------------------------------------------


def test_the_reader_keeps_each_record_once_across_blobs_and_content_types_and_reports_expired_blobs() -> None:
    api = FakeFeedApi(now=T0 + 2 * HOUR)
    api.ensure_subscriptions(["Audit.Exchange", "Audit.SharePoint"])
    a, b, c = (feed_record(f"r{n}", T0 - HOUR + n * timedelta(minutes=1)) for n in range(3))
    api.publish("Audit.Exchange", T0, [a, b])
    api.publish("Audit.Exchange", T0 + HOUR, [b, c, a])
    api.publish("Audit.SharePoint", T0 + 30 * timedelta(minutes=1), [c])
    gone = api.publish("Audit.SharePoint", T0 - 8 * 24 * HOUR, [feed_record("old", T0 - 9 * 24 * HOUR)])
    api.blobs.append((FeedContent("Audit.SharePoint", "late", "u", T0 + HOUR, T0 + HOUR), [feed_record("x", T0)]))
    report = FeedReadReport()

    batches = list(
        read_published(api, ["Audit.Exchange", "Audit.SharePoint"], TimeWindow(T0 - HOUR, T0 + 2 * HOUR), report=report)
    )

    assert [[r["id"] for r in b.page.records] for b in batches] == [["r0", "r1"], ["r2"], []]
    assert [b.repeats for b in batches] == [0, 2, 1]
    assert all(b.page.times is not None and len(b.page.times) == len(b.page.records) for b in batches)
    assert (report.listed, report.fetched, report.records, report.repeats) == (4, 3, 3, 3)
    assert [c.content_id for c in report.expired] == ["late"] and not report.complete
    assert gone.content_id not in api.fetched  # outside the publication window: never listed
