"""The JSON the Durable extension hands to a ``durableClient`` parameter, built for this host.

The real ``azure.durable_functions.DurableOrchestrationClient`` reads ``rpcBaseUrl`` for every call it
makes (start, status, raise event, terminate, purge, ...) and ``managementUrls`` (with the placeholder
id ``INSTANCEID``) for ``create_check_status_response``; both point back at this host.
"""

from __future__ import annotations

import json
from urllib.parse import quote

from durable_local.host.keys import HostKeys

WEBHOOK_PATH = "/runtime/webhooks/durabletask"
RPC_PATH = "/runtime/webhooks/durabletask/rpc"
INSTANCE_ID_PLACEHOLDER = "INSTANCEID"
CONNECTION_NAME = "Storage"


def rpc_base_url(base_url: str, keys: HostKeys) -> str:
    """With keys required, RPC calls carry a per-process secret in the path (like the extension's
    loopback-only RPC listener, it is for the app's own client)."""
    if keys.required:
        return f"{base_url}{RPC_PATH}/{keys.rpc_token}/"
    return f"{base_url}{WEBHOOK_PATH}/"


def query_suffix(hub_name: str, keys: HostKeys, *, task_hub: str | None = None, connection: str | None = None) -> str:
    hub = quote(task_hub or hub_name, safe="")
    suffix = f"taskHub={hub}&connection={quote(connection or CONNECTION_NAME, safe='')}"
    if keys.required:
        suffix += f"&code={quote(keys.system_key, safe='')}"
    return suffix


def management_urls(
    base_url: str, hub_name: str, keys: HostKeys, instance_id: str, *, task_hub: str | None = None
) -> dict[str, str]:
    """The check-status payload (``create_check_status_response`` / ``HttpManagementPayload``)."""
    prefix = f"{base_url}{WEBHOOK_PATH}/instances/{quote(instance_id, safe='')}"
    suffix = query_suffix(hub_name, keys, task_hub=task_hub)
    return {
        "id": instance_id,
        "statusQueryGetUri": f"{prefix}?{suffix}",
        "sendEventPostUri": f"{prefix}/raiseEvent/{{eventName}}?{suffix}",
        "terminatePostUri": f"{prefix}/terminate?reason={{text}}&{suffix}",
        "rewindPostUri": f"{prefix}/rewind?reason={{text}}&{suffix}",
        "purgeHistoryDeleteUri": f"{prefix}?{suffix}",
        "restartPostUri": f"{prefix}/restart?{suffix}",
        "suspendPostUri": f"{prefix}/suspend?reason={{text}}&{suffix}",
        "resumePostUri": f"{prefix}/resume?reason={{text}}&{suffix}",
    }


def website_base_url(website_hostname: str) -> str:
    """The Functions host's webhook base for ``WEBSITE_HOSTNAME`` (``DefaultScriptWebHookProvider``): http for
    ``localhost:<port>``, https otherwise."""
    scheme = "http" if website_hostname.lower().startswith("localhost:") else "https"
    return f"{scheme}://{website_hostname}"


def client_binding_json(
    base_url: str, hub_name: str, keys: HostKeys, *, task_hub: str | None = None, rpc_base: str | None = None
) -> str:
    """The string passed to a ``durableClient`` parameter: URLs for callers on ``base_url`` (the public base), the
    RPC base on ``rpc_base`` (this host's own address, like the extension's loopback RPC listener; default
    ``base_url``)."""
    suffix = query_suffix(hub_name, keys, task_hub=task_hub)
    create = f"{base_url}{WEBHOOK_PATH}/orchestrators/{{functionName}}[/{{instanceId}}]"
    required = f"code={quote(keys.system_key, safe='')}" if keys.required else ""
    payload = {
        "taskHubName": task_hub or hub_name,
        "creationUrls": {
            "createNewInstancePostUri": f"{create}?{suffix}",
            "createAndWaitOnNewInstancePostUri": (
                f"{create}?timeout={{timeoutInSeconds}}&pollingInterval={{intervalInSeconds}}&{suffix}"
            ),
        },
        "managementUrls": management_urls(base_url, hub_name, keys, INSTANCE_ID_PLACEHOLDER, task_hub=task_hub),
        "baseUrl": f"{base_url}{WEBHOOK_PATH}",
        "requiredQueryStringParameters": required,
        "rpcBaseUrl": rpc_base_url(rpc_base or base_url, keys),
        "httpBaseUrl": "",
        "maxGrpcMessageSizeInBytes": 0,
        "grpcHttpClientTimeout": "00:01:40",
    }
    return json.dumps(payload)
