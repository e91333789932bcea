from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared import names
from shared.errors import ConfigError
from shared.settings import PLATFORM_SETTINGS, Settings
from shared.sinks.base import check_object_name
from tests.support.recording_env import RecordingEnv

T0 = datetime(2024, 11, 17, 10, 0, tzinfo=UTC)


def test_chunk_names_are_deterministic_and_readable() -> None:
    a = names.chunk_object_name("Contoso.onmicrosoft.com", "c1", T0, T0 + timedelta(hours=1))
    b = names.chunk_object_name("contoso.onmicrosoft.com", "c1", T0, T0 + timedelta(hours=1))
    assert a == b == "contoso.onmicrosoft.com/c1/chunks/20241117T100000Z_20241117T110000Z.jsonl"
    assert names.summary_object_name(a).endswith("_20241117T110000Z.summary.json")
    assert names.quarantine_object_name(a).endswith("_20241117T110000Z.quarantine.jsonl")
    assert names.manifest_object_name("contoso.onmicrosoft.com", "c1") == "contoso.onmicrosoft.com/c1/manifest.json"


@given(st.integers(0, 10**8), st.integers(1, 10**8))
def test_distinct_windows_get_distinct_safe_names(offset: int, span: int) -> None:
    start = T0 + timedelta(microseconds=offset)
    end = start + timedelta(microseconds=span)
    name = names.chunk_object_name("contoso.onmicrosoft.com", "c1", start, end)
    check_object_name(name)
    other = names.chunk_object_name("contoso.onmicrosoft.com", "c1", start, end + timedelta(microseconds=1))
    assert name != other


@pytest.mark.parametrize(
    ("tenant", "collection"),
    [
        ("../x.com", "c1"),
        ("contoso.com", "../c1"),
        ("contoso.com", "a/b"),
        ("con/toso.com", "c1"),
        ("x..y.com", "c"),
        ("contoso.com", "c1\n"),  # a final newline slips past a ``$``-anchored match
        ("\u212aontoso.com", "c1"),  # KELVIN SIGN: lower() makes it ASCII "k", another tenant's prefix
        ("contoso.com\n", "c1"),  # stripped by accident before
        (" contoso.com", "c1"),
    ],
)
def test_unsafe_components_are_rejected(tenant: str, collection: str) -> None:
    with pytest.raises(ValueError):
        names.chunk_object_name(tenant, collection, T0, T0 + timedelta(hours=1))


@pytest.mark.parametrize("name", ["/abs", "a/../b", "a//b", "a/./b", "a b", "", "a\\b", "a/b\n"])
def test_object_name_check_rejects_escapes(name: str) -> None:
    with pytest.raises(ValueError):
        check_object_name(name)


def test_safe_id_is_matched_whole() -> None:
    assert names.is_safe_id("c1") and not names.is_safe_id("c1\n") and not names.is_safe_id("")


def test_settings_defaults_and_overrides() -> None:
    s = Settings.from_env(
        {"COLLECTOR_MAX_CONCURRENCY": "5", "OUTPUT_FOLDER": "/tmp/out", "AUDIT_CLIENT_SECRET": "s3cret-value"}
    )
    assert s.max_concurrency == 5 and s.default_concurrency == 3 and s.sink_kind == "folder"
    assert "s3cret-value" not in repr(s)  # secrets stay out of logs
    assert s.audit.config_kwargs("t.onmicrosoft.com")["client_secret"] == "s3cret-value"


def test_certificate_content_and_password_reach_the_adapters_but_not_repr() -> None:
    s = Settings.from_env({"AUDIT_CERTIFICATE": "MIIKcontent", "AUDIT_CERTIFICATE_PASSWORD": " pass word "})
    kwargs = s.audit.config_kwargs("t.onmicrosoft.com")
    assert kwargs["certificate"] == "MIIKcontent"
    assert kwargs["certificate_password"] == " pass word "  # a password is taken as given, spaces and all
    assert "MIIKcontent" not in repr(s) and "pass word" not in repr(s)
    assert Settings.from_env({"OUTPUT_STORAGE_CONNECTION": "UseDevelopmentStorage=true"}).sink_kind == "blob"


