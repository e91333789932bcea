"""``shared.clock.utc_now``: the wall clock, or the moved clock a local test shares with the host and emulator."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from shared.clock import utc_now
from shared.errors import ConfigError
from shared.settings import Settings


def test_without_a_clock_file_it_is_the_wall_clock() -> None:
    now = utc_now(Settings.from_env({}))
    assert abs((now - datetime.now(UTC)).total_seconds()) < 5


def test_a_clock_file_moves_the_apps_now(tmp_path: Path) -> None:
    clock = tmp_path / "clock"
    clock.write_text("86400.0")  # the format durable_local.clock.write_offset writes
    settings = Settings.from_env({"COLLECTOR_CLOCK_FILE": str(clock)})
    moved = utc_now(settings)
    assert timedelta(days=1) - timedelta(seconds=5) < moved - datetime.now(UTC) < timedelta(days=1, seconds=5)


def test_the_clock_file_is_refused_on_azure(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        Settings.from_env({"COLLECTOR_CLOCK_FILE": str(tmp_path / "clock"), "WEBSITE_INSTANCE_ID": "abc"})
    assert raised.value.setting == "COLLECTOR_CLOCK_FILE"
