"""What the Management Activity API tests share: an emulator on a moved clock, an authenticated session, calls."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import requests

from durable_local.clock import ManualClock
from m365_emulator import AppRegistration, Emulator, run_emulator
from tests.emulator.helpers import CLIENT, SECRET, TENANT, make_config, session_for

MANAGE_SCOPE = "https://manage.office.com/.default"
NOW = datetime(2024, 5, 8, 12, tzinfo=UTC)
"""The emulator's "now" when a test starts: the synthetic tenant has records on every day before it."""
PUBLISHER = "5b0c1d2e-3f40-4a51-8b62-73c4d5e6f7a8"
HOUR = timedelta(hours=1)


def stamp(moment: datetime) -> str:
    """A listing bound in one of the documented forms (``YYYY-MM-DDTHH:MM:SS``, UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


@dataclass
class Feed:
    """An emulator with a clock the test moves, and a session holding a Management API token."""

    emu: Emulator
    clock: ManualClock
    session: requests.Session

    @property
    def root(self) -> str:
        return f"{self.emu.feed_base_url}/api/v1.0/{TENANT}/activity/feed"

    def call(self, method: str, operation: str, *, publisher: str | None = PUBLISHER, **params: str) -> Any:
        query = dict(params)
        if publisher is not None:
            query["PublisherIdentifier"] = publisher
        return self.session.request(method, f"{self.root}/{operation}", params=query)

    def start(self, content_type: str = "Audit.Exchange") -> requests.Response:
        return self.call("POST", "subscriptions/start", contentType=content_type)

    def listing(self, content_type: str, start: datetime, end: datetime) -> requests.Response:
        return self.call("GET", "subscriptions/content", contentType=content_type, startTime=stamp(start),
                         endTime=stamp(end))  # fmt: skip

    def list_all(self, content_type: str, start: datetime, end: datetime) -> list[dict[str, Any]]:
        """Every descriptor of the window, following the next-page header; asserts each page succeeds."""
        response = self.listing(content_type, start, end)
        found: list[dict[str, Any]] = []
        while True:
            assert response.status_code == 200, response.text
            found.extend(response.json())
            link = response.headers.get("NextPageUri")
            if link is None:
                return found
            response = self.session.get(link, params={"PublisherIdentifier": PUBLISHER})

    def fetch(self, descriptor: dict[str, Any]) -> requests.Response:
        return self.session.get(descriptor["contentUri"], params={"PublisherIdentifier": PUBLISHER})


@contextmanager
def feed_emulator(*, feed_permissions: tuple[str, ...] | None = None, **settings: Any) -> Iterator[Feed]:
    """An emulator whose clock stands at ``NOW`` (``feed__list_page_size=5`` style keywords set knobs)."""
    clock = ManualClock(NOW)
    with run_emulator(make_config(**settings), clock=clock.now) as emu:
        extra = {} if feed_permissions is None else {"feed_permissions": feed_permissions}
        emu.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET, **extra))
        yield Feed(emu, clock, session_for(emu, MANAGE_SCOPE))


def error_code(response: requests.Response) -> str:
    return str(response.json()["error"]["code"])
