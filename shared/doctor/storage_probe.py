"""The output store probe: write, read back, list and delete one small object through the collector's own sink.

The object is ``_doctor/<uuid>.txt``: collection output lives under ``<tenant>/<collection>/`` and a tenant component
never starts with ``_`` (``shared.names``), so the probe can never touch or be mistaken for collection output. The
sink port has no delete (the collector never deletes), so the probe object is removed here, with the same
credentials the sink uses; a credential that may write but not delete is reported, with the object's location.
"""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path
from typing import Any

from shared.doctor.fixes import config_failure
from shared.doctor.model import ProbeResult, differs, failed, ok
from shared.errors import ConfigError, SinkError
from shared.settings import Settings
from shared.sinks import ChunkSink, build_sink, write_bytes

PROBE = "storage"
PROBE_FOLDER = "_doctor"

_DENIED = frozenset(
    {"AuthorizationPermissionMismatch", "AuthorizationResourceTypeMismatch", "InsufficientAccountPermissions"}
)
_REJECTED = frozenset({"AuthenticationFailed", "AuthorizationFailure", "AuthorizationServiceMismatch"})


def _setting(settings: Settings) -> str:
    if settings.output_connection_string:
        return "OUTPUT_STORAGE_CONNECTION"
    if settings.output_account_url:
        return "OUTPUT_STORAGE_ACCOUNT_URL"
    return "OUTPUT_FOLDER"


def _where(settings: Settings) -> str:
    if settings.sink_kind == "blob":
        return f"blob container {settings.output_container} ({_setting(settings)})"
    return f"folder {settings.output_folder or 'output'} (OUTPUT_FOLDER)"


def _azure_reason(exc: BaseException) -> tuple[str, str | None, int | None]:
    """(error type, storage error code, HTTP status) of an azure-core error, without its message (it may quote a
    URL that carries a SAS)."""
    code = getattr(exc, "error_code", None)
    status = getattr(exc, "status_code", None)
    return type(exc).__name__, (str(getattr(code, "value", code)) if code else None), status


def _storage_failure(operation: str, exc: BaseException, settings: Settings) -> ProbeResult:
    setting = _setting(settings)
    cause = exc.__cause__ if isinstance(exc, SinkError) and exc.__cause__ is not None else exc
    if isinstance(cause, OSError) or settings.sink_kind == "folder":
        return failed(
            PROBE,
            f"cannot {operation} in {_where(settings)}: {exc}",
            "make OUTPUT_FOLDER writable by this process, or set OUTPUT_STORAGE_CONNECTION or "
            "OUTPUT_STORAGE_ACCOUNT_URL",
        )
    kind, code, status = _azure_reason(cause)
    said = f"{kind}" + (f" {status}" if status else "") + (f" {code}" if code else "")
    detail = f"cannot {operation} the probe object in {_where(settings)}: {said}"
    if code in _DENIED:
        if setting == "OUTPUT_STORAGE_ACCOUNT_URL":
            fix = (
                "grant the function app's managed identity Storage Blob Data Contributor on the storage account "
                "(role assignments can take minutes to apply)"
            )
        else:
            fix = (
                f"the credential in {setting} may not {operation} blobs: use the account key, or a SAS with read, "
                "add, create, write and list permissions (delete too, so the doctor can clean up) on the service, "
                "container and object"
            )
        return failed(PROBE, detail + " (permission denied)", fix)
    if code in _REJECTED or kind == "ClientAuthenticationError":
        if setting == "OUTPUT_STORAGE_ACCOUNT_URL":
            fix = "enable the function app's managed identity (locally: az login) and check OUTPUT_STORAGE_ACCOUNT_URL"
        else:
            fix = (
                f"check {setting}: the account key or SAS signature is wrong or expired (or the account's network "
                "rules refuse this caller)"
            )
        return failed(PROBE, detail + " (credential rejected)", fix)
    if kind in ("ServiceRequestError", "ServiceRequestTimeoutError"):
        return failed(PROBE, detail + " (no connection)", f"check {setting} and that the blob endpoint is reachable")
    return failed(PROBE, detail, f"check {setting} and {_setting(settings)}'s permissions")


