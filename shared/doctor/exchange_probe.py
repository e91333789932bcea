"""Exchange ``InvokeCommand`` probes: token, the anchor forms the service routes, the role, how its 2026
``Search-UnifiedAuditLog`` behaves, and one window read the way the collector reads a chunk.

Every call goes through the collector's own adapter (``ExchangeAuditClient``): one call over the last 15 minutes shows
routing and the role (it counts the records only when it comes back short: no ``ResultCount`` is trusted); the other
anchor form (``APP:SystemMailbox{...}@<tenant GUID>`` when the tenant was named by its initial domain) is tried once
more with the adapter's routing hint replaced, to say which forms the service accepts. Then a window is found whose
one call comes back short with more than 1,000 rows (``exchange_service.find_window``), on which the service's meaning
of ``ResultCount``, ``moreRecordsAvailable``, its warnings and whether its sessions continue are probed
(``exchange.resultcount``, ``exchange.sessions``), and which is read as the collector reads a chunk
(``exchange_session.read_window``), observing the HTTP page sizes the service chose and whether the nextLinks added
up. All of it is read-only: Search-UnifiedAuditLog searches, it creates nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from shared.audit.auth import TokenProvider, token_provider_for
from shared.audit.config import AuditApiConfig, is_initial_domain, is_tenant_guid
from shared.audit.exchange import SYSTEM_MAILBOX, ExchangeAuditClient, anchor_mailbox
from shared.audit.exchange_session import read_window
from shared.audit.ports import AuditFilters, AuditSearchApi, TimeWindow
from shared.doctor.exchange_service import MUST_EXCEED, Found, find_window, result_count, sessions, span_text
from shared.doctor.fixes import EXCHANGE_MANAGE_AS_APP_FIX, EXCHANGE_ROLE_FIX, ROUTING_FIX, failure
from shared.doctor.graph_probe import close_pages
from shared.doctor.high_completeness import PROBE as HIGH_COMPLETENESS
from shared.doctor.high_completeness import probe_high_completeness
from shared.doctor.model import Budget, Outcome, ProbeResult, brief, differs, failed, ok, skipped
from shared.doctor.tenant_probe import PROBE as TENANT_PROBE
from shared.doctor.tenant_probe import TokenOutcome
from shared.doctor.tokens import probe_token
from shared.errors import (
    CollectorError,
    MissingPermissionError,
    NeedsSplitError,
    PermanentApiError,
    RoutingError,
    TransientApiError,
)

EXCHANGE_PROBES = (
    "exchange.token",
    "exchange.anchor",
    "exchange.role",
    "exchange.resultcount",
    "exchange.sessions",
    "exchange.paging",
    HIGH_COMPLETENESS,
)
"""The Exchange source's probes, in the order they are reported."""
EXCHANGE_ROLE = "Exchange.ManageAsApp"
WINDOW = timedelta(minutes=15)
PAGING_LIMIT_SECONDS = 150.0
_ROLE_MARKERS = ("isn't supported in this scenario", "cmdletaccessdenied", "not recognized as the name of a cmdlet")


def _misrouted(exc: CollectorError) -> bool:
    """A refused routing hint: 400 ErrorIncorrectRoutingHint, or the older 503 MailboxInfoStale (retried, then
    given up on)."""
    return isinstance(exc, RoutingError) or (isinstance(exc, TransientApiError) and "MailboxInfoStale" in str(exc))


def _plural(n: int) -> str:
    return "" if n == 1 else "s"


def describe_sizes(sizes: list[int]) -> str:
    """``pages of 1,000 (last 468)``, ``one page of 1,468``, or the sizes themselves when they vary."""
    if len(sizes) == 1:
        return f"one page of {sizes[0]:,}"
    body, last = sizes[:-1], sizes[-1]
    if len(set(body)) == 1:
        return f"pages of {body[0]:,}" + (f" (last {last:,})" if last != body[0] else "")
    return "pages of " + ", ".join(f"{s:,}" for s in sizes)


