"""What a deployment on Azure must set, and the app settings read by others than ``shared.settings``.

``infra/resources.bicep`` sets the app settings; ``tests/collector/test_infra.py`` holds it to this module (every
requirement met, every name known) and the checkov policy in ``infra/checkov/`` checks the same on each scan.
``hosted_gaps`` is the rule both apply, and doctor's ``settings`` probe applies it to a running app.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Requirement:
    """On Azure one of ``names`` must be set (non-empty)."""

    names: tuple[str, ...]
    why: str


HOSTED_REQUIREMENTS = (
    Requirement(("AUDIT_CLIENT_ID",), "the app registration that reads the audit log"),
    Requirement(
        ("AUDIT_CERTIFICATE", "AUDIT_CLIENT_SECRET", "AUDIT_CERTIFICATE_PATH"),
        "its credential (a Key Vault reference to the certificate, preferred)",
    ),
    Requirement(
        ("OUTPUT_STORAGE_ACCOUNT_URL", "OUTPUT_STORAGE_CONNECTION", "OUTPUT_FOLDER"),
        "the output store: the app's own disk is not one",
    ),
    Requirement(("TASKHUB_NAME",), "host.json's hubName is %TASKHUB_NAME%"),
    Requirement(
        ("COLLECTOR_BUDGET_SECRET",),
        "the key that ties tenant budget operations to their collection (a Key Vault reference; without it anyone "
        "holding the system key can act for any collection on the tenant budget)",
    ),
    Requirement(
        ("AzureWebJobsStorage", "AzureWebJobsStorage__accountName", "AzureWebJobsStorage__blobServiceUri"),
        "the task hub's storage (identity-based: __accountName or the three service URIs)",
    ),
    Requirement(("PYTHON_THREADPOOL_THREAD_COUNT",), "threads for long chunk exports beside orchestrator episodes"),
    Requirement(("APPLICATIONINSIGHTS_CONNECTION_STRING",), "the logs docs/operations.md queries"),
)

_HOST_STORAGE = "AzureWebJobsStorage"
HOST_SETTINGS = frozenset(
    {
        # The Functions host and the Durable extension (identity-based connections: docs/deploy.md).
        _HOST_STORAGE,
        f"{_HOST_STORAGE}__accountName",
        f"{_HOST_STORAGE}__credential",
        f"{_HOST_STORAGE}__clientId",
        f"{_HOST_STORAGE}__blobServiceUri",
        f"{_HOST_STORAGE}__queueServiceUri",
        f"{_HOST_STORAGE}__tableServiceUri",
        "AzureFunctionsJobHost__functionTimeout",
        "FUNCTIONS_WORKER_RUNTIME",
        "FUNCTIONS_EXTENSION_VERSION",
        "AzureWebJobsFeatureFlags",
        "WEBSITE_LOAD_CERTIFICATES",
        "TASKHUB_NAME",
        # The Python worker.
        "PYTHON_THREADPOOL_THREAD_COUNT",
        # Application Insights (Entra authentication with the app's user-assigned identity).
        "APPLICATIONINSIGHTS_CONNECTION_STRING",
        "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",
        # azure-identity's DefaultAzureCredential: which user-assigned identity reaches the output account.
        "AZURE_CLIENT_ID",
    }
)
"""App settings read by the host, the worker or a library, which the template may set besides the collector's."""


def hosted_gaps(values: Mapping[str, str]) -> list[str]:
    """What a deployment with these app settings lacks on Azure, one sentence each (empty: nothing)."""

    def has(name: str) -> bool:
        return bool(values.get(name, "").strip())

    gaps = [f"set {' or '.join(req.names)}: {req.why}" for req in HOSTED_REQUIREMENTS if not any(map(has, req.names))]
    uris = [f"{_HOST_STORAGE}__{kind}ServiceUri" for kind in ("blob", "queue", "table")]
    if any(map(has, uris)) and not all(map(has, uris)):
        gaps.append(f"set all of {', '.join(uris)}: Durable Functions uses blobs, queues and tables")
    if has(f"{_HOST_STORAGE}__clientId") and values.get(f"{_HOST_STORAGE}__credential") != "managedidentity":
        gaps.append(f"set {_HOST_STORAGE}__credential=managedidentity beside {_HOST_STORAGE}__clientId")
    if has("OUTPUT_STORAGE_ACCOUNT_URL") and has(f"{_HOST_STORAGE}__clientId") and not has("AZURE_CLIENT_ID"):
        gaps.append("set AZURE_CLIENT_ID: the output account is reached with the user-assigned identity")
    return gaps
