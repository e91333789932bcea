"""On Azure, doctor's settings probe also checks what a deployment needs (shared.hosting.azure_settings.hosted_gaps)."""

from __future__ import annotations

from shared.doctor.model import Outcome
from shared.doctor.runner import _check_settings

FLEX = {"WEBSITE_SKU": "FlexConsumption", "CONTAINER_NAME": "c", "LEGION_SERVICE_HOST": "10.0.0.1"}
DEPLOYED = {
    **FLEX,
    "AUDIT_CLIENT_ID": "app",
    "AUDIT_CLIENT_SECRET": "s",
    "OUTPUT_STORAGE_ACCOUNT_URL": "https://out.blob.core.windows.net",
    "TASKHUB_NAME": "UalCollector",
    "AzureWebJobsStorage__accountName": "st",
    "PYTHON_THREADPOOL_THREAD_COUNT": "20",
    "APPLICATIONINSIGHTS_CONNECTION_STRING": "InstrumentationKey=x",
    "COLLECTOR_BUDGET_SECRET": "k" * 64,
}


def test_a_complete_deployment_passes() -> None:
    result, settings, _ = _check_settings(DEPLOYED, "contoso.onmicrosoft.com")
    assert result.outcome is Outcome.OK and settings is not None and settings.hosting_plan == "flex_consumption"


def test_a_deployment_missing_a_setting_fails_naming_it_and_the_other_probes_still_run() -> None:
    env = {k: v for k, v in DEPLOYED.items() if k != "PYTHON_THREADPOOL_THREAD_COUNT"}
    result, settings, config = _check_settings(env, "contoso.onmicrosoft.com")
    assert result.outcome is Outcome.FAILED and "PYTHON_THREADPOOL_THREAD_COUNT" in (result.fix or "")
    assert "flex_consumption" in result.detail and settings is not None and config is not None


def test_a_local_run_is_not_held_to_the_deployment_rules() -> None:
    env = {k: v for k, v in DEPLOYED.items() if k not in FLEX and k != "TASKHUB_NAME"}
    assert _check_settings(env, "contoso.onmicrosoft.com")[0].outcome is Outcome.OK
