"""The collector's settings: one frozen object built once at the edge from the environment.

On Azure, app settings (including Key Vault references, which resolve into the same variables) arrive as environment
variables; locally ``local.settings.json`` or the local host provides them. Nothing else reads ``os.environ``.
Secrets are kept out of ``repr`` and never logged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from shared.budget.token import collection_token
from shared.budget.wire import BudgetOptions
from shared.errors import ConfigError
from shared.hosting import platform as hosting
from shared.models import SOURCES
from shared.values import is_tenant_guid

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class AuditSettings:
    """Tenant-independent audit API settings (``AUDIT_*``); the tenant comes with each request."""

    client_id: str = ""
    client_secret: str | None = field(default=None, repr=False)
    certificate: str | None = field(default=None, repr=False)
    certificate_path: str | None = None
    certificate_password: str | None = field(default=None, repr=False)
    certificate_thumbprint: str | None = None
    authority_host: str = "https://login.microsoftonline.com"
    graph_base_url: str = "https://graph.microsoft.com"
    graph_api_version: str = "beta"
    exchange_base_url: str = "https://outlook.office365.com"
    ca_bundle: str | None = None
    http_timeout_seconds: float = 60.0
    page_size: int = 1000
    max_attempts: int = 6
    max_retry_wait_seconds: float = 120.0
    transient_403_attempts: int = 3
    exchange_session_cap: int = 50_000
    feed_base_url: str = "https://manage.office.com"
    feed_publisher_id: str | None = None

    def config_kwargs(self, tenant_id: str) -> dict[str, Any]:
        """Keyword arguments for ``shared.audit.config.AuditApiConfig`` for one tenant."""
        return {
            "tenant_id": tenant_id,
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            "certificate": self.certificate,
            "certificate_path": self.certificate_path,
            "certificate_password": self.certificate_password,
            "certificate_thumbprint": self.certificate_thumbprint,
            "authority_host": self.authority_host,
            "graph_base_url": self.graph_base_url,
            "graph_api_version": self.graph_api_version,
            "exchange_base_url": self.exchange_base_url,
            "ca_bundle": self.ca_bundle,
            "http_timeout_seconds": self.http_timeout_seconds,
            "page_size": self.page_size,
            "max_attempts": self.max_attempts,
            "max_retry_wait_seconds": self.max_retry_wait_seconds,
            "transient_403_attempts": self.transient_403_attempts,
            "exchange_session_cap": self.exchange_session_cap,
            "feed_base_url": self.feed_base_url,
            "feed_publisher_id": self.feed_publisher_id,
        }


TASK_HUB_SETTING = "TASKHUB_NAME"
"""host.json's ``hubName`` is ``%TASKHUB_NAME%``: each app (or slot) on one storage account needs its own."""
DEFAULT_TASK_HUB = "UalCollector"
"""What every local start sets (local.settings.json.example, run-local, the tests' hosts) and the template's default."""

PLATFORM_SETTINGS = hosting.PLATFORM_SETTINGS
"""Set by Azure or the local host, never by users: how the app knows where it runs (``shared.hosting.platform``)."""

FOLLOW_PURGE_SCHEDULE_SETTING = "COLLECTOR_FOLLOW_PURGE_SCHEDULE"
DEFAULT_FOLLOW_PURGE_SCHEDULE = "0 */15 * * * *"


def follow_purge_schedule(env: Mapping[str, str]) -> str:
    """The NCRONTAB schedule of the timer that purges followers' finished passes. A timer's schedule is fixed when the
    app is indexed, so it is read then (not with ``Settings``, which is built per call); the host refuses a bad one
    ("The 'follow_passes_purge' function is in error")."""
    return env.get(FOLLOW_PURGE_SCHEDULE_SETTING, "").strip() or DEFAULT_FOLLOW_PURGE_SCHEDULE


BUDGET_KEY_SETTING = "COLLECTOR_BUDGET_SECRET"
BUDGET_KEY_CHARS = 32


