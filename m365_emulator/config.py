"""Settings of the emulator: tenants, app registrations, API limits and fault knobs.

Everything is a plain dataclass so tests build configurations in code and the CLI builds them from JSON.
``FaultConfig`` is deliberately mutable: tests flip knobs between (or during) calls on a running emulator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from m365_emulator.feed_settings import FeedSettings
from m365_emulator.ingestion import IngestionSettings

GRAPH_SCOPE_RESOURCE = "https://graph.microsoft.com"
EXCHANGE_SCOPE_RESOURCE = "https://outlook.office365.com"
MANAGE_SCOPE_RESOURCE = "https://manage.office.com"
"""The Office 365 Management APIs' token audience (the Management Activity API, ``m365_emulator.feed_api``)."""
FEED_PERMISSION = "ActivityFeed.Read"
GRAPH_FULL_PERMISSION = "AuditLogsQuery.Read.All"
GRAPH_PERMISSIONS = frozenset(
    {
        GRAPH_FULL_PERMISSION,
        "AuditLogsQuery-Exchange.Read.All",
        "AuditLogsQuery-SharePoint.Read.All",
        "AuditLogsQuery-OneDrive.Read.All",
        "AuditLogsQuery-Endpoint.Read.All",
        "AuditLogsQuery-CRM.Read.All",
        "AuditLogsQuery-Entra.Read.All",
    }
)
GRAPH_WORKLOAD_PERMISSIONS = {
    "AuditLogsQuery-Exchange.Read.All": ("Exchange",),
    "AuditLogsQuery-SharePoint.Read.All": ("SharePoint",),
    "AuditLogsQuery-OneDrive.Read.All": ("OneDrive",),
    "AuditLogsQuery-Entra.Read.All": ("AzureActiveDirectory",),
    "AuditLogsQuery-Endpoint.Read.All": ("Endpoint",),
    "AuditLogsQuery-CRM.Read.All": ("CRM",),
}
"""The services (record ``service`` values) each per-workload Graph audit permission reads; the docs classify the
permissions "at a Microsoft 365 service level" (security-auditlogquery-list-records)."""
EXCHANGE_PERMISSION = "Exchange.ManageAsApp"
EXCHANGE_ROLE = "View-Only Audit Logs"

_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def is_guid(value: str) -> bool:
    return bool(_GUID.fullmatch(value))


def _aware(moment: datetime, name: str) -> datetime:
    if moment.tzinfo is None:
        raise ValueError(f"{name} must be timezone-aware")
    return moment.astimezone(UTC)


@dataclass(frozen=True)
class BurstWindow:
    """Hours whose start lies in [start, end) get ``multiplier`` times the tenant's hourly rate."""

    start: datetime
    end: datetime
    multiplier: float


@dataclass(frozen=True)
class TenantSpec:
    """A synthetic tenant. Every record is a pure function of (tenant_id, seed, hour)."""

    tenant_id: str
    domain: str = "contoso.onmicrosoft.com"
    seed: int = 1
    records_per_hour: float = 100.0
    bursts: tuple[BurstWindow, ...] = ()
    retention_start: datetime | None = None
    """No record exists before this moment (None = unbounded)."""
    user_count: int = 25
    auditing_enabled: bool = True
    """False: unified auditing is turned off in this tenant, and creating a Graph audit query answers 400
    ``UnknownError`` whose message is a JSON string with ``"Status":"AuditingDisabledTenant"``. Exchange is not
    affected (no evidence of what Search-UnifiedAuditLog answers then; see m365_emulator/README.md)."""

    def __post_init__(self) -> None:
        if not is_guid(self.tenant_id):
            raise ValueError(f"tenant_id must be a GUID, got {self.tenant_id!r}")
        if self.records_per_hour < 0:
            raise ValueError("records_per_hour must be >= 0")
        if self.user_count < 1:
            raise ValueError("user_count must be >= 1")
        if self.retention_start is not None:
            object.__setattr__(self, "retention_start", _aware(self.retention_start, "retention_start"))
        bursts = tuple(
            b if isinstance(b, BurstWindow) else BurstWindow(*b)  # accept plain (start, end, multiplier) tuples
            for b in self.bursts
        )
        object.__setattr__(self, "bursts", bursts)


