"""Where the app runs, told by the rules the Functions host itself uses (azure-functions-host's
``EnvironmentExtensions``), and what follows: on every Azure plan an output setting is required."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.errors import ConfigError
from shared.hosting import platform as hosting
from shared.settings import Settings
from shared.sinks import build_sink

# What each plan's instances carry, as the host's rules read them (docs/deploy.md, "How the app knows it is on
# Azure"). Values are made up; only presence and the SKU names matter.
PLATFORMS: dict[str, dict[str, str]] = {
    "flex_consumption": {
        "WEBSITE_SKU": "FlexConsumption",
        "WEBSITE_POD_NAME": "pod-1",
        "LEGION_SERVICE_HOST": "10.0.0.1",
    },
    "flex_consumption_placeholder": {"CONTAINER_NAME": "c-1", "LEGION_SERVICE_HOST": "10.0.0.1"},
    "flex_consumption_sku_only": {"WEBSITE_SKU": "flexconsumption"},
    "linux_consumption": {"CONTAINER_NAME": "c-1", "WEBSITE_SKU": "Dynamic"},
    "linux_consumption_no_sku": {"CONTAINER_NAME": "c-1"},
    "windows_consumption": {"WEBSITE_INSTANCE_ID": "abc", "WEBSITE_SKU": "Dynamic"},
    "premium_windows": {"WEBSITE_INSTANCE_ID": "abc", "WEBSITE_SKU": "ElasticPremium"},
    "premium_linux": {
        "WEBSITE_INSTANCE_ID": "abc",
        "WEBSITE_SKU": "ElasticPremium",
        "FUNCTIONS_LOGS_MOUNT_PATH": "/var/log",
    },
    "dedicated_windows": {"WEBSITE_INSTANCE_ID": "abc", "WEBSITE_SKU": "Standard"},
    "dedicated_linux": {
        "WEBSITE_INSTANCE_ID": "abc",
        "WEBSITE_SKU": "PremiumV3",
        "FUNCTIONS_LOGS_MOUNT_PATH": "/var/log",
    },
    "container_apps": {"MANAGED_ENVIRONMENT": "true", "CONTAINER_NAME": "c-1"},
    "kubernetes": {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "POD_NAMESPACE": "functions"},
}


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_on_every_azure_plan_a_missing_output_setting_is_a_config_error(
    platform: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, only WEBSITE_INSTANCE_ID counted: on Flex and Linux Consumption (where the host treats it as absent)
    the collector wrote into ./output, the app's own disk, which the next deployment or scale-in loses."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as raised:
        build_sink(Settings.from_env(PLATFORMS[platform]))
    assert raised.value.setting == "OUTPUT_STORAGE_ACCOUNT_URL"
    assert not (tmp_path / "output").exists()


EXPECTED = {
    "flex_consumption": hosting.FLEX_CONSUMPTION,
    "flex_consumption_placeholder": hosting.FLEX_CONSUMPTION,
    "flex_consumption_sku_only": hosting.FLEX_CONSUMPTION,
    "linux_consumption": hosting.LINUX_CONSUMPTION,
    "linux_consumption_no_sku": hosting.LINUX_CONSUMPTION,
    "windows_consumption": hosting.CONSUMPTION,
    "premium_windows": hosting.PREMIUM,
    "premium_linux": hosting.PREMIUM,
    "dedicated_windows": hosting.DEDICATED,
    "dedicated_linux": hosting.DEDICATED,
    "container_apps": hosting.CONTAINER_APPS,
    "kubernetes": hosting.KUBERNETES,
}


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_each_environment_the_host_distinguishes_is_told_apart(platform: str) -> None:
    assert hosting.hosting_plan(PLATFORMS[platform]) == EXPECTED[platform]
    assert Settings.from_env(PLATFORMS[platform]).hosted_on_azure


def test_every_plan_is_covered() -> None:
    assert set(EXPECTED.values()) == set(hosting.PLANS) - {hosting.LOCAL}


@pytest.mark.parametrize(
    "env",
    [
        {},
        # A developer's container may carry CONTAINER_NAME (this repository's CI machine does): Core Tools and the
        # local host set FUNCTIONS_CORETOOLS_ENVIRONMENT, which the host's rules put first.
        {"CONTAINER_NAME": "dev", "FUNCTIONS_CORETOOLS_ENVIRONMENT": "true"},
        {"WEBSITE_INSTANCE_ID": "abc", "FUNCTIONS_CORETOOLS_ENVIRONMENT": "true"},
        {"WEBSITE_SKU": "", "WEBSITE_INSTANCE_ID": " "},
        {"KUBERNETES_SERVICE_HOST": "10.0.0.1"},  # a pod, but not the Functions-on-Kubernetes hosting
        {"LEGION_SERVICE_HOST": "10.0.0.1"},
    ],
    ids=["nothing", "core-tools-in-a-container", "core-tools", "blank", "plain-pod", "legion-alone"],
)
def test_local_runs_are_local_and_keep_the_default_folder(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = Settings.from_env(env)
    assert settings.hosting_plan == hosting.LOCAL and not settings.hosted_on_azure
    assert type(build_sink(settings)).__name__ == "LocalFolderSink"


def test_the_error_names_the_plan_and_what_told_it() -> None:
    """A false alarm (a container that happens to carry a platform variable) explains itself."""
    with pytest.raises(ConfigError) as raised:
        build_sink(Settings.from_env(PLATFORMS["flex_consumption"]))
    assert "flex_consumption" in str(raised.value) and "WEBSITE_SKU=FlexConsumption" in str(raised.value)
    assert "LEGION_SERVICE_HOST" in str(raised.value)


def test_an_explicit_folder_is_still_honoured_on_azure(tmp_path: Path) -> None:
    chosen = build_sink(Settings.from_env({**PLATFORMS["flex_consumption"], "OUTPUT_FOLDER": str(tmp_path)}))
    assert type(chosen).__name__ == "LocalFolderSink"


def test_the_doctor_run_from_a_checkout_is_local_even_in_a_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from collector_local.doctor import app_environment

    monkeypatch.setenv("CONTAINER_NAME", "a-developer-container")
    monkeypatch.delenv("FUNCTIONS_CORETOOLS_ENVIRONMENT", raising=False)
    assert Settings.from_env(app_environment(tmp_path)).hosting_plan == hosting.LOCAL


def test_the_deploy_doc_names_every_platform_variable_the_app_reads() -> None:
    deploy = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text(encoding="utf-8")
    assert [name for name in hosting.PLATFORM_SETTINGS if f"`{name}" not in deploy] == []