@dataclass(frozen=True, slots=True)
class Settings:
    """Every collector setting with its documented default (environment variable names in ``from_env``)."""

    audit: AuditSettings = field(default_factory=AuditSettings)
    task_hub: str = DEFAULT_TASK_HUB
    """The Durable task hub (``TASKHUB_NAME``, read by the host through host.json; checked here so doctor names it)."""
    default_source: str = "graph"
    output_connection_string: str | None = field(default=None, repr=False)
    output_account_url: str | None = None
    output_folder: str | None = None
    output_container: str = "ual-output"
    default_concurrency: int = 3
    max_concurrency: int = 10
    max_chunks: int = 10_000
    min_interval_minutes: int = 1
    max_interval_minutes: int = 7 * 24 * 60
    retention_days: int = 180
    """How long the tenant is sure to keep every audit record (Audit Standard: 180 days). Windows older than this
    when they are collected are flagged possibly partial (``shared.timeline.retention``); set it to what the tenant's
    retention policies guarantee for all records."""
    max_lookback_days: int = 3650
    """Oldest ``startDate`` accepted (and the oldest window ``retry-failed`` retries): 10 years, the longest audit
    retention Microsoft sells (the Audit Premium 10-year add-on). What lies between ``retention_days`` and this
    depends on licences and policies the collector cannot see: collected and flagged, never refused."""
    graph_default_interval_minutes: int = 1440
    """Chunk length of a Graph collection whose request names no ``intervalMinutes``: a day per query (a query holds
    up to 1,000,000 records, so a month is 30 queries, not 720)."""
    graph_daily_queries: int = 200
    """Graph audit query submissions a tenant accepts per rolling 24 hours, shared with every other tool of the
    tenant (documented baseline: at least 200, learn.microsoft.com/graph/throttling-limits). The tenant budget keeps
    the collector's submissions within it less ``graph_daily_reserve``: a lane that would exceed it waits."""
    graph_daily_reserve: int = 50
    """Of ``graph_daily_queries``, the submissions per rolling 24 hours the collector leaves to the tenant's other
    tools (the Purview portal, other collectors, CIPP): the collector itself submits at most the rest."""
    min_split_seconds: int = 60
    poll_interval_seconds: float = 30.0
    """First status check of a Graph query before the collection has learned how long its queries run."""
    poll_min_interval_seconds: float = 10.0
    poll_fraction: float = 0.1
    """Next status check after this fraction of the time the query has run (so it is noticed at most that late)."""
    poll_max_interval_seconds: float = 300.0
    max_polls: int = 240
    chunks_per_execution: int = 20
    max_attempts: int = 4
    retry_base_seconds: float = 15.0
    retry_max_seconds: float = 600.0
    max_filter_values: int = 50
    max_records_per_chunk: int = 0
    """Split a Graph chunk whose query reports more records than this (0 = only at the source's cap), so one
    export activity stays within functionTimeout (10 minutes on the Consumption plan)."""
    delete_queries: bool = False
    """DELETE each Graph audit query once its chunk is decided. Off by default: the service answers 404 today."""
    follow_every_minutes: int = 15
    """How often a follower wakes by default, and its default window size (``POST /api/follows``)."""
    follow_delay_minutes: int = 90
    """A follower reads a window first once it closed this long ago: the service's usual delay (availability is
    "typically 60 to 90 minutes"), so a first read is not mostly empty."""
    follow_purge_passes: bool = True
    """Purge a follower's finished pass instances (status and history; the output stays) once their day is final
    (``http_api.follow_purge``, on the timer ``follow_passes_purge``)."""
    follow_purge_after_hours: float = 0.0
    """How long a finished pass is kept after its day turned final (and after it ended) before it is purged."""
    follow_feed: bool = True
    """What a follow request without ``feed`` asks: read its windows from the Management Activity API where the app
    has its permission and the feed covers them, by its search source otherwise (``shared.follow.plan``)."""
    follow_reconcile_hours: float = 24.0
    """A follower reading the feed reads one window again by search this often, after the feed's last read of it,
    and keeps what the feed missed (0: never)."""
    follow_reconcile_source: str = ""
    """The search source of that reconcile ("": the follower's own source)."""
    settle_default: bool = False
    """What a collection request without ``settle`` asks: read the provisional windows again, by itself, once their
    late-arrival band has passed (``orchestrators.settle``)."""
    fast_sdk_timestamps: bool = True
    """Parse the SDK's history timestamps with ``datetime.fromisoformat`` (``shared.hosting.sdk_timestamps``)."""
    budget_exchange: int = 3
    """Tenant budget B for Exchange: concurrent Search-UnifiedAuditLog calls of all collections of one tenant.
    Exchange Online's throttling policy allows 3 concurrent PowerShell connections per identity
    (PowerShellMaxConcurrency), 9 per tenant; the collector uses one app identity. 0 = no budget."""
    budget_graph: int = 6
    """Tenant budget B for Graph: unfinished audit log queries of all collections of one tenant. Graph's documented
    baseline is at least 50 queued or running queries per tenant, shared with every other tool, but tenants are seen
    to refuse a new search beyond about 10 (CIPP's audit log search creation cites that cap and keeps to 6, deferring
    on 429; Purview allows 10 concurrent search jobs per account): 6 leaves room for other tools. 0 = no budget."""
    budget_feed: int = 3
    """Tenant budget B for the feed: chunks of all collections of one tenant reading the Management Activity API at
    once. The feed allows 2,000 requests a minute per tenant and publisher; a lane sends one request at a time (a
    listing page or a blob), so three stay well inside it with room for the tenant's other readers. 0 = no budget."""
    feed_lag_hours: float = 48.0
    """How long after a window's end a feed collection reads publications for it: the feed publishes most records
    within 24 hours (typically 60 to 90 minutes) and some days later; what comes after is a later read's."""
    budget_lease_seconds: float = 600.0
    """A slot not renewed for this long returns to the budget (renewed every third of it while held)."""
    budget_poll_seconds: float = 10.0
    """How often a lane waiting for the tenant budget asks again (an entity cannot call it back)."""
    exchange_target_fraction: float = 0.65
    """Exchange windows are sized (split before they start) so each is expected to hold at most this fraction of
    what one call returns (5,000), or of the session cap once sessions are seen to continue: most calls then come back
    short, which is what proves a window complete. 0 = no sizing (the planned chunks as they are)."""
    budget_secret: str | None = field(default=None, repr=False)
    """Key of the collector's signatures: the per-run tokens that tie budget operations to their run
    (``shared.budget.token``), the seals without which no orchestration input runs (``shared.requests.admission``)
    and the start claims (``shared.chain_claim``). Without it nothing is authenticated (the budget's other rules
    still hold): set it on Azure."""

    hosting_plan: str = hosting.LOCAL
    """Where the app runs, by the Functions host's own rules (``shared.hosting.platform``): ``local`` or an Azure
    plan."""
    hosting_evidence: str = "none"
    """The platform variables the plan was told by (for messages)."""
    clock_file: str | None = None
    """Tests only (``COLLECTOR_CLOCK_FILE``): the app's "now" at its edge (HTTP validation, the budget entity) is the
    wall clock plus the offset this file holds, the file the local host's ``--clock-file`` and the emulator read
    (``shared.clock``). Refused on Azure."""

    @property
    def hosted_on_azure(self) -> bool:
        """On any Azure plan (Flex, Linux or Windows Consumption, Premium, Dedicated, Container Apps, Kubernetes)."""
        return self.hosting_plan != hosting.LOCAL

    @property
    def budget_capacities(self) -> dict[str, int]:
        """Each source's tenant budget B by the source's name (``COLLECTOR_BUDGET_<SOURCE>``): one line per source."""
        return {
            "graph": self.budget_graph,
            "exchange": self.budget_exchange,
            "feed": self.budget_feed,
        }

    def budget(self, source: str) -> BudgetOptions:
        """The tenant budget a collection of ``source`` uses (capacity 0: none; a daily submission quota where the
        source has one, ``budget_quotas``); ``ConfigError`` for a source with no budget setting (a source added
        without one must not silently share another's)."""
        capacity = self.budget_capacities.get(source)
        if capacity is None:
            raise ConfigError(f"COLLECTOR_BUDGET_{source.upper()}", f"no tenant budget is set for the {source} source")
        quota = self.budget_quotas.get(source, 0)
        return BudgetOptions(capacity, self.budget_lease_seconds, self.budget_poll_seconds, quota)

    @property
    def budget_quotas(self) -> dict[str, int]:
        """The daily submission quota the tenant budget keeps, by the name of the source whose queries take a credit
        of it (Graph's audit queries): a source without one is absent."""
        return {"graph": self.graph_quota}

    @property
    def graph_quota(self) -> int:
        """Graph query submissions the collector may make per rolling 24 hours in one tenant: the tenant's daily
        quota less the reserve left to its other tools."""
        return self.graph_daily_queries - self.graph_daily_reserve

    def budget_token(self, collection_id: str, run: str = "") -> str:
        """The token one run of a collection (``run``: the run id in its input; "" for the doctor's holder) sends with
        its tenant budget operations ("" when no secret is set: nothing is authenticated)."""
        return collection_token(self.budget_secret or "", collection_id, run)

    @property
    def sink_kind(self) -> str:
        """``blob`` (connection string or account URL) or ``folder`` (the embedded default)."""
        return "blob" if self.output_connection_string or self.output_account_url else "folder"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        """Build settings from environment-like text values; ``ConfigError`` names the first bad setting."""
        d = cls()
        a = AuditSettings()
        reader = _Reader(env)
        audit = AuditSettings(
            client_id=reader.text("AUDIT_CLIENT_ID", a.client_id),
            client_secret=reader.optional("AUDIT_CLIENT_SECRET"),
            certificate=reader.optional("AUDIT_CERTIFICATE"),
            certificate_path=reader.optional("AUDIT_CERTIFICATE_PATH"),
            certificate_password=reader.password("AUDIT_CERTIFICATE_PASSWORD"),
            certificate_thumbprint=reader.optional("AUDIT_CERTIFICATE_THUMBPRINT"),
            authority_host=reader.url("AUDIT_AUTHORITY_HOST", a.authority_host),
            graph_base_url=reader.url("AUDIT_GRAPH_BASE_URL", a.graph_base_url),
            graph_api_version=reader.choice("AUDIT_GRAPH_API_VERSION", a.graph_api_version, ("beta", "v1.0")),
            exchange_base_url=reader.url("AUDIT_EXCHANGE_BASE_URL", a.exchange_base_url),
            ca_bundle=reader.optional("AUDIT_CA_BUNDLE"),
            http_timeout_seconds=reader.number("AUDIT_HTTP_TIMEOUT_SECONDS", a.http_timeout_seconds, float, 1, 600),
            page_size=reader.number("AUDIT_PAGE_SIZE", a.page_size, int, 1, 10_000),
            max_attempts=reader.number("AUDIT_MAX_ATTEMPTS", a.max_attempts, int, 1, 20),
            max_retry_wait_seconds=reader.number(
                "AUDIT_MAX_RETRY_WAIT_SECONDS", a.max_retry_wait_seconds, float, 0, 3600
            ),
            transient_403_attempts=reader.number("AUDIT_TRANSIENT_403_ATTEMPTS", a.transient_403_attempts, int, 0, 20),
            exchange_session_cap=reader.number(
                "AUDIT_EXCHANGE_SESSION_CAP", a.exchange_session_cap, int, 1, a.exchange_session_cap
            ),
            feed_base_url=reader.url("AUDIT_FEED_BASE_URL", a.feed_base_url),
            feed_publisher_id=reader.guid("AUDIT_FEED_PUBLISHER_ID"),
        )
        settings = cls(
            audit=audit,
            task_hub=reader.task_hub(TASK_HUB_SETTING, d.task_hub),
            default_source=reader.choice("COLLECTOR_DEFAULT_SOURCE", d.default_source, SOURCES),
            output_connection_string=reader.optional("OUTPUT_STORAGE_CONNECTION"),
            output_account_url=reader.optional("OUTPUT_STORAGE_ACCOUNT_URL"),
            output_folder=reader.optional("OUTPUT_FOLDER"),
            output_container=reader.container("OUTPUT_CONTAINER", d.output_container),
            default_concurrency=reader.number("COLLECTOR_DEFAULT_CONCURRENCY", d.default_concurrency, int, 1, 100),
            max_concurrency=reader.number("COLLECTOR_MAX_CONCURRENCY", d.max_concurrency, int, 1, 100),
            max_chunks=reader.number("COLLECTOR_MAX_CHUNKS", d.max_chunks, int, 1, 1_000_000),
            min_interval_minutes=reader.number(
                "COLLECTOR_MIN_INTERVAL_MINUTES", d.min_interval_minutes, int, 1, 525_600
            ),
            max_interval_minutes=reader.number(
                "COLLECTOR_MAX_INTERVAL_MINUTES", d.max_interval_minutes, int, 1, 525_600
            ),
            retention_days=reader.number("COLLECTOR_RETENTION_DAYS", d.retention_days, int, 1, 3650),
            max_lookback_days=reader.number("COLLECTOR_MAX_LOOKBACK_DAYS", d.max_lookback_days, int, 1, 3650),
            graph_default_interval_minutes=reader.number(
                "COLLECTOR_GRAPH_DEFAULT_INTERVAL_MINUTES", d.graph_default_interval_minutes, int, 1, 525_600
            ),
            graph_daily_queries=reader.number(
                "COLLECTOR_GRAPH_DAILY_QUERIES", d.graph_daily_queries, int, 1, 1_000_000
            ),
            graph_daily_reserve=reader.number(
                "COLLECTOR_GRAPH_DAILY_RESERVE", d.graph_daily_reserve, int, 0, 1_000_000
            ),
            min_split_seconds=reader.number("COLLECTOR_MIN_SPLIT_SECONDS", d.min_split_seconds, int, 1, 86_400),
            poll_interval_seconds=reader.number(
                "COLLECTOR_POLL_INTERVAL_SECONDS", d.poll_interval_seconds, float, 0, 3600
            ),
            poll_min_interval_seconds=reader.number(
                "COLLECTOR_POLL_MIN_INTERVAL_SECONDS", d.poll_min_interval_seconds, float, 0, 3600
            ),
            poll_fraction=reader.number("COLLECTOR_POLL_FRACTION", d.poll_fraction, float, 0.01, 1),
            poll_max_interval_seconds=reader.number(
                "COLLECTOR_POLL_MAX_INTERVAL_SECONDS", d.poll_max_interval_seconds, float, 0, 86_400
            ),
            max_polls=reader.number("COLLECTOR_MAX_POLLS", d.max_polls, int, 1, 100_000),
            chunks_per_execution=reader.number(
                "COLLECTOR_CHUNKS_PER_EXECUTION", d.chunks_per_execution, int, 1, 10_000
            ),
            max_attempts=reader.number("COLLECTOR_MAX_ATTEMPTS", d.max_attempts, int, 1, 50),
            retry_base_seconds=reader.number("COLLECTOR_RETRY_BASE_SECONDS", d.retry_base_seconds, float, 0, 3600),
            retry_max_seconds=reader.number("COLLECTOR_RETRY_MAX_SECONDS", d.retry_max_seconds, float, 0, 86_400),
            max_filter_values=reader.number("COLLECTOR_MAX_FILTER_VALUES", d.max_filter_values, int, 1, 1000),
            max_records_per_chunk=reader.number(
                "COLLECTOR_MAX_RECORDS_PER_CHUNK", d.max_records_per_chunk, int, 0, 100_000_000
            ),
            delete_queries=reader.flag("COLLECTOR_DELETE_QUERIES", d.delete_queries),
            settle_default=reader.flag("COLLECTOR_SETTLE_DEFAULT", d.settle_default),
            follow_every_minutes=reader.number("COLLECTOR_FOLLOW_EVERY_MINUTES", d.follow_every_minutes, int, 1, 1440),
            follow_delay_minutes=reader.number("COLLECTOR_FOLLOW_DELAY_MINUTES", d.follow_delay_minutes, int, 0, 1440),
            follow_purge_passes=reader.flag("COLLECTOR_FOLLOW_PURGE_PASSES", d.follow_purge_passes),
            follow_purge_after_hours=reader.number(
                "COLLECTOR_FOLLOW_PURGE_AFTER_HOURS", d.follow_purge_after_hours, float, 0, 8760
            ),
            follow_feed=reader.flag("COLLECTOR_FOLLOW_FEED", d.follow_feed),
            follow_reconcile_hours=reader.number(
                "COLLECTOR_FOLLOW_RECONCILE_HOURS", d.follow_reconcile_hours, float, 0, 8760
            ),
            follow_reconcile_source=reader.text("COLLECTOR_FOLLOW_RECONCILE_SOURCE", d.follow_reconcile_source),
            fast_sdk_timestamps=reader.flag("COLLECTOR_FAST_SDK_TIMESTAMPS", d.fast_sdk_timestamps),
            budget_exchange=reader.number("COLLECTOR_BUDGET_EXCHANGE", d.budget_exchange, int, 0, 1000),
            exchange_target_fraction=reader.number(
                "COLLECTOR_EXCHANGE_TARGET_FRACTION", d.exchange_target_fraction, float, 0, 1
            ),
            budget_graph=reader.number("COLLECTOR_BUDGET_GRAPH", d.budget_graph, int, 0, 1000),
            budget_feed=reader.number("COLLECTOR_BUDGET_FEED", d.budget_feed, int, 0, 1000),
            feed_lag_hours=reader.number("COLLECTOR_FEED_LAG_HOURS", d.feed_lag_hours, float, 0, 168),
            budget_lease_seconds=reader.number(
                "COLLECTOR_BUDGET_LEASE_SECONDS", d.budget_lease_seconds, float, 1, 86_400
            ),
            budget_poll_seconds=reader.number(
                "COLLECTOR_BUDGET_POLL_SECONDS", d.budget_poll_seconds, float, 0.01, 3600
            ),
            budget_secret=reader.secret(BUDGET_KEY_SETTING, BUDGET_KEY_CHARS),
            hosting_plan=hosting.hosting_plan(env),
            hosting_evidence=hosting.evidence(env),
            clock_file=reader.optional("COLLECTOR_CLOCK_FILE"),
        )
        _check_consistency(settings)
        return settings


