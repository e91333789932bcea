"""The feed's probes against the emulator's Management Activity API: the token and its ``ActivityFeed.Read``, the
subscriptions (started when missing: the doctor's one change, which a feed collection would make anyway), and the
content of the last two hours, one blob fetched."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from m365_emulator import AppRegistration, Emulator, EmulatorConfig, TenantSpec, run_emulator
from shared.doctor import Outcome, run_doctor
from shared.doctor.feed_probe import FEED_PROBES
from shared.doctor.model import DoctorReport
from tests.doctor.conftest import CLIENT, SECRET, app_env, folder_output

TENANT = "6e8f3d52-9b4c-4a7f-8d2e-3c4b5d6e7f80"
NO_FEED_CLIENT = "4d5e6f7a-8b9c-4dae-9f10-3b4c5d6e7f81"


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def feed_emu() -> Iterator[tuple[Emulator, Clock]]:
    clock = Clock()
    config = EmulatorConfig(tenants=[TenantSpec(TENANT, seed=9, records_per_hour=300.0)])
    with run_emulator(config, clock=clock) as running:
        running.register_app(AppRegistration(TENANT, CLIENT, client_secret=SECRET))
        running.register_app(AppRegistration(TENANT, NO_FEED_CLIENT, client_secret=SECRET, feed_permissions=()))
        yield running, clock


def doctor(emu: Emulator, clock: Clock, out: Path, client: str = CLIENT) -> DoctorReport:
    env = app_env(emu, folder_output(out), AUDIT_CLIENT_ID=client)
    return run_doctor(env, TENANT, "feed", budget_seconds=60, now=clock)


def outcomes(report: DoctorReport) -> dict[str, str]:
    return {r.probe: r.outcome.value for r in report.results}


def test_subscriptions_are_started_once_and_content_is_read_once_the_feed_lists_it(
    feed_emu: tuple[Emulator, Clock], tmp_path: Path
) -> None:
    emu, clock = feed_emu
    first = doctor(emu, clock, tmp_path)
    assert [r.probe for r in first.results] == ["settings", "tenant", "storage", *FEED_PROBES]
    assert first.ok and set(outcomes(first).values()) == {"ok"}
    assert "started now: Audit.AzureActiveDirectory, Audit.Exchange" in first.result("feed.subscriptions").detail
    assert (
        "started now: its first content" in first.result("feed.content").detail
        or "12 hours" in first.result("feed.content").detail
    )
    clock.now += timedelta(hours=3)  # past the first content's delay, with three hours published since the start
    second = doctor(emu, clock, tmp_path)
    assert second.ok and "started now" not in second.result("feed.subscriptions").detail
    content = second.result("feed.content").detail
    assert "blob(s) published in the last 2 hours; the newest fetched holds" in content, content
    assert emu.feed.stats.subscriptions_started[TENANT] == 4


def test_a_missing_activity_feed_read_is_named_with_its_fix(feed_emu: tuple[Emulator, Clock], tmp_path: Path) -> None:
    emu, clock = feed_emu
    report = doctor(emu, clock, tmp_path, client=NO_FEED_CLIENT)
    assert not report.ok
    token = report.result("feed.token")
    assert token.outcome is Outcome.OK and "carries no ActivityFeed.Read" in token.detail
    subscriptions = report.result("feed.subscriptions")
    assert subscriptions.outcome is Outcome.FAILED and "ActivityFeed.Read" in subscriptions.fix
    assert report.result("feed.content").outcome is Outcome.SKIPPED
    tenant = report.result("tenant")
    assert tenant.outcome is Outcome.FAILED and "Office 365 Management APIs ActivityFeed.Read" in tenant.detail