@dataclass(frozen=True)
class AppRegistration:
    """An Entra app registration in one tenant, with its API permissions and Exchange role."""

    tenant_id: str
    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    certificate_pem: str | bytes | None = None
    """Public certificate (PEM) whose key signs client assertions; may also hold the key (ignored)."""
    graph_permissions: tuple[str, ...] = (GRAPH_FULL_PERMISSION,)
    exchange_manage_as_app: bool = True
    exchange_role: bool = True
    """True when the app's service principal holds an Exchange role that can run Search-UnifiedAuditLog."""
    feed_permissions: tuple[str, ...] = (FEED_PERMISSION,)
    """Roles of the app's Office 365 Management APIs tokens (the Management Activity API needs ``ActivityFeed.Read``;
    ``()`` is the "permission missing" failure)."""
    service_principal: bool = True
    """False: the registration has no service principal in the tenant (an app made with ``az ad app create``): the
    token endpoint answers 401 ``invalid_client`` AADSTS7000229 (``m365_emulator/tenant_steps.py``)."""
    admin_consent: bool = True
    """False: its application permissions were requested but never granted (no admin consent, no appRoleAssignment):
    tokens are issued without a ``roles`` claim, so Graph answers 403 and Exchange 403 (``tenant_steps.py``)."""


@dataclass
class GraphSettings:
    completion_delay_seconds: float = 0.2
    """Time from creation to a terminal status; the first 30 % of it is ``notStarted``."""
    completion_jitter_seconds: float = 0.0
    """Extra per-query latency in [0, jitter), a stable function of the query's window and displayName (so chunk
    latencies vary but a rerun sees the same ones)."""
    page_size: int = 1000
    max_page_size: int = 1000
    """``$top`` above this is clamped (the real page size is undocumented; ~1,000 is what tools observe)."""
    record_count_limit: int = 1_000_000
    bleed_fraction: float = 0.03
    """Extra records from just after the window end, as a fraction of the in-window count."""
    bleed_max_seconds: float = 36_000.0
    max_concurrent_queries: int = 10
    """Most *unfinished* (notStarted/queued/running) queries per tenant; finished ones never count."""
    concurrency_retry_after_seconds: int = 1
    daily_submission_quota: int = 200
    """Most queries created per tenant in any rolling 24 hours of the emulator's clock (``graph_quota``); a create
    beyond it is answered 429. 0 = no quota."""
    daily_quota_retry_after_seconds: int = 0
    """``Retry-After`` of that 429; 0 (default) sends none."""
    delete_supported: bool = False
    """False (default, as the service answers today): DELETE of a query is 404 "No HTTP resource was found ...";
    True: 204 and the query is gone."""
    list_filter: str = "refuse"
    """What the query list does with ``$filter``: "refuse" (400, default), "ignore" (every query) or "honour"
    (only ``displayName eq '...'``; another filter is a 400)."""
    list_page_size: int = 100
    """Queries per page of the list (then an ``@odata.nextLink``); oldest first."""
    reject_unknown_properties: bool = True
    """A create body property the auditLogQuery type does not have (``serviceFilter``) is a 400 (default); False
    ignores it, which is worse for a client: the filter silently does nothing. ``serviceFilter`` is a known property
    (production clients send it; the v1.0 create doc shows it): see ``service_filter``."""
    service_filter: str = "singular"
    """Which service filter property a create honours; both are accepted. "singular" (default: ``serviceFilter``, a
    string, honoured and the ``serviceFilters`` collection ignored), "plural" (the reverse), "both" or "neither"."""
    filter_leak_rate: float = 0.0
    """Share of the records a query's filters exclude that its pages return anyway (a stable draw per record): a
    service that does not apply its filters exactly. 0 by default: no evidence that the service does this."""
    narrow_to_permissions: bool = True
    """A token holding only per-workload ``AuditLogsQuery-<workload>.Read.All`` roles sees only the records of those
    workloads, silently (the query succeeds with fewer records). False: every record, whatever the role."""
    limit_flag: bool = False
    """Send ``isRecordCountLimitExceeded`` (False, default: the property is absent, as it was from the schema until
    September 2026; a capped query says so only by holding as many records as ``recordCountLimit``)."""
    send_record_count_limit: bool = True
    """Send ``recordCountLimit`` (False: a client must assume the documented 1,000,000)."""
    retry_after_on_429: bool = False
    """Send ``Retry-After`` with a 429 over ``max_concurrent_queries`` (False, default: none, as CIPP-API found)."""
    unknown_error_rate: float = 0.01
    """Share of calls answered 400 ``UnknownError`` (not auditing off); nothing was done (``graph_faults``)."""
    gateway_error_rate: float = 0.01
    """Share of calls answered 502/504 with an HTML page and no ``Retry-After``; nothing was done."""
    fail_rate: float = 0.05
    """Share of queries that end ``failed`` (a stable draw per display name and window): a client submits such a
    query again, a bounded number of times (CIPP re-plans failed searches). The rate is this emulator's assumption."""
    vanish_rate: float = 0.02
    """Share of queries gone (404, and from the list) once they would have finished."""
    stuck_rate: float = 0.02
    """Share of queries that stay ``running`` for good: a client gives up on one after a bound of its own (the
    collector after ``COLLECTOR_MAX_POLLS`` checks or four hours; its end-to-end hosts check every 0.2 s and give up
    after 40, the ``fast_polls`` convenience) and submits it again."""
    short_read_rate: float = 0.2
    """Share of succeeded queries whose first read of ``/records`` ends early (40-90 % of the records, no nextLink);
    later reads are whole."""

    def __post_init__(self) -> None:
        for name in ("unknown_error_rate", "gateway_error_rate", "fail_rate", "vanish_rate", "stuck_rate"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"graph.{name} must be in [0, 1)")
        if not 0.0 <= self.short_read_rate <= 1.0:
            raise ValueError("graph.short_read_rate must be in [0, 1]")
        if self.fail_rate + self.vanish_rate + self.stuck_rate >= 1.0:
            raise ValueError("graph.fail_rate + vanish_rate + stuck_rate must be < 1")


