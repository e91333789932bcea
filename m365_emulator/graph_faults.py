"""What the Graph audit query service answers falsely or fails at (``GraphSettings`` knobs; issue 25).

* ``unknown_error_rate`` (default 0.01): a call answered 400 ``UnknownError`` (not auditing off); nothing was done.
  CIPP-API retries exactly that (``New-CippAuditLogSearchV2.ps1``, ``Push-AuditLogDownloadV2.ps1``).
* ``gateway_error_rate`` (default 0.01): a call answered 502 or 504 with an HTML page and no ``Retry-After``, as a
  gateway in front of the service does; nothing was done.
* ``fail_rate``, ``vanish_rate``, ``stuck_rate`` (0.05, 0.02, 0.02): a query that ends ``failed``, one that is gone
  (404) once it would have finished, one that stays ``running`` for good; a stable draw per query (display name and
  window), so a query submitted again under another name draws again. CIPP re-plans searches that failed or ran over
  four hours. ``FaultConfig.query_outcomes`` overrides the draws for the next queries created.
* ``short_read_rate`` (0.2): the *first* read of a succeeded query ends early (no ``@odata.nextLink``) after a stable
  40-90 % of its records; later reads are whole (langwatch #7137: the same completed query paged twice within minutes
  gave materially different counts).

The tenant's daily submission quota is ``m365_emulator.graph_quota`` (``daily_submission_quota``).

Draws are stable per (seed, what is drawn, how many times it was drawn), as the Exchange faults are.
"""

from __future__ import annotations

import hashlib

from m365_emulator.config import GraphSettings
from m365_emulator.exchange_faults import StableDraws
from m365_emulator.wire import Reply, Request, api_error

GATEWAY_PAGE = (
    "<!DOCTYPE html><html><head><title>{status} {reason}</title></head><body><h1>{status} {reason}</h1>"
    "<p>The server, while acting as a gateway or proxy, did not get a valid response in time.</p></body></html>"
)
_REASONS = {502: "Bad Gateway", 504: "Gateway Timeout"}


def gateway_page(status: int) -> Reply:
    """A gateway's HTML error page (no JSON, no ``Retry-After``)."""
    page = GATEWAY_PAGE.format(status=status, reason=_REASONS.get(status, "Error"))
    return Reply(status, None, (("Content-Type", "text/html; charset=utf-8"),), raw=page.encode())


def unknown_error(request: Request) -> Reply:
    """A 400 ``UnknownError`` that is not auditing turned off (its message says nothing useful, as it does)."""
    return api_error(400, "UnknownError", "An unknown error has occurred.", request=request)


def _fraction(seed: int, key: str) -> float:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class GraphFaults:
    """The draws of one emulator's Graph faults, and each tenant's recent query submissions (thread-safe)."""

    def __init__(self) -> None:
        self._draws = StableDraws()

    def request_fault(self, request: Request, settings: GraphSettings, seed: int) -> Reply | None:
        """An ``UnknownError`` 400 or an HTML gateway error for this request, or None."""
        body = hashlib.sha256(request.body).hexdigest()
        key = f"{request.method}|{request.path}|{sorted(request.query.items())}|{body}"
        if self._draws.hit(seed, f"unknown|{key}", settings.unknown_error_rate):
            return unknown_error(request)
        if self._draws.hit(seed, f"gateway|{key}", settings.gateway_error_rate):
            return gateway_page(502 if self._draws.hit(seed, f"which|{key}", 0.5) else 504)
        return None

    @staticmethod
    def outcome(query_key: str, settings: GraphSettings, seed: int) -> str | None:
        """ "failed", "vanished", "stuck" or None (succeeds) for the query ``query_key`` (name and window)."""
        roll = _fraction(seed, f"outcome|{query_key}")
        for name, rate in (("failed", settings.fail_rate), ("vanished", settings.vanish_rate)):
            if roll < rate:
                return name
            roll -= rate
        return "stuck" if roll < settings.stuck_rate else None

    @staticmethod
    def short_at(query_key: str, returned: int, settings: GraphSettings, seed: int) -> int | None:
        """Where the first read of a query of ``returned`` records ends (None: it is whole)."""
        if returned < 2 or _fraction(seed, f"short|{query_key}") >= settings.short_read_rate:
            return None
        return max(1, int(returned * (0.4 + 0.5 * _fraction(seed, f"where|{query_key}"))))
