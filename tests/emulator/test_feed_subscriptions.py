"""The Management Activity API's subscriptions, tenant and permission checks (the emulator's contract).

Content is listed and fetched only under an enabled subscription of its content type; the token must carry
``ActivityFeed.Read`` and the path must name the token's tenant by its GUID.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from m365_emulator import EmulatorConfig
from tests.emulator.feed_helpers import HOUR, NOW, PUBLISHER, Feed, error_code, feed_emulator
from tests.emulator.helpers import GRAPH_SCOPE, TENANT, session_for


@pytest.fixture
def feed() -> Iterator[Feed]:
    with feed_emulator(feed__first_content_delay_seconds=0.0) as running:
        yield running


def test_listing_without_a_subscription_is_af20022(feed: Feed) -> None:
    answer = feed.listing("Audit.Exchange", NOW - HOUR, NOW)

    assert answer.status_code == 400
    assert error_code(answer) == "AF20022"
    assert answer.json()["error"]["message"] == "No subscription found for the specified content type."


def test_start_list_stop_and_start_again(feed: Feed) -> None:
    started = feed.start("Audit.SharePoint")
    assert started.status_code == 200
    assert started.json() == {"contentType": "Audit.SharePoint", "status": "enabled", "webhook": None}
    assert feed.call("GET", "subscriptions/list").json() == [
        {"contentType": "Audit.SharePoint", "status": "enabled", "webhook": None}
    ]
    assert feed.listing("Audit.SharePoint", NOW - HOUR, NOW).status_code == 200

    assert feed.call("POST", "subscriptions/stop", contentType="Audit.SharePoint").status_code == 200
    stopped = feed.listing("Audit.SharePoint", NOW - HOUR, NOW)
    assert (stopped.status_code, error_code(stopped)) == (400, "AF20023")
    assert feed.call("GET", "subscriptions/list").json()[0]["status"] == "disabled"

    too_soon = feed.start("Audit.SharePoint")
    assert (too_soon.status_code, error_code(too_soon)) == (403, "AF429")  # 15 minutes between starts
    feed.clock.advance(timedelta(minutes=15))
    assert feed.start("Audit.SharePoint").status_code == 200  # a disabled subscription starts again
    assert feed.listing("Audit.SharePoint", NOW - HOUR, NOW).status_code == 200


def test_starting_an_enabled_subscription_is_af20024_unless_the_knob_says_otherwise(feed: Feed) -> None:
    assert feed.start().status_code == 200

    again = feed.start()
    assert (again.status_code, error_code(again)) == (400, "AF20024")
    assert feed.emu.feed.stats.subscriptions_started[TENANT] == 1

    feed.emu.config.feed.restart_conflict = False
    feed.clock.advance(timedelta(minutes=15))
    assert feed.start().status_code == 200


def test_an_unknown_content_type_is_af20020(feed: Feed) -> None:
    for answer in (feed.start("Audit.Teams"), feed.listing("Audit.Teams", NOW - HOUR, NOW)):
        assert (answer.status_code, error_code(answer)) == (400, "AF20020")


def test_a_subscription_disabled_by_an_admin_refuses_listing_and_blobs(feed: Feed) -> None:
    feed.start()
    feed.clock.advance(3 * HOUR)
    blob = feed.list_all("Audit.Exchange", NOW, NOW + 3 * HOUR)[0]
    feed.emu.feed.disable_subscription(TENANT, "Audit.Exchange")

    for answer in (feed.listing("Audit.Exchange", NOW, NOW + HOUR), feed.fetch(blob)):
        assert (answer.status_code, error_code(answer)) == (400, "AF20023")
        assert "a service admin" in answer.json()["error"]["message"]


def test_a_token_without_activityfeed_read_is_af10001_401_by_default_403_by_knob() -> None:
    with feed_emulator(feed_permissions=()) as feed:
        answer = feed.start()
        assert (answer.status_code, error_code(answer)) == (401, "AF10001")
        assert "ActivityFeed.Read" in answer.json()["error"]["message"]

        feed.emu.config.feed.permission_status = 403
        assert feed.listing("Audit.Exchange", NOW - HOUR, NOW).status_code == 403
        assert feed.emu.feed.subscription(TENANT, "Audit.Exchange") is None  # nothing was started


def test_a_token_for_another_api_is_refused(feed: Feed) -> None:
    graph_token = session_for(feed.emu, GRAPH_SCOPE)

    answer = graph_token.post(f"{feed.root}/subscriptions/start", params={"contentType": "Audit.Exchange"})

    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "InvalidAuthenticationToken"


def test_the_path_names_the_token_tenant_by_its_guid(feed: Feed) -> None:
    by_domain = feed.session.get(
        f"{feed.emu.feed_base_url}/api/v1.0/contoso.onmicrosoft.com/activity/feed/subscriptions/list"
    )
    other = "0f0e0d0c-0b0a-4909-8807-060504030201"
    another_tenant = feed.session.get(f"{feed.emu.feed_base_url}/api/v1.0/{other}/activity/feed/subscriptions/list")

    assert (by_domain.status_code, error_code(by_domain)) == (400, "AF20013")
    assert (another_tenant.status_code, error_code(another_tenant)) == (401, "AF20010")


def test_a_publisher_identifier_that_is_not_a_guid_is_af20002(feed: Feed) -> None:
    answer = feed.call("GET", "subscriptions/list", publisher="contoso")

    assert (answer.status_code, error_code(answer)) == (400, "AF20002")
    assert feed.call("GET", "subscriptions/list", publisher=PUBLISHER).status_code == 200


def test_the_start_cooldown_is_per_content_type_and_a_knob(feed: Feed) -> None:
    assert [feed.start(kind).status_code for kind in ("Audit.Exchange", "Audit.General", "DLP.All")] == [200] * 3
    feed.call("POST", "subscriptions/stop", contentType="Audit.Exchange")

    feed.emu.config.feed.start_cooldown_seconds = 0.0
    assert feed.start("Audit.Exchange").status_code == 200


def test_the_json_config_sets_the_feed_knobs_and_an_app_s_feed_roles() -> None:
    config = EmulatorConfig.from_json(
        {
            "tenants": [{"tenant_id": TENANT}],
            "apps": [{"tenant_id": TENANT, "client_id": "c", "client_secret": "s", "feed_permissions": []}],
            "feed": {"list_page_size": 3, "throttle_status": 429},
        }
    )

    assert (config.feed.list_page_size, config.feed.throttle_status) == (3, 429)
    assert config.apps[0].feed_permissions == ()
    with pytest.raises(ValueError, match="throttle_status"):
        EmulatorConfig.from_json({"feed": {"throttle_status": 500}})
