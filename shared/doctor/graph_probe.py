"""Graph audit log query probes: token and its scope, permission, whether auditing is on, one tiny query (create,
poll, one page, list by name, DELETE), and which name of the service filter the service honours.

The query covers the last 15 minutes and is named ``ual-doctor-probe-<hex>``, which no collection query can be
(collection queries are named ``ual-<collection>-<start>-<end>`` and matched on their window too). Its create is the
auditing probe: a tenant with auditing off refuses it (``AuditingDisabledTenant``). Beside it the service-filter probe
creates two more tiny queries over the same window (``shared.doctor.graph_filters``). They are the only things the
doctor creates on the service; they are deleted at the end when the service allows it, else the result says they
stay (finished queries do not count against the tenant's limit of queries running at once).

The run is split in two (:meth:`GraphProbe.start`, :meth:`GraphProbe.finish`) so the Exchange probes can run while
the service works on the query. A query the service fails or loses (404) is submitted again under a name of its own,
twice at most, each time with a credit of the tenant's daily quota, and ``graph.query`` says what the service did
(``shared.doctor.resubmit``).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from shared.audit.auth import token_provider_for
from shared.audit.config import AuditApiConfig
from shared.audit.graph import GRAPH_API, GraphAuditClient
from shared.audit.http import AuditHttpClient, http_client_for
from shared.audit.ports import AuditFilters, QueryState, QueryStatus, TimeWindow
from shared.doctor.fixes import GRAPH_PERMISSION_FIX, failure
from shared.doctor.graph_filters import ServiceFilterProbe, scope_result
from shared.doctor.model import Budget, ProbeResult, brief, differs, failed, ok, skipped
from shared.doctor.resubmit import Submissions
from shared.doctor.tenant_probe import TokenOutcome
from shared.doctor.tokens import probe_token
from shared.errors import AuditingDisabledError, CollectorError, PermanentApiError, QueryFailedError

WINDOW = timedelta(minutes=15)
WINDOW_LAG = timedelta(hours=2)
"""The doctor's window ends this long before now: audit records typically become searchable 60 to 90 minutes after
the event (shared.timeline.latency), so a window ending now is nearly empty on a real tenant, and the probes that
compare records (graph.records, graph.filters) would have nothing to compare."""
POLL_LIMIT_SECONDS = 240.0
"""Longest the doctor waits for its query (the service often takes minutes; a longer wait is the user's call)."""
FINISH_RESERVE_SECONDS = 20.0
"""Kept back from polling for the list and DELETE calls that follow it."""
_KNOWN_STATUSES = frozenset({"notstarted", "queued", "running", "succeeded", "failed", "cancelled"})


GRAPH_PROBES = (
    "graph.token",
    "graph.scope",
    "graph.permission",
    "graph.auditing",
    "graph.query",
    "graph.records",
    "graph.filters",
    "graph.list",
    "graph.delete",
)
"""The Graph source's probes, in the order they are reported."""
GRAPH_ROLE_PREFIX = "AuditLogsQuery"


def close_pages(pages: object) -> None:
    """Stops a page generator early (the port types it as an iterator; the adapters' are generators)."""
    close = getattr(pages, "close", None)
    if callable(close):
        close()


def _short(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class GraphProbe:
    config: AuditApiConfig
    budget: Budget
    now: Callable[[], datetime]
    sleep: Callable[[float], None] = time.sleep
    results: dict[str, ProbeResult] = field(default_factory=dict)
    _client: GraphAuditClient | None = None
    _http: AuditHttpClient | None = None
    _query_id: str | None = None
    _window: TimeWindow | None = None
    _name: str = ""
    """The display name of the current query (the first one's, then ``-r1``, ``-r2`` for those submitted again)."""
    _first_name: str = ""
    _submissions: Submissions = field(default_factory=Submissions)
    _roles_note: str = ""
    token_roles: tuple[str, ...] | None = None
    """The application roles of the Graph token (None: no token, or its claims were not readable)."""
    _filters: ServiceFilterProbe | None = None
    _records: list[dict[str, Any]] | None = None
    """The first records page of the doctor's unfiltered query (what the service-filter probe compares with)."""

    @property
    def _endpoint(self) -> str:
        return self.config.graph_base_url

    def _fail(self, probe: str, exc: CollectorError) -> ProbeResult:
        fix = GRAPH_PERMISSION_FIX + self._roles_note
        return failure(probe, exc, endpoint=self._endpoint, endpoint_setting="AUDIT_GRAPH_BASE_URL", permission_fix=fix)

    def _skip_rest(self, why: str) -> None:
        for probe in GRAPH_PROBES:
            self.results.setdefault(probe, skipped(probe, why))

    # --- before the Exchange probes ------------------------------------------------------------------------------
    def start(self) -> None:
        tokens = token_provider_for(self.config)
        result, facts = probe_token(
            "graph.token",
            tokens,
            self.config.graph_scope,
            authority=self.config.authority_host,
            wanted="AuditLogsQuery",
        )
        self.results["graph.token"] = result
        self.token_roles = facts.roles if facts is not None else None
        if facts is not None and facts.roles is not None:
            self._roles_note = f" (the token's roles: {', '.join(facts.roles) or 'none'})"
        if result.outcome.value != "ok":
            self._skip_rest("needs graph.token, which failed")
            return
        self.results["graph.scope"] = scope_result(facts.roles if facts is not None else None)
        self._client = GraphAuditClient(self.config, tokens=tokens)
        self._http = http_client_for(self.config, tokens, GRAPH_API)
        root = f"{self.config.graph_root}/security/auditLog/queries"
        try:
            listed = self._http.request_json("GET", root)
        except CollectorError as exc:
            self.results["graph.permission"] = self._fail("graph.permission", exc)
            self._skip_rest("needs graph.permission, which failed")
            return
        items = listed.get("value") if listed else None
        count = len(items) if isinstance(items, list) else 0
        self.results["graph.permission"] = ok(
            "graph.permission", f"listed audit log queries ({count} on the first page): the app may read them"
        )
        if self.budget.exhausted(FINISH_RESERVE_SECONDS):
            self._skip_rest(self.budget.why_skipped())
            return
        end = self.now().replace(microsecond=0) - WINDOW_LAG
        self._window = TimeWindow(end - WINDOW, end)
        self._name = self._first_name = f"ual-doctor-probe-{uuid.uuid4().hex[:12]}"
        try:
            self._query_id = self._client.create_query(self._window, AuditFilters(), display_name=self._name)
        except AuditingDisabledError as exc:
            self.results["graph.auditing"] = self._fail("graph.auditing", exc)
            self._skip_rest("needs graph.auditing, which failed")
            return
        except CollectorError as exc:
            self.results["graph.query"] = self._fail("graph.query", exc)
            self.results["graph.auditing"] = skipped(
                "graph.auditing", "the doctor's query was not created (graph.query)"
            )
            self._skip_rest("needs graph.query, which failed")
            return
        self.results["graph.auditing"] = ok(
            "graph.auditing", "unified auditing is on: the service accepted an audit query (a tenant with auditing "
            "off refuses it with AuditingDisabledTenant)",
        )  # fmt: skip
        self._filters = ServiceFilterProbe(self._http, root, self._window, self.budget, self.sleep)

    # --- after them ----------------------------------------------------------------------------------------------
    def finish(self) -> None:
        if self._query_id is None or self._client is None or self._window is None:
            self._skip_rest("needs graph.query")
            self._close()
            return
        try:
            status = self._poll()
            if status is not None:
                if status.state is QueryState.SUCCEEDED:
                    self.results["graph.records"] = self._read_one_page()
                if self._filters is not None and "graph.filters" not in self.results:
                    try:
                        self.results["graph.filters"] = self._filters.finish(self._records, FINISH_RESERVE_SECONDS / 2)
                    except CollectorError as exc:
                        self.results["graph.filters"] = self._fail("graph.filters", exc)
                if self.budget.exhausted(FINISH_RESERVE_SECONDS / 2):
                    self.results["graph.list"] = skipped("graph.list", self.budget.why_skipped())
                else:
                    self.results["graph.list"] = self._list_by_name()
        finally:
            self.results["graph.delete"] = self._delete()  # always: it is the clean-up
            self._skip_rest("needs graph.query, which failed")
            self._close()

    def _close(self) -> None:
        for client in (self._client, self._http):
            if client is not None:
                client.close()

    def _what(self) -> str:
        assert self._window is not None
        span = f"{_short(self._window.start)}..{_short(self._window.end)}"
        return f"created query {self._query_id} '{self._name}' over {span}"

    def _poll(self) -> QueryStatus | None:
        assert self._client is not None and self._query_id is not None and self._window is not None
        started = self.budget.elapsed()
        limit = min(POLL_LIMIT_SECONDS, self.budget.remaining() - FINISH_RESERVE_SECONDS)
        interval = 1.0
        while True:
            try:
                status = self._client.get_query(self._query_id)
            except QueryFailedError:  # gone (404) once it would have finished: the service lost it
                if self._again("lost"):
                    interval = 1.0
                    continue
                self._given_up("is gone (404 when checked)", "the query was lost")
                return None
            except CollectorError as exc:
                self.results["graph.query"] = self._fail("graph.query", exc)
                return None
            waited = self.budget.elapsed() - started
            if status.state in (QueryState.FAILED, QueryState.CANCELLED):
                if self._again(status.raw_status.lower()):
                    interval = 1.0
                    continue
                self._given_up(f"the service reports it {status.raw_status}", f"the query ended {status.raw_status}")
                return status
            if status.state is not QueryState.PENDING:
                break
            if waited + interval > limit:
                self.results["graph.query"] = ok(
                    "graph.query",
                    f"{self._what()}; still {status.raw_status} after {waited:.0f} s (the doctor stops waiting)"
                    + self._story(),
                )
                self.results["graph.records"] = skipped(
                    "graph.records",
                    f"the query did not finish within {waited:.0f} s; queries can take minutes: give a longer "
                    "--timeout / timeoutSeconds to read a page",
                )
                return status
            self.sleep(interval)
            interval = min(interval * 1.5, 10.0)
        raw = status.raw_status
        approx = status.approximate_record_count
        self.results["graph.query"] = ok(
            "graph.query",
            f"{self._what()}; {raw} after {waited:.0f} s"
            + (f" (about {approx:,} records)" if approx is not None else "")
            + ("" if raw.lower() in _KNOWN_STATUSES else f"; status {raw!r} is not one the collector knows")
            + self._story("succeeded"),
        )
        return status

    def _story(self, last: str | None = None) -> str:
        story = self._submissions.story(last)
        return f"; {story}" if story else ""

    def _again(self, what: str) -> bool:
        """The current query is given up on (the service ``what`` it): submit it again under a name of its own
        when the bound and the quota allow; True when a new query is the current one."""
        assert self._client is not None and self._query_id is not None and self._window is not None
        if not self._submissions.give_up(self._query_id, what):
            return False
        name = self._first_name + self._submissions.suffix()
        try:
            query_id = self._client.create_query(self._window, AuditFilters(), display_name=name)
        except CollectorError as exc:
            self._submissions.refused = f"submitting it again failed ({brief(exc)})"
            return False
        self._query_id, self._name = query_id, name
        return True

    def _given_up(self, said: str, records_why: str) -> None:
        """``graph.query`` failed: the service failed or lost every query the doctor submitted."""
        self.results["graph.query"] = failed(
            "graph.query",
            f"{self._what()}; {said}{self._story()}",
            "check that auditing is on in the tenant (Microsoft Purview portal -> Audit) and run the doctor again "
            "(the service fails or loses some queries; the collector submits such a query again, twice at most)",
        )
        self.results["graph.records"] = skipped("graph.records", records_why)

    def _read_one_page(self) -> ProbeResult:
        assert self._client is not None and self._query_id is not None and self._window is not None
        pages = self._client.iter_record_pages(self._query_id)
        try:
            page = next(pages, None)
        except CollectorError as exc:
            return self._fail("graph.records", exc)
        finally:
            close_pages(pages)
        if page is None:
            return differs("graph.records", "the records of a succeeded query gave no page at all")
        self._records = page.records
        inside = sum(1 for r in page.records if self._inside(r))
        detail = (
            f"read the first records page: {len(page.records):,} records, {inside:,} inside the query's window "
            f"(the rest is the service's usual spill-over, trimmed by the collector)"
        )
        if page.malformed:
            detail += f"; {len(page.malformed)} malformed (the collector quarantines them)"
        return ok("graph.records", detail)

    def _inside(self, record: dict[str, Any]) -> bool:
        assert self._window is not None
        text = record.get("createdDateTime")
        try:
            moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
        except ValueError:
            return False
        return moment.tzinfo is not None and self._window.contains(moment)

    def _names(self, display_name: str) -> list[str]:
        """The displayNames on the first page of the list filtered by ``display_name``."""
        assert self._http is not None
        root = f"{self.config.graph_root}/security/auditLog/queries"
        escaped = display_name.replace("'", "''")
        body = self._http.request_json("GET", root, params={"$filter": f"displayName eq '{escaped}'"})
        items = body.get("value") if body else None
        return [str(i.get("displayName")) for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    def _list_by_name(self) -> ProbeResult:
        assert self._client is not None and self._window is not None
        try:
            try:
                ours = self._names(self._name)
            except PermanentApiError as exc:
                if exc.status != 400 or exc.dooms_collection:
                    raise
                how = f"refused (400: {brief(exc)})"
            else:
                others = self._names(f"{self._name}-absent")
                if others:
                    how = "ignored (a name no query has listed other queries)"
                elif self._name in ours:
                    how = "honoured"
                else:
                    return differs(
                        "graph.list",
                        f"$filter=displayName eq '{self._name}' listed no query, right after creating one by that name",
                    )
            found = self._client.find_query(self._window, display_name=self._name)
        except CollectorError as exc:
            return self._fail("graph.list", exc)
        if found != self._query_id:
            return differs(
                "graph.list",
                f"$filter was {how}, and the collector's look-up by name did not find the query it created "
                f"(found {found!r}): a lost create response could make it create a second query",
            )
        return ok(
            "graph.list",
            f"$filter=displayName was {how}; the collector's look-up by name (bounded pages, names matched by the "
            "collector itself) found the query",
        )

    def _delete(self) -> ProbeResult:
        assert self._client is not None and self._query_id is not None
        extra = self._filters.leftover() if self._filters is not None else []
        given_up = self._submissions.given_up_ids
        for query_id in [*given_up, *extra]:  # the doctor's other queries go (or stay) the way the main one does
            with contextlib.suppress(CollectorError):
                self._client.delete_query(query_id)
        left = f"query '{self._name}' ({self._query_id}) stays on the service"
        if given_up:
            left += f", as do the {len(given_up)} given up on"
        if extra:
            left += f", as do the {len(extra)} queries of graph.filters"
        try:
            outcome = self._client.delete_query(self._query_id)
        except CollectorError as exc:
            return differs("graph.delete", f"DELETE answered neither 2xx nor 404 ({brief(exc)}); {left}")
        if outcome.deleted:
            return ok(
                "graph.delete",
                "DELETE answered 2xx: the query was deleted (the service supports deletion today; "
                "COLLECTOR_DELETE_QUERIES=true would remove each chunk's query)",
            )
        return ok(
            "graph.delete",
            f"DELETE unsupported ({brief(outcome.detail)}); {left} (finished queries do not count against the tenant's "
            "limit of running queries; keep COLLECTOR_DELETE_QUERIES off)",
        )


class GraphDoctor(GraphProbe):
    """The Graph probes as the doctor runs every source's (``shared.doctor.sources.SourceDoctor``): the token and the
    tiny query's creation before the other sources' probes, the rest after them (the service works on the query
    meanwhile)."""

    def begin(self) -> None:
        self.start()

    def end(self) -> None:
        self.finish()

    def sign_in(self) -> TokenOutcome | None:
        roles = self.token_roles
        granted = roles is None or any(r.startswith(GRAPH_ROLE_PREFIX) for r in roles)
        return TokenOutcome(
            self.results["graph.token"], roles, None if granted else "Microsoft Graph AuditLogsQuery.Read.All"
        )

    def tenant_step(self, client_id: str, states: list[str]) -> ProbeResult | None:
        return None


def graph_doctor(
    config: AuditApiConfig, budget: Budget, now: Callable[[], datetime], sleep: Callable[[float], None]
) -> GraphDoctor:
    return GraphDoctor(config, budget, now, sleep)