@dataclass
class ExchangeProbe:
    config: AuditApiConfig
    budget: Budget
    now: Callable[[], datetime]
    results: dict[str, ProbeResult] = field(default_factory=dict)
    _roles: tuple[str, ...] | None = None

    @property
    def token_roles(self) -> tuple[str, ...] | None:
        """The application roles of the Exchange token (None: no token, or its claims were not readable)."""
        return self._roles

    @property
    def _tenant(self) -> str:
        return self.config.tenant_id

    def _fail(self, probe: str, exc: CollectorError) -> ProbeResult:
        return failure(probe, exc, endpoint=self.config.exchange_base_url, endpoint_setting="AUDIT_EXCHANGE_BASE_URL")

    def _skip_rest(self, why: str) -> None:
        for probe in EXCHANGE_PROBES:
            self.results.setdefault(probe, skipped(probe, why))

    def run(self) -> None:
        tokens = token_provider_for(self.config)
        result, facts = probe_token(
            "exchange.token",
            tokens,
            self.config.exchange_scope,
            authority=self.config.authority_host,
            wanted="Exchange.ManageAsApp",
        )
        self.results["exchange.token"] = result
        if facts is None:
            self._skip_rest("needs exchange.token, which failed")
            return
        self._roles = facts.roles
        end = self.now().replace(microsecond=0)
        tiny = TimeWindow(end - WINDOW, end)
        if not (is_initial_domain(self._tenant) or is_tenant_guid(self._tenant)):
            note = self._guid_form(tokens, facts.tenant_guid, tiny)
            self.results["exchange.anchor"] = failed(
                "exchange.anchor",
                f"{self._tenant} is neither the tenant's GUID nor its initial domain, and the collector routes "
                f"Exchange calls by APP:{SYSTEM_MAILBOX}@<tenant GUID or initial domain>{note}",
                ROUTING_FIX,
            )
            self._skip_rest("needs exchange.anchor, which failed")
            return
        client = ExchangeAuditClient(self.config, tokens=tokens, session_cap=self.config.exchange_session_cap)
        try:
            self._probe_routing_and_role(client, tokens, facts.tenant_guid, tiny)
            if "exchange.paging" not in self.results:
                self._service(client, end)
        finally:
            client.close()

    # --- routing and role ----------------------------------------------------------------------------------------
    def _probe_routing_and_role(
        self, client: ExchangeAuditClient, tokens: TokenProvider, guid: str | None, tiny: TimeWindow
    ) -> None:
        anchor = anchor_mailbox(self._tenant)
        try:
            seen = client.probe(tiny)
        except MissingPermissionError as exc:
            self.results["exchange.anchor"] = skipped(
                "exchange.anchor", "the call was refused for permission before routing could be seen (exchange.role)"
            )
            self.results["exchange.role"] = failed("exchange.role", f"access denied: {exc}", self._permission_fix(exc))
            self._skip_rest("needs exchange.role, which failed")
            return
        except CollectorError as exc:
            if _misrouted(exc):
                note = self._guid_form(tokens, guid, tiny)
                if note.endswith("was routed"):
                    note += " (the collector does not send that form: please report this line)"
                self.results["exchange.anchor"] = failed(
                    "exchange.anchor",
                    f"the service did not route X-AnchorMailbox {anchor} ({brief(exc)}){note}",
                    ROUTING_FIX,
                )
            else:
                self.results["exchange.anchor"] = self._fail("exchange.anchor", exc)
            self._skip_rest("needs exchange.anchor, which failed")
            return
        if is_tenant_guid(self._tenant):
            note = (
                "; the initial-domain form was not tried (the tenant was named by its GUID; name it by its initial "
                "domain to probe both forms)"
            )
        else:
            note = self._guid_form(tokens, guid, tiny)
        self.results["exchange.anchor"] = ok("exchange.anchor", f"the service routed X-AnchorMailbox {anchor}{note}")
        self.results["exchange.role"] = ok(
            "exchange.role", f"Search-UnifiedAuditLog ran for the app: {seen.describe()} in the last 15 minutes"
        )

    def _permission_fix(self, exc: MissingPermissionError) -> str:
        text = str(exc).lower()
        if any(marker in text for marker in _ROLE_MARKERS):
            return EXCHANGE_ROLE_FIX
        if self._roles is not None and "Exchange.ManageAsApp" not in self._roles:
            return EXCHANGE_MANAGE_AS_APP_FIX + " (the token carries no Exchange.ManageAsApp role)"
        return f"{EXCHANGE_MANAGE_AS_APP_FIX}; and {EXCHANGE_ROLE_FIX}"

    def _guid_form(self, tokens: TokenProvider, guid: str | None, tiny: TimeWindow) -> str:
        """A note on whether the service also routes ``APP:SystemMailbox{...}@<tenant GUID>``."""
        if guid is None:
            return "; the tenant GUID is not readable from the token, so the GUID form was not tried"
        form = f"APP:{SYSTEM_MAILBOX}@{guid}"
        client = ExchangeAuditClient(self.config, tokens=tokens, anchor=form)
        try:
            client.probe(tiny)
        except MissingPermissionError:
            return f"; the tenant GUID form {form} got past routing (then refused for permission)"
        except CollectorError as exc:
            if _misrouted(exc):
                return (
                    f"; the tenant GUID form {form} was refused (name this tenant by its initial domain, not its GUID)"
                )
            return f"; the tenant GUID form could not be tried ({exc})"
        finally:
            client.close()
        return f"; the tenant GUID form {form} was routed too"

    # --- how the service behaves, on one window a call proves ---------------------------------------------------
    def _service(self, client: ExchangeAuditClient, end: datetime) -> None:
        probes = ("exchange.resultcount", "exchange.sessions", "exchange.paging")
        if self.budget.exhausted(5.0):
            for probe in probes:
                self.results[probe] = skipped(probe, self.budget.why_skipped())
            return
        started = self.budget.elapsed()
        limit = min(PAGING_LIMIT_SECONDS, self.budget.remaining() - 5.0)

        def time_left() -> bool:
            return self.budget.elapsed() - started < limit

        try:
            found, tried = find_window(client, end, time_left)
        except CollectorError as exc:
            for probe in probes:
                self.results[probe] = self._fail(probe, exc)
            return
        if found is None:
            span, seen = tried[-1]
            why = (
                f"could not find a window one call proves with more than {MUST_EXCEED:,} records (tried {len(tried)} "
                f"windows ending now, the widest {span_text(span)} with {seen.describe()}"
                + ("" if time_left() else ", before the time budget ran out")
                + ")"
            )
            for probe in probes:
                self.results[probe] = skipped(probe, f"{why}: not exercised")
            return
        for probe, run in (("exchange.resultcount", result_count), ("exchange.sessions", sessions)):
            try:
                self.results[probe] = run(client, found)
            except CollectorError as exc:
                self.results[probe] = self._fail(probe, exc)
        self.results["exchange.paging"] = self._paging(client, found, time_left)

    def _paging(self, client: ExchangeAuditClient, found: Found, time_left: Callable[[], bool]) -> ProbeResult:
        try:
            return self._read_session(client, found.window, found.call.rows, time_left)
        except NeedsSplitError as exc:
            return differs("exchange.paging", f"a window one call had proven could not be read in one ({exc})")
        except TransientApiError as exc:
            if "broke and" in str(exc):
                return differs("exchange.paging", f"the session's rows did not add up across pages ({exc})")
            return self._fail("exchange.paging", exc)
        except PermanentApiError as exc:
            if "nextLink" in str(exc):
                return differs("exchange.paging", str(exc))
            return self._fail("exchange.paging", exc)
        except CollectorError as exc:
            return self._fail("exchange.paging", exc)

    def _read_session(
        self, client: AuditSearchApi, window: TimeWindow, count: int, time_left: Callable[[], bool]
    ) -> ProbeResult:
        """The window read as the collector reads a chunk: ``read_block`` call after call, the cursor carried."""
        sizes: list[int] = []
        next_links = 0
        seen: set[str] = set()
        repeated = 0
        stopped = False
        evidence = ""
        calls = read_window(client, window, AuditFilters())
        try:
            for pages, cursor in calls:
                next_links += max(0, len(pages) - 1)  # a call's first page answers the call, the rest its nextLinks
                for page in pages:
                    sizes.append(len(page.records) + len(page.malformed))
                    for record in page.records:
                        record_id = str(record.get("id"))
                        repeated += record_id in seen
                        seen.add(record_id)
                if cursor.evidence:
                    evidence = str(cursor.evidence[-1]["detail"])
                if not time_left():
                    stopped = True
                    break
        finally:
            close_pages(calls)
        rows = sum(sizes)
        shape = describe_sizes(sizes) if sizes else "no page"
        if repeated:
            return differs(
                "exchange.paging",
                f"the session's rows did not add up across pages: {repeated:,} of {rows:,} rows came again after the "
                f"collector started the session over ({shape}); the collector removes them by id",
            )
        detail = (
            f"{rows:,} records over the last {span_text(window.end - window.start)} in {len(sizes)} HTTP "
            f"page{_plural(len(sizes))}: {shape}; nextLink followed {next_links} time{_plural(next_links)}, "
            f"ResultIndex 1..{rows:,} without gap or repeat"
        )
        if evidence:
            detail += f"; complete by evidence: {evidence}"
        if sizes and max(sizes) > 1000:
            detail += "; the service sent pages over the 1,000 asked with Prefer: odata.maxpagesize (handled)"
        if stopped:
            detail += f"; stopped after {rows:,} of {count:,} rows: the time budget ran out"
        if next_links == 0:
            detail += "; no nextLink was needed: the service sent each call's rows in one page"
        return ok("exchange.paging", detail)


