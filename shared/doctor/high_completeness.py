"""``exchange.highcompleteness``: does the tenant accept ``Search-UnifiedAuditLog -HighCompleteness``?

The cmdlet's doc says that without the switch results "might have missing search results", and that the switch
"isn't available in all organizations". A collection asks for it per request (``highCompleteness: true``) and its
manifest says whether it was used (``options.highCompleteness``, and per chunk in its evidence); this probe makes one
call of one row over the last 15 minutes with the switch, in a throwaway session, and says whether the tenant took it.
Read-only, like every Exchange probe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from shared.audit.auth import token_provider_for
from shared.audit.config import AuditApiConfig
from shared.audit.exchange import ExchangeAuditClient
from shared.audit.ports import TimeWindow
from shared.doctor.fixes import failure
from shared.doctor.model import Budget, Outcome, ProbeResult, brief, ok, skipped, warning
from shared.errors import CollectorError, PermanentApiError

PROBE = "exchange.highcompleteness"
WINDOW = timedelta(minutes=15)
REFUSED_FIX = (
    "leave highCompleteness off for this tenant (a collection that asks for it fails every call); the "
    "Search-UnifiedAuditLog doc says the switch isn't available in all organizations"
)


def probe_high_completeness(
    config: AuditApiConfig, earlier: Mapping[str, ProbeResult], budget: Budget, now: Callable[[], datetime]
) -> ProbeResult:
    """One call with ``-HighCompleteness``: ok (accepted), warning (refused), or why it could not be asked."""
    role = earlier.get("exchange.role")
    if role is None or role.outcome is not Outcome.OK:
        return skipped(PROBE, "needs exchange.role, which did not pass")
    if budget.exhausted():
        return skipped(PROBE, budget.why_skipped())
    end = now().replace(microsecond=0)
    client = ExchangeAuditClient(config, tokens=token_provider_for(config))
    try:
        seen = client.probe(TimeWindow(end - WINDOW, end), result_size=1, high_completeness=True)
    except PermanentApiError as exc:
        if "highcompleteness" in str(exc).lower():
            return warning(PROBE, f"the tenant refused -HighCompleteness ({brief(exc)})", REFUSED_FIX)
        return failure(PROBE, exc, endpoint=config.exchange_base_url, endpoint_setting="AUDIT_EXCHANGE_BASE_URL")
    except CollectorError as exc:
        return failure(PROBE, exc, endpoint=config.exchange_base_url, endpoint_setting="AUDIT_EXCHANGE_BASE_URL")
    finally:
        client.close()
    return ok(
        PROBE,
        f"the tenant accepts -HighCompleteness (one call over the last 15 minutes returned {seen.rows} row(s)); a "
        "collection asks for it with highCompleteness: true (completeness over speed: calls are slower) and its "
        "manifest says so",
    )
