"""The doctor's output-store probe against Azurite (real azure-storage-blob, real SAS and Shared Key checks) and a
local folder: a probe object is written, read, listed and deleted; a credential that may not write, or is wrong,
fails with the fix; nothing is left behind and nothing lands in collection output."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.storage.blob import AccountSasPermissions, BlobServiceClient, ResourceTypes, generate_account_sas

from shared.doctor import Outcome, run_doctor
from shared.doctor.storage_probe import probe_storage
from shared.settings import Settings
from tests.support.azurite import DEV_ACCOUNT, DEV_KEY, Azurite, free_port

pytestmark = pytest.mark.azurite


@pytest.fixture
def container(azurite: Azurite) -> Iterator[str]:
    """A fresh container that already exists (created with the account key), deleted afterwards."""
    name = f"doctor-{uuid.uuid4().hex[:8]}"
    service = BlobServiceClient.from_connection_string(azurite.connection_string)
    service.create_container(name)
    yield name
    service.delete_container(name)


def blob_names(azurite: Azurite, container: str) -> list[str]:
    service = BlobServiceClient.from_connection_string(azurite.connection_string)
    return [b.name for b in service.get_container_client(container).list_blobs()]


def sas_connection(azurite: Azurite, permission: AccountSasPermissions) -> tuple[str, str]:
    sas = generate_account_sas(
        DEV_ACCOUNT,
        DEV_KEY,
        ResourceTypes(service=True, container=True, object=True),
        permission,
        datetime.now(UTC) + timedelta(hours=1),
    )
    return f"BlobEndpoint={azurite.blob_endpoint};SharedAccessSignature={sas}", sas


def settings(connection: str, container: str) -> Settings:
    return Settings.from_env({"OUTPUT_STORAGE_CONNECTION": connection, "OUTPUT_CONTAINER": container})


def test_blob_probe_writes_reads_lists_and_deletes_outside_collection_output(azurite: Azurite, container: str) -> None:
    BlobServiceClient.from_connection_string(azurite.connection_string).get_blob_client(
        container, "contoso.onmicrosoft.com/incident-1/manifest.json"
    ).upload_blob(b"{}")

    result = probe_storage(settings(azurite.connection_string, container))

    assert result.outcome is Outcome.OK, result.line
    assert f"/{container}/_doctor/" in result.detail and "deleted" in result.detail
    assert "did not exist" not in result.detail
    assert blob_names(azurite, container) == ["contoso.onmicrosoft.com/incident-1/manifest.json"]


def test_blob_probe_says_when_it_created_the_container(azurite: Azurite) -> None:
    name = f"doctor-{uuid.uuid4().hex[:8]}"

    result = probe_storage(settings(azurite.connection_string, name))

    assert result.outcome is Outcome.OK
    assert f"container {name} did not exist and was created" in result.detail
    assert blob_names(azurite, name) == []


def test_a_sas_without_write_permission_fails_with_the_fix(azurite: Azurite, container: str) -> None:
    connection, sas = sas_connection(azurite, AccountSasPermissions(read=True, list=True))

    result = probe_storage(settings(connection, container))

    assert result.outcome is Outcome.FAILED
    assert "AuthorizationPermissionMismatch" in result.detail and "permission denied" in result.detail
    assert "OUTPUT_STORAGE_CONNECTION" in result.fix and "write" in result.fix
    assert sas not in result.line and "sig=" not in result.line
    assert blob_names(azurite, container) == []


def test_a_wrong_account_key_fails_with_the_fix(azurite: Azurite, container: str) -> None:
    wrong = azurite.connection_string.replace(DEV_KEY, DEV_KEY[::-1].replace("=", "A", 2)[:-2] + "==")

    result = probe_storage(settings(wrong, container))

    assert result.outcome is Outcome.FAILED
    assert "credential rejected" in result.detail
    assert "OUTPUT_STORAGE_CONNECTION" in result.fix and "key" in result.fix


def test_a_credential_that_may_write_but_not_delete_is_ok_and_says_what_was_left(
    azurite: Azurite, container: str
) -> None:
    connection, sas = sas_connection(
        azurite, AccountSasPermissions(read=True, list=True, write=True, create=True, add=True)
    )

    result = probe_storage(settings(connection, container))

    assert result.outcome is Outcome.OK
    assert "could not be deleted" in result.detail and "remove http" in result.detail
    left = blob_names(azurite, container)
    assert len(left) == 1 and left[0].startswith("_doctor/") and left[0] in result.detail
    assert sas not in result.detail


def test_an_unreachable_blob_endpoint_fails_with_the_fix() -> None:
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
        f"BlobEndpoint=http://127.0.0.1:{free_port()}/{DEV_ACCOUNT};"
    )

    result = probe_storage(settings(connection, "ual-output"))

    assert result.outcome is Outcome.FAILED
    assert "no connection" in result.detail and "OUTPUT_STORAGE_CONNECTION" in result.fix
    assert DEV_KEY not in result.line


def test_folder_probe_leaves_the_folder_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "contoso.onmicrosoft.com").mkdir()

    result = probe_storage(Settings.from_env({"OUTPUT_FOLDER": str(tmp_path)}))

    assert result.outcome is Outcome.OK, result.line
    assert str(tmp_path / "_doctor") in result.detail
    assert sorted(p.name for p in tmp_path.iterdir()) == ["contoso.onmicrosoft.com"]


def test_an_unusable_output_folder_names_the_setting(tmp_path: Path) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")

    result = probe_storage(Settings.from_env({"OUTPUT_FOLDER": str(not_a_folder)}))

    assert result.outcome is Outcome.FAILED and "OUTPUT_FOLDER" in result.fix


def test_a_doctor_run_fails_on_a_read_only_output_store_and_still_probes_the_apis(
    azurite: Azurite, container: str, tmp_path: Path
) -> None:
    connection, _ = sas_connection(azurite, AccountSasPermissions(read=True, list=True))
    env = {"OUTPUT_STORAGE_CONNECTION": connection, "OUTPUT_CONTAINER": container, "AUDIT_CLIENT_ID": "app"}
    env["AUDIT_CLIENT_SECRET"] = "x"
    env["AUDIT_AUTHORITY_HOST"] = f"https://127.0.0.1:{free_port()}"

    report = run_doctor(env, "contoso.onmicrosoft.com", "graph")

    assert not report.ok
    assert report.result("storage").outcome is Outcome.FAILED
    assert report.result("graph.token").outcome is Outcome.FAILED  # ran although storage failed