class ExchangeDoctor(ExchangeProbe):
    """The Exchange probes as the doctor runs every source's (``shared.doctor.sources.SourceDoctor``): all of them
    before the tenant probe, which reads ``exchange.role`` for its last step."""

    def begin(self) -> None:
        if self.budget.exhausted():
            for probe in EXCHANGE_PROBES:
                self.results[probe] = skipped(probe, self.budget.why_skipped())
        else:
            self.run()
        self.results[HIGH_COMPLETENESS] = probe_high_completeness(self.config, self.results, self.budget, self.now)

    def end(self) -> None:
        return None

    def sign_in(self) -> TokenOutcome | None:
        result = self.results["exchange.token"]
        if result.outcome is Outcome.SKIPPED:
            return None
        roles = self.token_roles
        granted = roles is None or EXCHANGE_ROLE in roles
        return TokenOutcome(result, roles, None if granted else "Office 365 Exchange Online Exchange.ManageAsApp")

    def tenant_step(self, client_id: str, states: list[str]) -> ProbeResult | None:
        """The last tenant step: a role holding View-Only Audit Logs, as ``exchange.role`` met it."""
        role = self.results.get("exchange.role")
        if role is None:
            return None
        if role.outcome is Outcome.FAILED and EXCHANGE_ROLE_FIX in role.fix:
            return failed(
                TENANT_PROBE,
                "Exchange role: Search-UnifiedAuditLog was refused although the token holds Exchange.ManageAsApp "
                "(exchange.role); " + "; ".join(states),
                f"in Exchange Online PowerShell: New-ServicePrincipal -AppId {client_id} -ObjectId <service "
                f"principal object id: az ad sp show --id {client_id} --query id -o tsv>; New-ManagementRoleAssignment "
                '-App <that object id> -Role "View-Only Audit Logs" (or the Entra role Compliance Administrator); '
                "a new role can take up to an hour to apply",
            )
        if role.outcome is Outcome.OK:
            states.append("Exchange role in place")
        else:
            states.append(f"Exchange role not checked ({role.outcome.value}: see exchange.role)")
        return None


def exchange_doctor(
    config: AuditApiConfig, budget: Budget, now: Callable[[], datetime], sleep: Callable[[float], None]
) -> ExchangeDoctor:
    return ExchangeDoctor(config, budget, now)
