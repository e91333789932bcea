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
from shared.sources.base import FollowLoad, SourceDefaults, SourcePlan
from shared.sources.graph import submissions
from shared.sources.graph.lanes import QUERIES, GraphLanes
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

    def plan(
        self,
        *,
        chunks: int,
        settings: Settings,
        ranges: Sequence[Chunk],
        now: datetime,
        interval_minutes: int | None = None,
        quota: JsonDict | None = None,
        settle: bool = False,
    ) -> SourcePlan:
        """A chunk is one audit query submitted to the tenant (a split adds two more, a settle pass one per window it
        reads again): the submissions against the tenant's daily quota (``shared.sources.graph.submissions``), with a
        warning when the plan will wait for it."""
        reread = submissions.rereads(ranges, interval_minutes, now) if settle else 0
        planned = submissions.submissions(chunks + reread, reread, settings, quota)
        warnings = (submissions.quota_warning(planned, ranges, settings),) if planned["waits"] else ()
        fields = {"graphQueries": chunks, "dailyQueryQuota": settings.graph_daily_queries, "submissions": planned}
        return SourcePlan(fields, warnings)

    def follow_default(self, settings: Settings) -> int:
        return submissions.follow_default(settings)

    def follow_refusal(self, settings: Settings, interval_minutes: int, load: FollowLoad | None = None) -> str | None:
        return submissions.follow_refusal(settings, interval_minutes, load)

    def follow_plan(
        self, settings: Settings, interval_minutes: int, quota: JsonDict | None, load: FollowLoad | None = None
    ) -> SourcePlan:
        fields, warnings = submissions.follow_plan(settings, interval_minutes, quota, load)
        return SourcePlan(fields, tuple(warnings))

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