def _service(settings: Settings) -> Any:
    """A blob service client with the sink's credentials (key or SAS; else the managed identity). The storage SDK
    retries a failing call for minutes by default (15 s, then 18 s, 24 s ... between tries); the doctor tries twice
    more, a second apart, and waits at most 10 s for a connection, so it answers within its budget."""
    from azure.storage.blob import BlobServiceClient, LinearRetry

    bounds: dict[str, Any] = {
        "retry_policy": LinearRetry(backoff=1, random_jitter_range=1, retry_total=2),
        "connection_timeout": 10,
        "read_timeout": 30,
    }
    if settings.output_connection_string:
        return BlobServiceClient.from_connection_string(settings.output_connection_string, **bounds)
    from azure.identity import DefaultAzureCredential

    return BlobServiceClient(str(settings.output_account_url), credential=DefaultAzureCredential(), **bounds)


def _delete_blob(service: Any, settings: Settings, name: str) -> str | None:
    """Deletes the probe blob; None when done (or already gone), else why not."""
    from azure.core.exceptions import AzureError, ResourceNotFoundError

    try:
        service.get_blob_client(settings.output_container, name).delete_blob()
    except ResourceNotFoundError:
        return None
    except AzureError as exc:
        kind, code, status = _azure_reason(exc)
        return " ".join(str(p) for p in (kind, status, code) if p)
    return None


def _container_exists(service: Any, settings: Settings) -> tuple[bool | None, BaseException | None]:
    """Whether the output container exists before the probe (None: cannot tell), to say when the probe created it;
    and the connection error when the endpoint cannot be reached at all (nothing else can work then)."""
    from azure.core.exceptions import AzureError, ServiceRequestError

    try:
        return bool(service.get_container_client(settings.output_container).exists()), None
    except ServiceRequestError as exc:
        return None, exc
    except AzureError:
        return None, None


def _delete_file(sink: ChunkSink, name: str) -> str | None:
    path = Path(sink.location(name))
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    with contextlib.suppress(OSError):
        path.parent.rmdir()  # only when empty: another doctor run may be using it
    return None


def probe_storage(settings: Settings) -> ProbeResult:
    """Write, read, list and delete ``_doctor/<uuid>.txt`` in the configured output store."""
    token = uuid.uuid4().hex
    name = f"{PROBE_FOLDER}/{token}.txt"
    payload = f"ual-collector doctor probe {token}\n".encode()
    service: Any = None
    try:
        if settings.sink_kind == "blob":
            from shared.sinks.blob import BlobSink

            service = _service(settings)
            sink: ChunkSink = BlobSink(service, settings.output_container)
        else:
            sink = build_sink(settings)
    except ConfigError as exc:
        return config_failure(PROBE, exc)
    except ValueError:  # the SDK's message may quote the connection string
        setting = _setting(settings)
        return failed(PROBE, f"{setting} is not a usable connection string or URL", f"check {setting}")
    existed, unreachable = _container_exists(service, settings) if service is not None else (None, None)
    if unreachable is not None:
        return _storage_failure("reach", unreachable, settings)
    try:
        write_bytes(sink, name, payload)
    except (SinkError, OSError) as exc:
        return _storage_failure("write", exc, settings)
    location = sink.location(name)
    try:
        try:
            back = sink.read_bytes(name)
        except (SinkError, OSError) as exc:
            return _storage_failure("read", exc, settings)
        try:
            listed = sink.list_names(f"{PROBE_FOLDER}/{token}")
        except (SinkError, OSError) as exc:
            return _storage_failure("list", exc, settings)
    finally:
        not_deleted = _delete_blob(service, settings, name) if service is not None else _delete_file(sink, name)
    left = (
        f"; the probe object could not be deleted ({not_deleted}; the collector never deletes, so its credential "
        f"need not allow it): remove {location} by hand"
        if not_deleted
        else ""
    )
    if back != payload:
        return differs(PROBE, f"{location} read back {len(back or b'')} bytes, not the {len(payload)} written{left}")
    if listed != [name]:
        return differs(PROBE, f"listing {PROBE_FOLDER}/{token} gave {listed}, not the object just written{left}")
    created = (
        f"; container {settings.output_container} did not exist and was created (the collector creates it too)"
        if existed is False
        else ""
    )
    return ok(PROBE, f"wrote, read back, listed and deleted {location} in {_where(settings)}{created}{left}")