_CREDENTIAL_SETTINGS = ("AUDIT_CLIENT_SECRET", "AUDIT_CERTIFICATE", "AUDIT_CERTIFICATE_PATH")


def _check_credential(a: AuditSettings) -> None:
    """At most one credential; none is left to the adapters' config (a request without one fails there)."""
    values = (a.client_secret, a.certificate, a.certificate_path)
    given = [name for name, value in zip(_CREDENTIAL_SETTINGS, values, strict=True) if value]
    if len(given) > 1:
        raise ConfigError(", ".join(given), f"set exactly one of {', '.join(_CREDENTIAL_SETTINGS)}")
    if a.certificate_password and a.client_secret:
        raise ConfigError("AUDIT_CERTIFICATE_PASSWORD", "applies only with AUDIT_CERTIFICATE or AUDIT_CERTIFICATE_PATH")


def _check_consistency(s: Settings) -> None:
    _check_credential(s.audit)
    if s.default_concurrency > s.max_concurrency:
        raise ConfigError("COLLECTOR_DEFAULT_CONCURRENCY", "must not exceed COLLECTOR_MAX_CONCURRENCY")
    if s.retention_days > s.max_lookback_days:
        raise ConfigError("COLLECTOR_RETENTION_DAYS", "must not exceed COLLECTOR_MAX_LOOKBACK_DAYS")
    if s.min_interval_minutes > s.max_interval_minutes:
        raise ConfigError("COLLECTOR_MIN_INTERVAL_MINUTES", "must not exceed COLLECTOR_MAX_INTERVAL_MINUTES")
    if s.graph_daily_reserve >= s.graph_daily_queries:
        raise ConfigError("COLLECTOR_GRAPH_DAILY_RESERVE", "must be smaller than COLLECTOR_GRAPH_DAILY_QUERIES")
    if s.budget_poll_seconds >= s.budget_lease_seconds:
        raise ConfigError("COLLECTOR_BUDGET_POLL_SECONDS", "must be shorter than COLLECTOR_BUDGET_LEASE_SECONDS")
    if s.clock_file and s.hosted_on_azure:
        raise ConfigError("COLLECTOR_CLOCK_FILE", "is a test setting of the local host: remove it on Azure")
    if s.output_connection_string and s.output_account_url:
        raise ConfigError("OUTPUT_STORAGE_ACCOUNT_URL", "set either it or OUTPUT_STORAGE_CONNECTION, not both")


