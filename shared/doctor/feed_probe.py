"""The feed's probes (the Office 365 Management Activity API): its token and permission, its subscriptions, its content.

* ``feed.token``: an app-only token for the Management APIs of the configured cloud, and whether it carries
  ``ActivityFeed.Read``;
* ``feed.subscriptions``: the tenant's subscription of each content type a collection reads. A missing or disabled
  one is **started**: the only call of the doctor that changes anything in the tenant, and the one a collection or a
  follower of the feed makes on its first read anyway (a subscription lists content only from its start on, so
  starting it early is what lets the feed cover the days that follow). Every other probe reads;
* ``feed.content``: the blobs of the last two hours of one content type, and one of them fetched.

A permission refused (``AF10001``) fails with the permission to grant; a subscription that cannot be started (an
administrator disabled it, or it was started minutes ago) fails with the service's words.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from shared.audit.auth import token_provider_for
from shared.audit.config import AuditApiConfig
from shared.audit.feed import FEED_PERMISSION, ActivityFeedClient
from shared.audit.feed_cloud import feed_scope
from shared.audit.ports import TimeWindow
from shared.doctor.fixes import failure
from shared.doctor.model import Budget, Outcome, ProbeResult, ok, skipped
from shared.doctor.tenant_probe import TokenOutcome
from shared.doctor.tokens import probe_token
from shared.errors import CollectorError
from shared.sources.feed.calls import CONTENT_TYPES

FEED_PROBES = ("feed.token", "feed.subscriptions", "feed.content")
"""The feed source's probes, in the order they are reported."""
FEED_ROLE = "ActivityFeed.Read"
RECENT = timedelta(hours=2)
PERMISSION_FIX = (
    f"grant the app {FEED_PERMISSION} (API permissions -> Office 365 Management APIs -> Application permissions) and "
    "admin consent in the tenant"
)


@dataclass
class FeedDoctor:
    """The feed's probes as the doctor runs every source's (``shared.doctor.sources.SourceDoctor``)."""

    config: AuditApiConfig
    budget: Budget
    now: Callable[[], datetime]
    results: dict[str, ProbeResult] = field(default_factory=dict)
    roles: tuple[str, ...] | None = None

    def _fail(self, probe: str, exc: CollectorError) -> ProbeResult:
        return failure(
            probe,
            exc,
            endpoint=self.config.feed_base_url,
            endpoint_setting="AUDIT_FEED_BASE_URL",
            permission_fix=PERMISSION_FIX,
        )

    def _skip_rest(self, why: str) -> None:
        for probe in FEED_PROBES:
            self.results.setdefault(probe, skipped(probe, why))

    def begin(self) -> None:
        if self.budget.exhausted():
            self._skip_rest(self.budget.why_skipped())
            return
        tokens = token_provider_for(self.config)
        scope = feed_scope(self.config.feed_base_url)
        result, facts = probe_token("feed.token", tokens, scope, authority=self.config.authority_host, wanted=FEED_ROLE)
        self.results["feed.token"] = result
        if facts is None:
            self._skip_rest("needs feed.token, which failed")
            return
        self.roles = facts.roles
        client = ActivityFeedClient(self.config, tokens=tokens, clock=self.now, sleep=time.sleep)
        try:
            started = self._subscriptions(client)
            if started is not None:
                self.results["feed.content"] = self._content(client, started)
        finally:
            client.close()

    def _subscriptions(self, client: ActivityFeedClient) -> list[str] | None:
        """The content types whose subscription this run started (None: the probe failed)."""
        try:
            before = {s.content_type: s for s in client.list_subscriptions()}
            missing = [t for t in CONTENT_TYPES if t not in before or not before[t].enabled]
            if missing:
                client.ensure_subscriptions(CONTENT_TYPES)
        except CollectorError as exc:
            self.results["feed.subscriptions"] = self._fail("feed.subscriptions", exc)
            self._skip_rest("needs feed.subscriptions, which failed")
            return None
        kept = [t for t in CONTENT_TYPES if t not in missing]
        detail = f"enabled: {', '.join(kept) or 'none'}"
        if missing:
            detail += (
                f"; started now: {', '.join(missing)} (the only change the doctor makes, and the one a feed "
                "collection's first read would make: the feed lists content only from a subscription's start on, "
                "the first within up to 12 hours; windows before it are read by search)"
            )
        self.results["feed.subscriptions"] = ok("feed.subscriptions", detail)
        return missing

    def _content(self, client: ActivityFeedClient, started: list[str]) -> ProbeResult:
        """The last two hours of one content type (one enabled before this run, when there is one)."""
        if self.budget.exhausted():
            return skipped("feed.content", self.budget.why_skipped())
        end = self.now().replace(microsecond=0)
        content_type = next((t for t in CONTENT_TYPES if t not in started), CONTENT_TYPES[0])
        try:
            listed = list(client.list_content(content_type, TimeWindow(end - RECENT, end)))
            if not listed:
                note = (
                    " (its subscription was started now: its first content can take up to 12 hours)"
                    if content_type in started
                    else ""
                )
                return ok(
                    "feed.content", f"{content_type}: no blob published in the last 2 hours (listing works){note}"
                )
            newest = max(listed, key=lambda c: c.created)
            page = client.fetch(newest)
        except CollectorError as exc:
            return self._fail("feed.content", exc)
        return ok(
            "feed.content",
            f"{content_type}: {len(listed)} blob(s) published in the last 2 hours; the newest fetched holds "
            f"{len(page.records)} record(s)" + (f" and {len(page.malformed)} malformed" if page.malformed else ""),
        )

    def end(self) -> None:
        return None

    def sign_in(self) -> TokenOutcome | None:
        result = self.results.get("feed.token")
        if result is None or result.outcome is Outcome.SKIPPED:
            return None
        granted = self.roles is None or any(r.startswith(FEED_ROLE) for r in self.roles)
        return TokenOutcome(result, self.roles, None if granted else f"Office 365 Management APIs {FEED_ROLE}")

    def tenant_step(self, client_id: str, states: list[str]) -> ProbeResult | None:
        return None


def feed_doctor(
    config: AuditApiConfig, budget: Budget, now: Callable[[], datetime], sleep: Callable[[float], None]
) -> FeedDoctor:
    return FeedDoctor(config, budget, now)
