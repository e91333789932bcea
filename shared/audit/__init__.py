"""Audit API adapters: Microsoft Graph audit log queries and Exchange ``Search-UnifiedAuditLog``.

Callers depend on the ports (:mod:`shared.audit.ports`) and build concrete clients here. The only code that calls
an audit API; ``docs/architecture.md`` says how to add another source.

May import: shared, shared.budget, shared.records.
"""

from __future__ import annotations

from shared.audit.config import AuditApiConfig
from shared.audit.ports import AuditQueryApi, AuditSearchApi


def build_query_api(config: AuditApiConfig) -> AuditQueryApi:
    """The Microsoft Graph audit log query client for ``config``."""
    from shared.audit.graph import GraphAuditClient

    return GraphAuditClient(config)


def build_search_api(config: AuditApiConfig) -> AuditSearchApi:
    """The Exchange ``Search-UnifiedAuditLog`` client for ``config``."""
    from shared.audit.exchange import ExchangeAuditClient

    return ExchangeAuditClient(config, session_cap=config.exchange_session_cap)


__all__ = ["AuditApiConfig", "build_query_api", "build_search_api"]
