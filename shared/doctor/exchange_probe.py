"""Exchange ``InvokeCommand`` probes: token, the anchor form the service routes, the role, and one paged session.

Every call goes through the collector's own adapter (``ExchangeAuditClient``): a count over the last 15 minutes
shows routing and the role; the tenant GUID form of the anchor (``APP:SystemMailbox{...}@<tenant GUID>``, what some
public clients send) is tried once more with the adapter's routing hint replaced, to say whether the service accepts
it too. Then the window is widened until it holds more than 1,000 records (bounded widenings and time) and its
``ReturnLargeSet`` session is read the way the collector reads a chunk (``exchange_session.read_window``: one
``read_block`` call after another, the cursor carried between them, a broken session started over), observing the
HTTP page sizes the service chose and whether the nextLinks added up.
All of it is read-only: Search-UnifiedAuditLog searches, it creates nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from shared.audit.auth import EXCHANGE_SCOPE, TokenProvider, token_provider_for
from shared.audit.config import AuditApiConfig, is_initial_domain
from shared.audit.exchange import SYSTEM_MAILBOX, ExchangeAuditClient, anchor_mailbox
from shared.audit.exchange_session import read_window
from shared.audit.ports import AuditFilters, AuditSearchApi, TimeWindow
from shared.doctor.fixes import EXCHANGE_MANAGE_AS_APP_FIX, EXCHANGE_ROLE_FIX, ROUTING_FIX, failure
from shared.doctor.graph_probe import close_pages
from shared.doctor.model import EXCHANGE_PROBES, Budget, ProbeResult, brief, differs, failed, ok, skipped
from shared.doctor.tokens import probe_token
from shared.errors import (
    CollectorError,
    MissingPermissionError,
    NeedsSplitError,
    PermanentApiError,
    RoutingError,
    TransientApiError,
)

WINDOW = timedelta(minutes=15)
MUST_EXCEED = 1000
"""A session must hold more rows than one 1,000-row page for paging to show."""
TARGET_MAX = 20_000
"""Above this the window is narrowed again: paging shows just as well, and reading stays short."""
WIDEN_FACTOR = 4
MAX_WIDENINGS = 6
"""15 minutes x 4^6 = 42 days at most."""
MAX_NARROWINGS = 5
PAGING_LIMIT_SECONDS = 150.0
_ROLE_MARKERS = ("isn't supported in this scenario", "cmdletaccessdenied", "not recognized as the name of a cmdlet")


def _misrouted(exc: CollectorError) -> bool:
    """A refused routing hint: 400 ErrorIncorrectRoutingHint, or the older 503 MailboxInfoStale (retried, then
    given up on)."""
    return isinstance(exc, RoutingError) or (isinstance(exc, TransientApiError) and "MailboxInfoStale" in str(exc))


def _span(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes < 120:
        return f"{minutes} minutes"
    hours = minutes / 60
    return f"{hours:g} hours" if hours < 48 else f"{hours / 24:.1f} days"


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
            EXCHANGE_SCOPE,
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
        if not is_initial_domain(self._tenant):
            note = self._guid_form(tokens, facts.tenant_guid, tiny)
            self.results["exchange.anchor"] = failed(
                "exchange.anchor",
                f"{self._tenant} is not an initial domain, and the collector routes Exchange calls by "
                f"APP:{SYSTEM_MAILBOX}@<initial domain>{note}",
                ROUTING_FIX,
            )
            self._skip_rest("needs exchange.anchor, which failed")
            return
        client = ExchangeAuditClient(self.config, tokens=tokens, session_cap=self.config.exchange_session_cap)
        try:
            self._probe_routing_and_role(client, tokens, facts.tenant_guid, tiny)
            if "exchange.paging" not in self.results:
                self.results["exchange.paging"] = (
                    skipped("exchange.paging", self.budget.why_skipped())
                    if self.budget.exhausted(5.0)
                    else self._paging(client, end)
                )
        finally:
            client.close()

    # --- routing and role ----------------------------------------------------------------------------------------
    def _probe_routing_and_role(
        self, client: ExchangeAuditClient, tokens: TokenProvider, guid: str | None, tiny: TimeWindow
    ) -> None:
        anchor = anchor_mailbox(self._tenant)
        try:
            count = client.probe(tiny).rows
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
        note = self._guid_form(tokens, guid, tiny)
        self.results["exchange.anchor"] = ok("exchange.anchor", f"the service routed X-AnchorMailbox {anchor}{note}")
        self.results["exchange.role"] = ok(
            "exchange.role", f"Search-UnifiedAuditLog ran for the app: {count:,} records in the last 15 minutes"
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
                return f"; the tenant GUID form {form} was refused (the collector sends only the initial-domain form)"
            return f"; the tenant GUID form could not be tried ({exc})"
        finally:
            client.close()
        return f"; the tenant GUID form {form} was routed"

    # --- one session that must page ------------------------------------------------------------------------------
    def _paging(self, client: ExchangeAuditClient, end: datetime) -> ProbeResult:
        started = self.budget.elapsed()
        limit = min(PAGING_LIMIT_SECONDS, self.budget.remaining() - 5.0)

        def time_left() -> bool:
            return self.budget.elapsed() - started < limit

        try:
            chosen, tried = self._find_window(client, end, time_left)
            if chosen is None:
                span, count = tried[-1]
                return skipped(
                    "exchange.paging",
                    f"could not find a window with more than {MUST_EXCEED:,} records (tried {len(tried)} windows "
                    f"ending now, the widest {_span(span)} with {count:,}"
                    + ("" if time_left() else ", before the time budget ran out")
                    + "): paging was not exercised",
                )
            window, count = chosen
            return self._read_session(client, window, count, time_left)
        except NeedsSplitError as exc:
            return skipped("exchange.paging", f"the window chosen exceeded the session cap ({exc})")
        except TransientApiError as exc:
            if "broke and" in str(exc):
                return differs("exchange.paging", f"the session's rows did not add up across pages ({exc})")
            return self._fail("exchange.paging", exc)
        except PermanentApiError as exc:
            if "nextLink" in str(exc) or "ResultSize" in str(exc):
                return differs("exchange.paging", str(exc))
            return self._fail("exchange.paging", exc)
        except CollectorError as exc:
            return self._fail("exchange.paging", exc)

    def _find_window(
        self, client: ExchangeAuditClient, end: datetime, time_left: Callable[[], bool]
    ) -> tuple[tuple[TimeWindow, int] | None, list[tuple[timedelta, int]]]:
        """Widen (x4) from 15 minutes until a window holds more than 1,000 records; narrow when it holds too many."""
        tried: list[tuple[timedelta, int]] = []

        def count(span: timedelta) -> int:
            n = client.probe(TimeWindow(end - span, end)).rows
            tried.append((span, n))
            return n

        low, span = timedelta(0), WINDOW
        for _ in range(MAX_WIDENINGS + 1):
            n = count(span)
            if MUST_EXCEED < n <= TARGET_MAX:
                return (TimeWindow(end - span, end), n), tried
            if n > TARGET_MAX:
                break
            if not time_left():
                return None, tried
            low, span = span, span * WIDEN_FACTOR
        else:
            return None, tried
        high, high_count = span, tried[-1][1]
        for _ in range(MAX_NARROWINGS):
            if not time_left():
                break
            middle = timedelta(seconds=round((low + high).total_seconds() / 2))
            n = count(middle)
            if MUST_EXCEED < n <= TARGET_MAX:
                return (TimeWindow(end - middle, end), n), tried
            low, high = (middle, high) if n <= MUST_EXCEED else (low, middle)
            high_count = n if n > MUST_EXCEED else high_count
        if high_count <= client.session_cap:
            return (TimeWindow(end - high, end), high_count), tried
        return None, tried

    def _read_session(
        self, client: AuditSearchApi, window: TimeWindow, count: int, time_left: Callable[[], bool]
    ) -> ProbeResult:
        """The window read as the collector reads a chunk: ``read_block`` call after call, the cursor carried."""
        sizes: list[int] = []
        next_links = 0
        seen: set[str] = set()
        repeated = 0
        stopped = False
        calls = read_window(client, window, AuditFilters())
        try:
            for pages, _ in calls:
                next_links += max(0, len(pages) - 1)  # a call's first page answers the call, the rest its nextLinks
                for page in pages:
                    sizes.append(len(page.records) + len(page.malformed))
                    for record in page.records:
                        record_id = str(record.get("id"))
                        repeated += record_id in seen
                        seen.add(record_id)
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
            f"{rows:,} records over the last {_span(window.end - window.start)} ({count:,} counted) in "
            f"{len(sizes)} HTTP page{_plural(len(sizes))}: {shape}; nextLink followed {next_links} "
            f"time{_plural(next_links)}, ResultIndex 1..{rows:,} without gap or repeat"
        )
        if sizes and max(sizes) > 1000:
            detail += "; the service sent pages over the 1,000 asked with Prefer: odata.maxpagesize (handled)"
        if stopped:
            detail += f"; stopped after {rows:,} of {count:,} rows: the time budget ran out"
        if next_links == 0:
            detail += "; no nextLink was needed: the service sent each call's rows in one page"
        return ok("exchange.paging", detail)
