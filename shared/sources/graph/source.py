"""The Graph source (Microsoft Graph audit log queries): its request rules, options, plan report, manifest fields and
lanes (``shared.sources.base.Source``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from shared.audit.config import CLOUD_NAMES, GLOBAL_CLOUD, cloud_of
from shared.audit.filter_check import FilterCheck, describe
from shared.models import Chunk, JsonDict, filters_from_json
from shared.requests.collection_spec import CollectionSpec
from shared.requests.validation import InvalidRequest
from shared.settings import Settings
from shared.sources.base import SourceDefaults, SourcePlan
from shared.sources.graph.lanes import QUERIES, GraphLanes
from shared.timeline.planning import smallest_interval_minutes
from shared.window.state import Carried


class GraphSource(SourceDefaults):
    """Asynchronous audit queries: a day per query by default, only in the global cloud, every filter."""

    name = "graph"
    status_key = QUERIES

    def default_interval_minutes(self, settings: Settings) -> int:
        """A day per query (``COLLECTOR_GRAPH_DEFAULT_INTERVAL_MINUTES``): a query holds up to 1,000,000 records and a
        tenant accepts a few hundred a day."""
        return settings.graph_default_interval_minutes

    def check_cloud(self, settings: Settings) -> None:
        """Refused outside the global cloud: the Graph ``auditLogQuery`` API exists only there (its docs list US
        Government L4/L5 and China as unavailable; the national clouds' v1.0 schemas have no ``auditLogQuery``)."""
        audit = settings.audit
        cloud = cloud_of(
            authority_host=audit.authority_host,
            graph_base_url=audit.graph_base_url,
            exchange_base_url=audit.exchange_base_url,
        )
        if cloud != GLOBAL_CLOUD:
            raise InvalidRequest(
                "source",
                "national_cloud",
                f"the graph source is not available in {CLOUD_NAMES.get(cloud, cloud)} (the configured endpoints): "
                "Graph audit log queries exist only in the global cloud; use source exchange",
            )

    def lanes(self, spec: CollectionSpec, state: Carried) -> GraphLanes:
        return GraphLanes(spec, state)

    def plan(self, *, chunks: int, settings: Settings, ranges: Sequence[Chunk], now: datetime) -> SourcePlan:
        """A chunk is one audit query submitted to the tenant (a split adds two more). Microsoft documents no daily
        limit for the audit query API, but community guides quote "at least 200 query submissions a day" per tenant
        (``COLLECTOR_GRAPH_DAILY_QUERIES``): a plan above it is answered with a warning and the interval that fits."""
        warnings: list[str] = []
        quota = settings.graph_daily_queries
        if chunks > quota:
            hint = ""
            if len(ranges) == 1:
                fitting = smallest_interval_minutes(ranges[0].start, ranges[0].end, quota)
                if fitting <= settings.max_interval_minutes:
                    hint = f"; intervalMinutes >= {fitting} plans at most {quota}"
            warnings.append(
                f"this plan submits {chunks} Graph audit queries (more if windows split), above the {quota} a day a "
                "tenant is assumed to accept (COLLECTOR_GRAPH_DAILY_QUERIES; community-quoted, not documented): "
                f"expect throttling or queries refused until the next day{hint}"
            )
        return SourcePlan({"graphQueries": chunks, "dailyQueryQuota": quota}, tuple(warnings))

    def manifest(self, payload: JsonDict) -> JsonDict:
        """Which filters each returned record was checked against (trimmed ones are ``filteredOut``) and which were
        trusted to the service; what became of the queries ("deleted" counts only queries the service confirmed
        with a 2xx; "leftOnService" ones were not asked to go (deletion off); "deleteUnsupported" ones were answered
        404; "deleteFailed" ones failed otherwise), and whether deletion was asked for."""
        filters = filters_from_json(payload.get("filters"))
        counts = payload.get(QUERIES)
        queries = None
        if isinstance(counts, dict):
            queries = {**counts, "deletion": "on" if payload.get("deleteQueries") else "off"}
        return {"filterCheck": describe(FilterCheck.of(filters), filters), QUERIES: queries}
