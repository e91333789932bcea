"""Output sinks: the ``ChunkSink`` port and its blob, local-folder and in-memory implementations.

May import: shared.
"""

from __future__ import annotations

from shared.errors import ConfigError
from shared.settings import Settings
from shared.sinks.base import ChunkSink, StoredObject, check_object_name, write_bytes

__all__ = ["ChunkSink", "StoredObject", "build_sink", "check_object_name", "write_bytes"]

DEFAULT_OUTPUT_FOLDER = "output"


def build_sink(settings: Settings) -> ChunkSink:
    """The sink the settings select: blob (connection string or account URL + managed identity) or a folder."""
    if settings.output_connection_string:
        from shared.sinks.blob import BlobSink

        return BlobSink.from_connection_string(settings.output_connection_string, settings.output_container)
    if settings.output_account_url:
        from shared.sinks.blob import BlobSink

        return BlobSink.from_account_url(settings.output_account_url, settings.output_container)
    from shared.sinks.local import LocalFolderSink

    if settings.hosted_on_azure and not settings.output_folder:
        # The app folder may be writable (then a deployment wipes what was written there) or read-only; either way
        # the default folder is not an output on Azure.
        raise ConfigError(
            "OUTPUT_STORAGE_ACCOUNT_URL",
            f"no output is configured: on Azure ({settings.hosting_plan}, told by {settings.hosting_evidence}) set "
            "OUTPUT_STORAGE_ACCOUNT_URL (managed identity) or OUTPUT_STORAGE_CONNECTION; a local OUTPUT_FOLDER is "
            "used only when set explicitly",
        )
    try:
        return LocalFolderSink(settings.output_folder or DEFAULT_OUTPUT_FOLDER)
    except OSError as exc:
        # E.g. deployed to Azure without an output setting: the app folder is read-only. A ConfigError dooms the
        # collection at once with the setting named, instead of every chunk crashing its activity.
        raise ConfigError(
            "OUTPUT_FOLDER",
            f"cannot create the output folder ({exc.strerror}); on Azure set OUTPUT_STORAGE_CONNECTION or "
            "OUTPUT_STORAGE_ACCOUNT_URL",
        ) from None