QUERY_OUTCOMES = frozenset({"succeeded", "failed", "vanished", "stuck", "cancelled"})
"""What a Graph query of the emulator becomes (``FaultConfig.query_outcomes``)."""
PAGE_SIZE_MODES = frozenset({"fixed", "mix"})
ANCHOR_ERRORS = frozenset({"routing_hint", "stale"})
ERROR_STYLES = frozenset({"cmdlet", "plain"})
SERVICE_FILTER_MODES = frozenset({"singular", "plural", "both", "neither"})
RESULT_COUNT_MODES = frozenset({"total", "capped", "size"})
SESSION_MODES = frozenset({"continue", "restart", "empty"})
MORE_RECORDS_MODES = frozenset({"absent", "present"})


@dataclass
class ExchangeSettings:
    max_result_size: int = 5000
    session_cap: int = 50_000
    max_concurrent_sessions: int = 3
    concurrency_retry_after_seconds: int = 1
    latency_seconds: float = 0.0
    """Time every InvokeCommand call takes (counted as in flight), plus ``latency_jitter_seconds``."""
    latency_jitter_seconds: float = 0.0
    """Extra per-call latency in [0, jitter), a stable function of the call's StartDate/EndDate (varied chunks)."""
    page_size: int = 1000
    """Rows per HTTP response; the rest of a cmdlet call's block follows through ``@odata.nextLink``. The service
    picks it: ``Prefer: odata.maxpagesize`` is not honoured (default 1,000, what public clients get)."""
    page_size_mode: str = "mix"
    """"mix" (default: each page 1,000, 5,000 or 1..5,000, a stable draw per page: sizes the client did not ask for)
    or "fixed" (every page ``page_size``)."""
    check_anchor: bool = True
    """Require ``X-AnchorMailbox: APP:SystemMailbox{bb558c35-...}@<tenant initial domain>``."""
    anchor_accepts_tenant_id: bool = True
    """Also accept the tenant GUID after the ``@`` (CIPP since 2025-02 and ExoHelper send it; no public report of it
    failing). False: only the initial domain routes."""
    anchor_domain: str | None = None
    """The domain the service routes the tenant by (None = the tenant's ``domain``). Another value makes every anchor
    a client derives from the tenant's domain wrong: the "wrong anchor mailbox" failure mode."""
    anchor_error: str = "routing_hint"
    """How a wrong anchor is answered: "routing_hint" (400 ErrorIncorrectRoutingHint) or "stale" (503
    MailboxInfoStale, the older answer)."""
    error_style: str = "cmdlet"
    """How a missing Exchange role is answered: "cmdlet" (400 "Error executing cmdlet", the reason only in
    ``error.details`` and ``innererror.internalException``) or "plain" (403 AccessDenied naming the role)."""
    result_count: str = "capped"
    """What ``ResultCount`` says (``exchange_sessions``): "total" (everything matched, the old service), "capped"
    (the smaller of ResultSize and the total) or "size" (the ResultSize asked, always)."""
    over_delivery: float = 0.06
    """The service believes the window holds this fraction fewer records than it delivers (and says so in
    ``ResultCount``): a session that over-delivers."""
    session_mode: str = "restart"
    """Later calls of a SessionId: "continue" (the next block), "restart" (from index 1 again) or "empty" (nothing)."""
    unsorted: bool = True
    """Rows in a stable shuffled order (neither by time nor by ResultIndex)."""
    unsorted_across_pages: bool = True
    """With ``unsorted``: a call's whole block is shuffled before it is cut into HTTP pages, so no page holds a
    contiguous run of ``ResultIndex`` (False: each page holds the next rows, shuffled within the page)."""
    false_answer_rate: float = 0.3
    """Share of windows whose first call answers falsely: no rows, or one bogus row (``ResultIndex`` -1), as a
    server timeout does. Drawn once per window (StartDate, EndDate, RecordType and filters): the first call any
    session makes for it. The session is left as it was (its next call hands out its first block)."""
    false_bogus_share: float = 0.5
    """Of the false answers, the share that is a bogus row rather than an empty list."""
    false_repeat_rate: float = 0.0
    """Share of *later* first calls (fresh sessions) for a window already asked that answer falsely too (0 by
    default: the public reports say a re-run returns the rows)."""
    cancel_warning_rate: float = 0.01
    """Share of calls and nextLink pages answered 200 with no rows and a "task was canceled" warning."""
    transient_400_rate: float = 0.01
    """Share of calls and nextLink pages answered 400 naming a transient exception (CmdletProxyNotAvailableFailure,
    ServerBusyException, TransientException, BackendCommunicationException)."""
    more_records_available: str = "absent"
    """"present": every page carries ``AuditSearchRequestMetadata.moreRecordsAvailable``; "absent": never."""
    high_completeness: bool = True
    """The tenant accepts ``-HighCompleteness`` (False: the parameter is refused with PowerShell's "A parameter cannot
    be found" 400; the docs say the switch "isn't available in all organizations")."""

    def __post_init__(self) -> None:
        choices = {
            "page_size_mode": PAGE_SIZE_MODES,
            "anchor_error": ANCHOR_ERRORS,
            "error_style": ERROR_STYLES,
            "result_count": RESULT_COUNT_MODES,
            "session_mode": SESSION_MODES,
            "more_records_available": MORE_RECORDS_MODES,
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"exchange.{name} must be one of {sorted(allowed)}, got {getattr(self, name)!r}")
        for name in (
            "over_delivery",
            "cancel_warning_rate",
            "transient_400_rate",
            "false_answer_rate",
            "false_repeat_rate",
        ):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"exchange.{name} must be in [0, 1)")
        if not 0.0 <= self.false_bogus_share <= 1.0:
            raise ValueError("exchange.false_bogus_share must be in [0, 1]")