_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


class _Reader:
    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env

    def optional(self, name: str) -> str | None:
        value = self._env.get(name, "").strip()
        return _resolved(name, value) or None

    def guid(self, name: str) -> str | None:
        """An optional directory (tenant) id in its 36-character form."""
        value = self.optional(name)
        if value is not None and not is_tenant_guid(value):
            raise ConfigError(name, "must be a tenant GUID such as 72f988bf-86f1-41af-91ab-2d7cd011db47")
        return value

    def password(self, name: str) -> str | None:
        """A password is taken as given (spaces are characters of it); empty means none."""
        return _resolved(name, self._env.get(name) or "") or None

    def secret(self, name: str, min_chars: int) -> str | None:
        value = self.optional(name)
        if value is not None and len(value) < min_chars:
            raise ConfigError(name, f"must be at least {min_chars} characters")
        return value

    def text(self, name: str, default: str) -> str:
        return self.optional(name) or default

    def flag(self, name: str, default: bool) -> bool:
        raw = self.optional(name)
        if raw is None:
            return default
        value = raw.lower()
        if value not in _TRUE | _FALSE:
            raise ConfigError(name, "must be true or false")
        return value in _TRUE

    def choice(self, name: str, default: str, allowed: tuple[str, ...]) -> str:
        value = self.text(name, default).lower()
        if value not in allowed:
            raise ConfigError(name, f"must be one of {', '.join(allowed)}")
        return value

    def url(self, name: str, default: str) -> str:
        value = self.text(name, default).rstrip("/")
        if not value.startswith(("https://", "http://")):
            raise ConfigError(name, "must be an http(s) URL")
        return value

    def container(self, name: str, default: str) -> str:
        value = self.text(name, default)
        ok = 3 <= len(value) <= 63 and value.replace("-", "").isalnum() and value == value.lower()
        if not ok or value.startswith("-") or "--" in value:
            raise ConfigError(name, "must be a valid blob container name (3-63 lowercase letters, digits, '-')")
        return value

    def task_hub(self, name: str, default: str) -> str:
        """The Azure Storage provider's rule for task hub names."""
        value = self.text(name, default)
        if not (3 <= len(value) <= 45 and value.isascii() and value.isalnum() and value[0].isalpha()):
            raise ConfigError(name, "must be 3-45 letters and digits starting with a letter (a task hub name)")
        return value

    def number(self, name: str, default: _T, kind: Callable[[str], _T], low: float, high: float) -> _T:
        raw = self.optional(name)
        if raw is None:
            return default
        try:
            value = kind(raw)
        except ValueError:
            raise ConfigError(name, f"must be a {getattr(kind, '__name__', 'number')}") from None
        if not low <= value <= high:  # type: ignore[operator]
            raise ConfigError(name, f"must be between {low:g} and {high:g}")
        return value


_KEY_VAULT_REFERENCE = "@microsoft.keyvault("


def _resolved(name: str, value: str) -> str:
    """``value``, unless it is a Key Vault reference App Service could not resolve: it then hands the app the reference
    text itself (no access yet, no such secret), which must not become a key or a credential."""
    if value.strip().lower().startswith(_KEY_VAULT_REFERENCE):
        raise ConfigError(
            name,
            "is an unresolved Key Vault reference: give the app's identity Key Vault Secrets User on the vault and "
            "check that the secret exists (the portal's Environment variables page shows each reference's status)",
        )
    return value
