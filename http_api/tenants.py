"""The tenant's GUID at the edge: the HTTP triggers resolve a domain once, before anything starts, and carry the GUID
in the collection's spec (orchestrators do no I/O). The tenant budget is keyed by it (``shared.audit.tenant_lookup``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from http_api.common import ApiResponse, error
from shared.audit.tenant_lookup import TenantNotFoundError, directory_for
from shared.errors import ConfigError, TransientApiError
from shared.settings import Settings

TenantResolver = Callable[[str], Awaitable[str]]
"""A tenant spelling (GUID or domain, validated) -> the tenant's GUID, lower case."""


def resolver_for(settings: Settings) -> TenantResolver:
    """The process-wide resolver of the configured authority (its cache outlives one request)."""
    directory = directory_for(settings.audit.authority_host, settings.audit.ca_bundle)

    async def resolve(tenant: str) -> str:
        return await asyncio.to_thread(directory.guid, tenant)

    return resolve


async def guid_or_error(resolve: TenantResolver, tenant: str) -> str | ApiResponse:
    """The tenant's GUID, or the answer to give instead: 400 naming ``tenantId`` when the authority knows no such
    tenant, 503 when it could not be asked (nothing is started either way), 500 naming the setting for a CA problem."""
    try:
        return await resolve(tenant)
    except TenantNotFoundError as exc:
        return error(400, "tenantId", exc.rule, exc.message)
    except TransientApiError as exc:
        message = f"could not look up the tenant's GUID: {exc}; nothing was started, try again"
        return error(503, "tenantId", "lookup_failed", message)
    except ConfigError as exc:
        return error(500, exc.setting, "config", str(exc))