@dataclass
class FaultConfig:
    """Injected faults. Mutable at runtime; random draws come from one RNG seeded with ``seed``."""

    seed: int = 0
    rate_429: float = 0.0
    rate_5xx: float = 0.0
    retry_after_seconds: int = 1
    """Retry-After sent with injected 429s (and with 503s when ``retry_after_on_5xx``)."""
    retry_after_on_5xx: bool = True
    slow_page_seconds: float = 0.0
    """Extra latency added to every records page (Graph) and every InvokeCommand call (Exchange)."""
    malformed_rate: float = 0.0
    malformed_record_ids: frozenset[str] = frozenset()
    broken_page_rate: float = 0.02
    """Fraction of re-readable record pages (Graph ``records`` pages, InvokeCommand ``nextLink`` pages) served as
    broken JSON (the closing brace missing); a stable draw per page and read, so a re-read usually succeeds."""
    transient_403_count: int = 0
    """The next N API calls answer a transient 403 (not a permission problem); counts down to 0."""
    stuck_query: bool = False
    fail_query: bool = False
    cancel_query: bool = False
    queued_status: bool = False
    """Queries report ``queued`` (instead of ``notStarted``) before running."""
    fail_query_windows: tuple[tuple[datetime, datetime], ...] = ()
    """Graph queries whose [filterStart, filterEnd) overlaps one of these windows end ``failed`` (a chunk that
    fails permanently while the others succeed); Exchange calls over such a window answer 400."""
    fail_query_message: str = "The search could not be completed for this date range."
    """The error message of that Exchange 400: service text reaches failure reasons, so tests can put markup in it
    to check that pages show it as text."""
    query_outcomes: tuple[str, ...] = ()
    """What the next Graph queries created become, one per create in order ("succeeded", "failed", "vanished",
    "stuck" or "cancelled"), consumed as they are created (a create refused 429 takes none): a test decides that the
    first query fails and the one submitted again succeeds, whatever the names' draws. Empty: the knobs above and the
    rates decide."""
    create_then_5xx_count: int = 0
    """The next N Graph create calls create the query and then answer 503 (a lost response); counts down to 0."""
    deny_graph_methods: frozenset[str] = frozenset()
    """Graph calls with these HTTP methods answer a permanent 403 (Authorization_RequestDenied), as when a permission
    or role is withdrawn for some operations mid-run (e.g. {"GET"}: polls and pages denied, deletes still allowed)."""
    apis: frozenset[str] = frozenset({"graph", "exchange"})
    """Which APIs the random 429/5xx/403 faults apply to."""

    def __post_init__(self) -> None:
        self.query_outcomes = tuple(self.query_outcomes)
        unknown = sorted(set(self.query_outcomes) - QUERY_OUTCOMES)
        if unknown:
            raise ValueError(f"faults.query_outcomes: {unknown} not among {sorted(QUERY_OUTCOMES)}")


