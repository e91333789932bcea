"""The feed adapter's tests against the emulator: an emulator on a moved clock and adapters signed in with msal."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from durable_local.clock import ManualClock
from m365_emulator import AppRegistration, Emulator, EmulatorConfig, TenantSpec, run_emulator
from shared.audit.config import AuditApiConfig
from shared.audit.feed import ActivityFeedClient
from tests.audit.conftest import CLIENT_ID, DOMAIN, SECRET, TENANT

NOW = datetime(2024, 3, 11, 12, tzinfo=UTC)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
AUDIT_TYPES = ("Audit.AzureActiveDirectory", "Audit.Exchange", "Audit.SharePoint", "Audit.General")


@dataclass
class FeedEmu:
    emu: Emulator
    clock: ManualClock

    def config(self, **overrides: Any) -> AuditApiConfig:
        settings: dict[str, Any] = {
            "tenant_id": TENANT,
            "client_id": CLIENT_ID,
            "client_secret": SECRET,
            "authority_host": self.emu.authority_host,
            "feed_base_url": self.emu.feed_base_url,
            "ca_bundle": self.emu.ca_bundle,
            "http_timeout_seconds": 20.0,
            "max_attempts": 8,
        }
        settings.update(overrides)
        return AuditApiConfig(**settings)

    def client(self, *, retry_wait_scale: float = 0.001, **overrides: Any) -> ActivityFeedClient:
        """An adapter whose "now" is the emulator's; its retry waits scaled down (a Retry-After of 1 s: 1 ms)."""
        return ActivityFeedClient(self.config(**overrides), clock=self.clock.now, retry_wait_scale=retry_wait_scale)


@contextmanager
def feed_emulator(*, app: dict[str, Any] | None = None, **feed: Any) -> Iterator[FeedEmu]:
    """An emulator at ``NOW`` (``list_page_size=3`` style keywords set ``config.feed`` knobs)."""
    clock = ManualClock(NOW)
    config = EmulatorConfig(tenants=[TenantSpec(tenant_id=TENANT, domain=DOMAIN, seed=7, records_per_hour=240.0)])
    for name, value in feed.items():
        setattr(config.feed, name, value)
    with run_emulator(config, clock=clock.now) as emu:
        emu.register_app(AppRegistration(TENANT, CLIENT_ID, client_secret=SECRET, **(app or {})))
        yield FeedEmu(emu, clock)
