"""The hosted profile every test host runs (``tests/support/hosted_profile.py``) is what the deployment runs: every
setting the template (``infra/resources.bicep``) sets is in it or named as a local stand-in, the template's default
values are its values, and with its stand-ins put back it has no gap Azure would refuse (``hosted_gaps``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.hosting.azure_settings import hosted_gaps
from shared.settings import BUDGET_KEY_SETTING, Settings
from tests.collector.test_infra import REPO, _app_settings, _parsed
from tests.support.hosted_profile import (
    AZURE_ONLY,
    BUDGET_SECRET,
    E2E_CONVENIENCES,
    TEMPLATE_DEFAULTS,
    checked,
    conveniences,
    hosted,
    hosted_env,
)

ENDPOINTS = {"AUDIT_AUTHORITY_HOST": "https://127.0.0.1:1"}


def test_every_setting_the_template_sets_is_in_the_profile_or_named_as_azure_only() -> None:
    profile = hosted(client_id="c")
    assert sorted(set(_app_settings()) - set(profile) - AZURE_ONLY) == []
    assert sorted(AZURE_ONLY - set(_app_settings())) == [], "a stand-in for a setting the template no longer sets"


def test_the_profile_takes_the_template_defaults_from_main_bicep() -> None:
    parameters = _parsed(REPO / "infra" / "main.bicep")["parameters"]
    template = _app_settings()
    for name, value in TEMPLATE_DEFAULTS.items():
        source = template[name]
        if source in parameters:  # a parameter passed down from main.bicep: its default
            assert str(parameters[source]["default"]) == value, name
        elif isinstance(source, str) and not source.startswith("@"):  # a literal in the template
            assert source == value or name == "OUTPUT_CONTAINER", (name, source)


def test_with_its_azure_stand_ins_the_profile_has_no_gap_azure_would_refuse() -> None:
    stand_ins = {name: "set" for name in AZURE_ONLY} | {"AzureWebJobsStorage__credential": "managedidentity"}
    assert hosted_gaps({**hosted(client_id="c"), **stand_ins}) == []
    env = hosted_env(client_id="c", client_secret="s", endpoints=ENDPOINTS, output=Path("/tmp/out"))
    settings = Settings.from_env(env)
    assert settings.budget_secret == BUDGET_SECRET and settings.budget("graph").enabled
    assert settings.budget("exchange").enabled and settings.task_hub == TEMPLATE_DEFAULTS["TASKHUB_NAME"]


def test_conveniences_are_named_and_a_hosted_setting_changes_only_as_a_deviation() -> None:
    assert set(E2E_CONVENIENCES) <= set(conveniences(Path("/tmp")))
    base = hosted_env(client_id="c", client_secret="s", endpoints=ENDPOINTS, output=Path("/o"), use=())
    assert "OUTPUT_FOLDER" not in base and "COLLECTOR_POLL_INTERVAL_SECONDS" not in base  # opted into, or absent
    assert checked({"COLLECTOR_BUDGET_GRAPH": "2"}, base=base) == {"COLLECTOR_BUDGET_GRAPH": "2"}  # sizing it: fine
    for refused in ({BUDGET_KEY_SETTING: ""}, {"COLLECTOR_BUDGET_GRAPH": "0"}, {"TASKHUB_NAME": "Other"}):
        with pytest.raises(AssertionError, match="deviations"):
            checked(refused, base=base)
    unkeyed = hosted_env(
        client_id="c", client_secret="s", endpoints=ENDPOINTS, output=Path("/o"), deviations={BUDGET_KEY_SETTING: ""}
    )
    assert BUDGET_KEY_SETTING not in unkeyed