@dataclass
class EmulatorConfig:
    tenants: list[TenantSpec] = field(default_factory=list)
    graph: GraphSettings = field(default_factory=GraphSettings)
    exchange: ExchangeSettings = field(default_factory=ExchangeSettings)
    faults: FaultConfig = field(default_factory=FaultConfig)
    ingestion: IngestionSettings = field(default_factory=IngestionSettings)
    """When records become searchable (late records); ``IngestionSettings.immediate()`` for at once."""
    feed: FeedSettings = field(default_factory=FeedSettings)
    """The Office 365 Management Activity API (``m365_emulator.feed_settings``)."""
    token_lifetime_seconds: int = 3599
    host: str = "127.0.0.1"
    port: int = 0
    apps: list[AppRegistration] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EmulatorConfig:
        """Build from a JSON document shaped like the dataclasses (datetimes as ISO-8601 strings)."""

        def when(value: str) -> datetime:
            return _aware(datetime.fromisoformat(value), "datetime")

        tenants = []
        for raw in data.get("tenants", []):
            spec = dict(raw)
            if spec.get("retention_start"):
                spec["retention_start"] = when(spec["retention_start"])
            spec["bursts"] = tuple(BurstWindow(when(s), when(e), float(m)) for s, e, m in spec.get("bursts", []))
            tenants.append(TenantSpec(**spec))
        apps = []
        for raw in data.get("apps", []):
            app = dict(raw)
            for key in ("graph_permissions", "feed_permissions"):
                if key in app:
                    app[key] = tuple(app[key])
            apps.append(AppRegistration(**app))
        faults = dict(data.get("faults", {}))
        for key in ("malformed_record_ids", "apis", "deny_graph_methods"):
            if key in faults:
                faults[key] = frozenset(faults[key])
        if "fail_query_windows" in faults:
            faults["fail_query_windows"] = tuple((when(s), when(e)) for s, e in faults["fail_query_windows"])
        return cls(
            tenants=tenants,
            graph=GraphSettings(**data.get("graph", {})),
            exchange=ExchangeSettings(**data.get("exchange", {})),
            faults=FaultConfig(**faults),
            ingestion=IngestionSettings(**data.get("ingestion", {})),
            feed=FeedSettings(**data.get("feed", {})),
            token_lifetime_seconds=int(data.get("token_lifetime_seconds", 3599)),
            host=str(data.get("host", "127.0.0.1")),
            port=int(data.get("port", 0)),
            apps=apps,
        )
