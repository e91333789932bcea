"""Configuration the Functions host and the Durable extension refuse is refused here, with their messages.

Sources: azure-functions-host ``HostJsonFileConfigurationSource.InitializeHostConfig`` (the ``version`` property);
azure-functions-durable-extension ``AzureStorageOptions.ValidateHubName``/``IsSanitizedHubName``,
``DurableTaskOptions.HubName``/``ResolveAppSettingOptions``/``Validate``, and
``DurableTaskExtension.GetDurabilityProviderFactory`` (``storageProvider.type``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from durable_local.host.config import HostConfigError, hub_name_of, load_host_json
from durable_local.host.host import LocalHost

from .conftest import APPS


def _host_json(folder: Path, content: Any) -> Path:
    (folder / "host.json").write_text(content if isinstance(content, str) else json.dumps(content))
    return folder


def _durable(folder: Path, **durable: Any) -> Path:
    return _host_json(folder, {"version": "2.0", "extensions": {"durableTask": durable}})


def test_host_json_needs_version_2_0(tmp_path: Path) -> None:
    missing = "The host.json file is missing the required 'version' property. See https://aka.ms/functions-hostjson "
    with pytest.raises(HostConfigError, match=missing.replace(".", r"\.")):
        load_host_json(_host_json(tmp_path, {"extensions": {}}))
    with pytest.raises(HostConfigError) as wrong:
        load_host_json(_host_json(tmp_path, {"version": "1.0"}))
    assert str(wrong.value).endswith(
        "'1.0' is an invalid value for host.json 'version' property. We recommend you set the 'version' property to "
        "'2.0'. See https://aka.ms/functions-hostjson for more information on this configuration file."
    )
    with pytest.raises(HostConfigError, match="This does not correspond to the function runtime version"):
        load_host_json(_host_json(tmp_path, {"version": "3.0"}))
    # No file, or an empty object: the host uses (and writes) {"version": "2.0"}.
    assert load_host_json(_host_json(tmp_path, "{}")).hub_name_setting is None
    (tmp_path / "host.json").unlink()
    assert load_host_json(tmp_path).route_prefix == "api"


@pytest.mark.parametrize("name", ["ab", "1abc", "my-hub", "my_hub", "hüb1", "a" * 51, "%TASKHUB_NAME%"])
def test_hub_names_the_storage_service_rejects_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.delenv("TASKHUB_NAME", raising=False)
    settings = load_host_json(_durable(tmp_path, hubName=name))
    with pytest.raises(HostConfigError) as refused:
        hub_name_of(settings, {})
    assert str(refused.value).endswith(
        f"Task hub name '{name}' should contain only alphanumeric characters, start with a letter, and have length "
        "between 3 and 45."
    )


@pytest.mark.parametrize("name", ["abc", "Hub1", "a" * 50])
def test_valid_hub_names_are_kept(tmp_path: Path, name: str) -> None:
    # ValidateHubName's own limit is 50 characters (its message says 45).
    assert hub_name_of(load_host_json(_durable(tmp_path, hubName=name)), {}) == name


def test_a_setting_reference_is_resolved_and_an_unresolved_one_is_refused(tmp_path: Path) -> None:
    settings = load_host_json(_durable(tmp_path, hubName="%TASKHUB_NAME%"))
    assert hub_name_of(settings, {"TASKHUB_NAME": "FromSetting"}) == "FromSetting"
    with pytest.raises(HostConfigError, match="Task hub name '%TASKHUB_NAME%' should contain only alphanumeric"):
        hub_name_of(settings, {})
    with pytest.raises(HostConfigError, match=r"A non-empty HubName configuration is required\."):
        hub_name_of(settings, {"TASKHUB_NAME": ""})


def test_the_default_hub_name_is_the_sanitized_site_name(tmp_path: Path) -> None:
    settings = load_host_json(_durable(tmp_path))
    assert hub_name_of(settings, {}) == "TestHubName"
    assert hub_name_of(settings, {"WEBSITE_SITE_NAME": "my-func-app"}) == "myfuncapp"
    assert hub_name_of(settings, {"WEBSITE_SITE_NAME": "9lives"}) == "t9lives"
    assert hub_name_of(settings, {"WEBSITE_SITE_NAME": "a-"}) == "aHub"
    assert hub_name_of(settings, {"WEBSITE_SITE_NAME": "---"}) == "DefaultTaskHub"
    assert hub_name_of(settings, {"WEBSITE_SITE_NAME": "x" * 60}) == "x" * 45


@pytest.mark.parametrize("kind", ["mssql", "Netherite", "azureManaged", 3])
def test_a_storage_provider_other_than_azure_storage_is_refused(tmp_path: Path, kind: object) -> None:
    with pytest.raises(HostConfigError) as refused:
        load_host_json(_durable(tmp_path, storageProvider={"type": kind}))
    message = str(refused.value)
    assert f"Storage provider type ({kind}) was not found. Available storage providers: AzureStorage." in message
    assert "not supported by the local host" in message
    assert load_host_json(_durable(tmp_path, storageProvider={"type": "azurestorage"})).partition_count == 4


def test_the_host_refuses_to_start_with_a_bad_hub_name(tmp_path: Path) -> None:
    (tmp_path / "function_app.py").write_text((APPS / "basic" / "function_app.py").read_text())
    _durable(tmp_path, hubName="ab")
    host = LocalHost(tmp_path, port=0, store="memory")
    with pytest.raises(HostConfigError, match="Task hub name 'ab'"):
        host.start()
    with pytest.raises(HostConfigError, match="Task hub name '1abc'"):
        LocalHost(APPS / "basic", port=0, store="memory", hub_name="1abc").start()
