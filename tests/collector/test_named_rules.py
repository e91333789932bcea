"""Settings, platform detection and retention: the survivors issue 29's review named outside the packages of its
item 7, each held here (docs/testing.md, "Mutation"; the list: scripts/mutations/named.toml)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shared.errors import ConfigError
from shared.hosting import platform as hosting
from shared.settings import BUDGET_KEY_CHARS, BUDGET_KEY_SETTING, Settings
from shared.timeline.retention import cutoff


def test_an_unresolved_key_vault_reference_is_no_certificate_password() -> None:
    """A password is taken as given (spaces included), but not the reference text App Service hands over when it
    cannot resolve it: the certificate would fail later with a misleading decryption error."""
    reference = "@Microsoft.KeyVault(VaultName=kv-abc;SecretName=certificate-password)"
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"AUDIT_CERTIFICATE": "MIIKcontent", "AUDIT_CERTIFICATE_PASSWORD": reference})
    assert caught.value.setting == "AUDIT_CERTIFICATE_PASSWORD" and "Key Vault reference" in str(caught.value)


def test_a_budget_secret_of_exactly_the_minimum_length_is_accepted() -> None:
    exact = "k" * BUDGET_KEY_CHARS
    assert Settings.from_env({BUDGET_KEY_SETTING: exact}).budget_secret == exact
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({BUDGET_KEY_SETTING: exact[1:]})
    assert caught.value.setting == BUDGET_KEY_SETTING and f"at least {BUDGET_KEY_CHARS}" in str(caught.value)


@pytest.mark.parametrize(
    ("env", "plan"),
    [
        # App Service (WEBSITE_INSTANCE_ID) in a Linux container also carries CONTAINER_NAME: its SKU decides.
        ({"WEBSITE_INSTANCE_ID": "abc", "WEBSITE_SKU": "ElasticPremium", "CONTAINER_NAME": "c-1"}, hosting.PREMIUM),
        ({"WEBSITE_INSTANCE_ID": "abc", "WEBSITE_SKU": "PremiumV3", "CONTAINER_NAME": "c-1"}, hosting.DEDICATED),
        # Flex Consumption told by its pod name and Legion host, with no SKU and no CONTAINER_NAME.
        ({"WEBSITE_POD_NAME": "pod-1", "LEGION_SERVICE_HOST": "10.0.0.1"}, hosting.FLEX_CONSUMPTION),
    ],
)
def test_the_plan_is_told_by_the_variables_that_decide_it(env: dict[str, str], plan: str) -> None:
    assert hosting.hosting_plan(env) == plan


def test_the_retention_cutoff_rounds_up_to_the_whole_second() -> None:
    """A record created in the part second before the exact edge has passed retention too: never less flagged."""
    moment = datetime(2024, 11, 18, 12, 0, 0, 250_000, tzinfo=UTC)
    assert cutoff(moment, 90) == datetime(2024, 8, 20, 12, 0, 1, tzinfo=UTC)
    assert cutoff(moment.replace(microsecond=0), 90) == moment.replace(microsecond=0) - timedelta(days=90)
