"""Ports for the activity triggers, built once per worker process from the environment (the edge)."""

from __future__ import annotations

import functools
import os

from shared.audit.ports import AuditQueryApi, AuditSearchApi
from shared.settings import Settings
from shared.sinks import ChunkSink, build_sink


@functools.cache
def settings() -> Settings:
    return Settings.from_env(os.environ)


@functools.cache
def sink() -> ChunkSink:
    return build_sink(settings())


@functools.lru_cache(maxsize=64)
def query_api(tenant_id: str) -> AuditQueryApi:
    """One client per tenant, so its token cache and HTTP session are reused across chunks."""
    from shared.audit import AuditApiConfig, build_query_api

    return build_query_api(AuditApiConfig(**settings().audit.config_kwargs(tenant_id)))


@functools.lru_cache(maxsize=64)
def search_api(tenant_id: str) -> AuditSearchApi:
    from shared.audit import AuditApiConfig, build_search_api

    return build_search_api(AuditApiConfig(**settings().audit.config_kwargs(tenant_id)))
