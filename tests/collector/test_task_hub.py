"""The task hub's name comes from the TASKHUB_NAME app setting (two apps or slots on one storage account need two
names), with the same default wherever the collector is started locally."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from durable_local.host.config import hub_name_of, load_host_json
from shared.errors import ConfigError
from shared.settings import DEFAULT_TASK_HUB, TASK_HUB_SETTING, Settings

REPO = Path(__file__).resolve().parents[2]


def test_host_json_takes_the_hub_name_from_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, host.json fixed "UalCollector": every app on one storage account shared one task hub."""
    monkeypatch.setenv("TASKHUB_NAME", "UalCollectorStaging")
    assert hub_name_of(load_host_json(REPO), os.environ) == "UalCollectorStaging"
    assert json.loads((REPO / "host.json").read_text())["extensions"]["durableTask"]["hubName"] == "%TASKHUB_NAME%"


def test_every_local_start_sets_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local host resolves %TASKHUB_NAME% from the environment or local.settings.json: run-local sets it, and the
    example settings a developer copies carry it."""
    from collector_local.run import _app_environment

    emu = SimpleNamespace(
        authority_host="https://a", graph_base_url="https://g", exchange_base_url="https://e", feed_base_url="https://f"
    )
    emu.ca_bundle = "ca.pem"
    assert _app_environment(emu, "secret", Path("out"))[TASK_HUB_SETTING] == DEFAULT_TASK_HUB
    example = json.loads((REPO / "local.settings.json.example").read_text())["Values"]
    assert example[TASK_HUB_SETTING] == DEFAULT_TASK_HUB
    monkeypatch.setenv(TASK_HUB_SETTING, example[TASK_HUB_SETTING])
    assert hub_name_of(load_host_json(REPO), os.environ) == DEFAULT_TASK_HUB


@pytest.mark.parametrize("name", ["ab", "1abc", "ual-collector", "a" * 46, "ual_collector"])
def test_a_name_the_storage_provider_refuses_is_a_config_error(name: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Settings.from_env({TASK_HUB_SETTING: name})
    assert raised.value.setting == TASK_HUB_SETTING and "letter" in raised.value.rule


def test_the_default_and_a_valid_name() -> None:
    assert Settings.from_env({}).task_hub == DEFAULT_TASK_HUB == "UalCollector"
    assert Settings.from_env({TASK_HUB_SETTING: "UalCollector2"}).task_hub == "UalCollector2"
