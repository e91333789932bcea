"""The Exchange source (``Search-UnifiedAuditLog`` through ``InvokeCommand``): its request rules, manifest fields and
lanes (``shared.sources.base.Source``)."""

from __future__ import annotations

from shared.audit.config import is_initial_domain
from shared.models import JsonDict
from shared.requests.collection_spec import CollectionSpec
from shared.requests.validation import InvalidRequest
from shared.settings import Settings
from shared.sources.base import SourceDefaults
from shared.sources.exchange.lanes import SIZING, ExchangeLanes
from shared.values import AuditFilters, is_tenant_guid
from shared.window.state import Carried

DEFAULT_INTERVAL_MINUTES = 60
"""Chunk length of a request that names none: a call returns at most 5,000 rows."""


class ExchangeSource(SourceDefaults):
    """Paged search sessions, call by call: an hour per chunk by default, one record type, no service filter."""

    name = "exchange"
    high_completeness = True
    status_key = SIZING

    def default_interval_minutes(self, settings: Settings) -> int:
        return DEFAULT_INTERVAL_MINUTES

    def check_tenant(self, tenant_id: str) -> None:
        """Exchange routes app-only calls by an anchor mailbox at the tenant's initial domain or its GUID (the forms
        public app-only clients send), so it needs one of them.

        A custom domain cannot be turned into either with the collector's permissions (Graph's /organization and
        tenantRelationships lookups need other permissions), so the request must name one.
        """
        if not (is_initial_domain(tenant_id) or is_tenant_guid(tenant_id)):
            raise InvalidRequest(
                "tenantId",
                "initial_domain",
                "with source exchange, tenantId must be the tenant's GUID (directory id) or its initial domain "
                "<name>.onmicrosoft.com (see the tenant's overview and domains in the Entra admin center): Exchange "
                "routes app-only calls by the X-AnchorMailbox APP:SystemMailbox{...}@<tenant GUID or initial domain>, "
                "which a custom domain does not give",
            )

    def check_filters(self, filters: AuditFilters) -> None:
        """Search-UnifiedAuditLog takes one record type and has no service parameter: a request with either is refused
        rather than collected unfiltered."""
        if len(filters.record_types) > 1:
            raise InvalidRequest("filters.recordTypes", "single_value", "the exchange source accepts one record type")
        if filters.service:
            raise InvalidRequest(
                "filters.service",
                "graph_only",
                "filters.service is a filter of the graph source only (Search-"
                "UnifiedAuditLog has no service parameter; use filters.recordTypes)",
            )

    def lanes(self, spec: CollectionSpec, state: Carried) -> ExchangeLanes:
        return ExchangeLanes(spec, state)

    def manifest(self, payload: JsonDict) -> JsonDict:
        """Calls, full calls, splits, pre-splits and confirmations the range needed (the window's tallies)."""
        return {SIZING: payload.get(SIZING)}
