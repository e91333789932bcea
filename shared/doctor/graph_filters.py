"""Two Graph doctor checks that only read: which app roles narrow a query (``graph.scope``), and which name of the
service filter the tenant's service honours (``graph.filters``).

The service filter has two names and the evidence conflicts (docs/real-services.md, 2.2): the service metadata has
the collection ``serviceFilters``, the v1.0 create doc's example and production clients send the single-valued
``serviceFilter``. The collector sends both and checks every record anyway; this probe finds out which one the
tenant's service applies. It creates two more tiny queries over the doctor's 15-minute window, each with one name
and the service ``Exchange``, one after the other once the doctor's unfiltered query has finished: the service counts
every unfinished query against the tenant's limit, and the doctor holds one slot of the tenant budget, so it never
has more than one query unfinished. A filter is *honoured* when its query returned no record of another service
although the unfiltered query shows the window holds some, and *ignored* when it returned records of other services.
Each query takes a credit of the tenant's daily Graph quota before it is created, and one the service fails or loses
is submitted again like the doctor's own (``shared.doctor.resubmit``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shared.audit.http import AuditHttpClient
from shared.audit.ports import TimeWindow
from shared.doctor.model import Budget, ProbeResult, brief, differs, ok, skipped, warning
from shared.doctor.resubmit import SubmissionCredits, Submissions, credits
from shared.errors import CollectorError, PermanentApiError
from shared.records.rules import format_timestamp

SERVICE = "Exchange"
"""The service the probe filters on: the workload every Microsoft 365 tenant records most."""
FULL_ROLE = "AuditLogsQuery.Read.All"
_WORKLOADS = {
    "AuditLogsQuery-Exchange.Read.All": "Exchange",
    "AuditLogsQuery-SharePoint.Read.All": "SharePoint",
    "AuditLogsQuery-OneDrive.Read.All": "OneDrive",
    "AuditLogsQuery-Entra.Read.All": "Microsoft Entra",
    "AuditLogsQuery-Endpoint.Read.All": "Endpoint DLP",
    "AuditLogsQuery-CRM.Read.All": "Dynamics CRM",
}
"""Per-workload application roles (Graph docs: the audit query permissions "are classified at a Microsoft 365
service level", security-auditlogquery-list-records) and the service each one reads."""
_DONE = frozenset({"succeeded", "failed", "cancelled"})


def scope_result(roles: tuple[str, ...] | None) -> ProbeResult:
    """``graph.scope``: every workload (``AuditLogsQuery.Read.All``), or a warning naming what a query will miss."""
    probe = "graph.scope"
    if roles is None:
        return skipped(probe, "the token's roles are not readable here; check the app's Graph permissions by hand")
    if FULL_ROLE in roles:
        return ok(probe, f"the app holds {FULL_ROLE}: audit queries return every workload's records")
    narrow = [role for role in roles if role in _WORKLOADS]
    if not narrow:
        return skipped(probe, "the token carries no AuditLogsQuery role (see graph.permission)")
    services = " and ".join(_WORKLOADS[role] for role in narrow)
    return warning(
        probe,
        f"the app holds only {', '.join(narrow)}: audit queries return only {services} records, so every "
        "collection of this app misses the other workloads' records while its manifest says it is complete",
        f"grant the app the Microsoft Graph application permission {FULL_ROLE} (admin consent) if collections must "
        "cover every workload; keep the narrow permission only if that is intended",
    )


@dataclass
class ServiceFilterProbe:
    """``graph.filters``: one tiny query per name of the service filter, each created once the one before finished."""

    http: AuditHttpClient
    root: str
    window: TimeWindow
    budget: Budget
    sleep: Callable[[float], None]
    queries: dict[str, str] = field(default_factory=dict)
    """Filter name -> the id of its query."""
    refused: dict[str, str] = field(default_factory=dict)
    """Filter name -> why its create was refused."""
    credits: SubmissionCredits = field(default_factory=credits)
    given_up: list[str] = field(default_factory=list)
    """The ids of the queries the service failed or lost (submitted again, or not)."""

    def _create(self, name: str, tag: str, suffix: str = "") -> str | None:
        """Create the query filtered with ``name``; None when the service refused it (the reason kept)."""
        value: Any = [SERVICE] if name == "serviceFilters" else SERVICE
        body = {
            "displayName": f"ual-doctor-probe-{tag}-{name.lower()}{suffix}",
            "filterStartDateTime": format_timestamp(self.window.start),
            "filterEndDateTime": format_timestamp(self.window.end),
            name: value,
        }
        try:
            created = self.http.request_json("POST", self.root, json_body=body)
        except PermanentApiError as exc:
            if exc.dooms_collection:
                raise
            self.refused[name] = brief(exc)
            return None
        query_id = created.get("id") if created else None
        if isinstance(query_id, str) and query_id:
            self.queries[name] = query_id
            return query_id
        return None

    def finish(self, unfiltered: list[dict[str, Any]] | None, reserve: float) -> ProbeResult:
        """The verdict, given the records of the doctor's unfiltered query over the same window (None: unread)."""
        probe = "graph.filters"
        if unfiltered is None:
            return skipped(probe, "needs the records of the doctor's unfiltered query (graph.records)")
        others = {str(r.get("service")) for r in unfiltered if str(r.get("service")) != SERVICE}
        verdicts: list[str] = []
        tag = uuid.uuid4().hex[:12]
        for name in ("serviceFilter", "serviceFilters"):
            no_credit = self.credits.take()  # every query the doctor submits counts against the daily quota
            if no_credit is not None:
                verdicts.append(f"{name} was not probed ({no_credit})")
                continue
            query_id = self._create(name, tag)  # after the previous query finished (or was given up on)
            if name in self.refused:
                verdicts.append(f"{name} was refused ({self.refused[name]})")
                continue
            services, story = self._settled(name, tag, query_id, reserve)
            if services is None:
                verdicts.append(f"{name} could not be checked ({story or 'its query could not be read'})")
                continue
            if services - {SERVICE}:
                verdict = f"{name} was ignored (its query returned {', '.join(sorted(services - {SERVICE}))})"
            elif others:
                verdict = f"{name} was honoured"
            else:
                verdict = f"{name} could not be told apart (the window holds {SERVICE} records only)"
            verdicts.append(f"{verdict} ({story})" if story else verdict)
        done = f"a query filtered on service {SERVICE} over the doctor's window: {'; '.join(verdicts)}"
        if self.refused:
            return differs(
                probe,
                f"{done}. The collector sends both names, so this service would refuse every collection with "
                "filters.service: do not use that filter against this tenant",
            )
        return ok(
            probe,
            f"{done}. The collector sends both names and trims any record outside the request's filters, so either "
            "way its output is exact",
        )

    def _settled(self, name: str, tag: str, query_id: str | None, reserve: float) -> tuple[set[str] | None, str]:
        """The services of the filtered query's first page, the query submitted again when the service failed or
        lost it; and what the service did when it did (the story, "" when the first query was read)."""
        submissions = Submissions(self.credits)
        while True:
            services, ended = self._services(query_id, reserve)
            if ended == "pending":
                return None, submissions.story("did not finish in time") or "its query did not finish in time"
            if ended == "" or query_id is None:
                return services, submissions.story("succeeded" if services is not None else None)
            self.given_up.append(query_id)
            if not submissions.give_up(query_id, ended):
                return None, submissions.story()
            query_id = self._create(name, tag, submissions.suffix())
            if query_id is None:
                return None, submissions.story() + f"; submitting it again was refused ({self.refused.pop(name, '')})"

    def _services(self, query_id: str | None, reserve: float) -> tuple[set[str] | None, str]:
        """The services on the first records page of the query, once it has finished (None: not read), and how it
        ended when it was not read: "failed", "cancelled", "lost" (404), "pending" (not in time) or "" (read, or
        unreadable)."""
        if query_id is None:
            return None, ""
        url = f"{self.root}/{query_id}"
        interval = 1.0
        while True:
            try:
                status = self.http.request_json("GET", url, not_found_ok=True)
            except CollectorError:
                return None, ""
            if status is None:  # gone (404): the service lost it
                return None, "lost"
            state = str(status.get("status", "")).lower()
            if state in _DONE:
                break
            if self.budget.remaining() - interval <= reserve:
                return None, "pending"
            self.sleep(interval)
            interval = min(interval * 1.5, 10.0)
        if state != "succeeded":
            return None, state
        try:
            page = self.http.request_json("GET", f"{url}/records")
        except CollectorError:
            return None, ""
        items = (page or {}).get("value")
        services = {str(i.get("service")) for i in items if isinstance(i, dict)} if isinstance(items, list) else None
        return services, ""

    def leftover(self) -> list[str]:
        """The ids of the probe's queries, those given up on too (the doctor's DELETE step tries them too)."""
        return [*self.given_up, *self.queries.values()]