@pytest.mark.parametrize(
    ("env", "setting"),
    [
        ({"COLLECTOR_MAX_CONCURRENCY": "lots"}, "COLLECTOR_MAX_CONCURRENCY"),
        ({"COLLECTOR_MAX_CONCURRENCY": "0"}, "COLLECTOR_MAX_CONCURRENCY"),
        ({"COLLECTOR_DEFAULT_CONCURRENCY": "9", "COLLECTOR_MAX_CONCURRENCY": "4"}, "COLLECTOR_DEFAULT_CONCURRENCY"),
        ({"COLLECTOR_DEFAULT_SOURCE": "ftp"}, "COLLECTOR_DEFAULT_SOURCE"),
        ({"OUTPUT_CONTAINER": "Bad_Name"}, "OUTPUT_CONTAINER"),
        ({"AUDIT_GRAPH_BASE_URL": "graph.microsoft.com"}, "AUDIT_GRAPH_BASE_URL"),
        ({"COLLECTOR_POLL_FRACTION": "1.5"}, "COLLECTOR_POLL_FRACTION"),
        ({"OUTPUT_STORAGE_CONNECTION": "x", "OUTPUT_STORAGE_ACCOUNT_URL": "https://a"}, "OUTPUT_STORAGE_ACCOUNT_URL"),
        ({"AUDIT_CLIENT_SECRET": "s", "AUDIT_CERTIFICATE": "MII"}, "AUDIT_CLIENT_SECRET, AUDIT_CERTIFICATE"),
        ({"AUDIT_CLIENT_SECRET": "s", "AUDIT_CERTIFICATE_PATH": "/a"}, "AUDIT_CLIENT_SECRET, AUDIT_CERTIFICATE_PATH"),
        ({"AUDIT_CERTIFICATE": "MII", "AUDIT_CERTIFICATE_PATH": "/a"}, "AUDIT_CERTIFICATE, AUDIT_CERTIFICATE_PATH"),
        ({"AUDIT_CLIENT_SECRET": "s", "AUDIT_CERTIFICATE_PASSWORD": "pw"}, "AUDIT_CERTIFICATE_PASSWORD"),
    ],
)
def test_bad_settings_name_the_setting(env: dict[str, str], setting: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(env)
    assert caught.value.setting == setting


def test_local_settings_example_documents_every_setting_the_app_reads() -> None:
    import json
    from pathlib import Path

    env = RecordingEnv()
    Settings.from_env(env)
    example = json.loads((Path(__file__).parents[2] / "local.settings.json.example").read_text())["Values"]
    assert env.asked, "the recording environment saw no lookups"
    assert sorted(env.asked - set(example) - set(PLATFORM_SETTINGS)) == []  # the platform's own are not for users


def test_a_summary_name_gives_back_its_window_even_with_microseconds() -> None:
    start = datetime(2024, 6, 3, 1, tzinfo=UTC)
    for end in (start + timedelta(hours=1), start + timedelta(microseconds=1500)):
        name = names.summary_object_name(names.chunk_object_name("t.example.com", "c1", start, end))
        assert names.summary_window(name) == (start, end)
    chunk = names.chunk_object_name("t.example.com", "c1", start, start + timedelta(hours=1))
    assert names.summary_window(chunk) is None and names.summary_window(names.quarantine_object_name(chunk)) is None


@pytest.mark.parametrize("setting", ["COLLECTOR_BUDGET_SECRET", "AUDIT_CERTIFICATE", "AUDIT_CLIENT_SECRET"])
def test_an_unresolved_key_vault_reference_is_named_not_used(setting: str) -> None:
    """App Service hands the reference text itself to the app when it cannot resolve it (no access yet, no such
    secret): used as a secret it would be a key everyone can read in the template, or a certificate that fails later."""
    reference = "@Microsoft.KeyVault(VaultName=kv-abc;SecretName=collector-budget-secret)"
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"AUDIT_CLIENT_ID": "app", setting: reference})
    assert caught.value.setting == setting and "Key Vault reference" in str(caught.value)
