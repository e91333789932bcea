"""Audit API adapters: Microsoft Graph audit log queries, Exchange ``Search-UnifiedAuditLog`` and the Office 365
Management Activity API (the feed).

Callers depend on the ports (:mod:`shared.audit.ports`) and build concrete clients here. The only code that calls
an audit API; ``docs/architecture.md`` says how to add another source.

May import: shared, shared.budget, shared.records, shared.values.
"""

from __future__ import annotations

from shared.audit.config import AuditApiConfig
from shared.audit.ports import ActivityFeedApi, AuditQueryApi, AuditSearchApi


def build_query_api(config: AuditApiConfig) -> AuditQueryApi:
    """The Microsoft Graph audit log query client for ``config``."""
    from shared.audit.graph import GraphAuditClient

    return GraphAuditClient(config)


def build_search_api(config: AuditApiConfig) -> AuditSearchApi:
    """The Exchange ``Search-UnifiedAuditLog`` client for ``config``."""
    from shared.audit.exchange import ExchangeAuditClient

    return ExchangeAuditClient(config, session_cap=config.exchange_session_cap)


def build_feed_api(config: AuditApiConfig) -> ActivityFeedApi:
    """The Office 365 Management Activity API client for ``config``."""
    from shared.audit.feed import ActivityFeedClient

    return ActivityFeedClient(config)


__all__ = ["AuditApiConfig", "build_feed_api", "build_query_api", "build_search_api"]
