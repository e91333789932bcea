"""How one ``ReturnLargeSet`` session of ``Search-UnifiedAuditLog`` hangs together, call after call.

A session is read in cmdlet calls (each the session's next block of up to ``ResultSize`` rows), and each call's block
arrives in HTTP pages. Nothing the service *says* about the session is evidence that it is complete: since 2026
``ResultCount`` no longer reports the window's total (it may equal the ``ResultSize`` asked). What is checked here is
what the rows themselves show:

* ``ResultIndex`` runs on from where the previous call ended, page by page (the rows of a page may come in any
  order, so a page's indexes must be exactly the next ones as a set);
* each call's facts (:class:`CallFacts`: how many rows it returned against the ``ResultSize`` it asked, and
  ``moreRecordsAvailable`` where the service sends it) are kept for the judge (``exchange_evidence.judge``), which
  decides whether the session is closed by evidence, goes on, or cannot be trusted.

A 200 may be a failure in disguise: :func:`failed_warning` reads its ``@adminapi.warnings`` (the adapter makes such an
answer an unknown outcome, retried, never an empty window).

Rows that do not continue the session raise :class:`SessionBrokenError`: ``moved_on`` when the call began *past* the
expected index (the session advanced without this reader: a call whose answer was lost; a new session heals it),
otherwise the session started over, repeated or skipped rows, and cannot be trusted to go on (the window is split).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.errors import TransientApiError

RESULT_SIZE = 5000
"""Rows one Search-UnifiedAuditLog call asks for (the cmdlet's maximum)."""
SESSION_CAP = 50_000
"""Most records one ReturnLargeSet session can page through (Search-UnifiedAuditLog docs)."""
WARNINGS_KEY = "@adminapi.warnings"
FAILED_WARNINGS = ("task was canceled", "task was cancelled", "failed to process request", "operation was canceled")
"""Warning texts on a 200 that mean the cmdlet did not run to its end (Microsoft-Extractor-Suite retries a call whose
warnings say so; CIPP reads ``@adminapi.warnings``): matched case-insensitively."""
_MORE_KEYS = ("morerecordsavailable",)
_METADATA_KEYS = ("auditsearchrequestmetadata",)


class SessionBrokenError(TransientApiError):
    """The session's rows stopped adding up (started over, a gap, a repeat, an empty page with a link)."""

    def __init__(self, message: str, *, moved_on: bool = False, restarted: bool = False) -> None:
        super().__init__(message)
        self.moved_on = moved_on
        """The call began past the expected index: the session moved on without this reader (a new one heals it)."""
        self.restarted = restarted
        """The call began again at index 1: this service's sessions do not continue."""


def int_field(row: dict[str, Any], name: str) -> int | None:
    value = row.get(name)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def is_empty_result(rows: list[Any]) -> bool:
    """The service says "nothing" with an empty list, or with one row whose ResultCount is 0 and which carries no
    record (no ``ResultIndex`` of 1 or more). A row with an index of its own is a record whatever its count says: a
    session that over-delivers announces 0 with the one record it returns."""
    if not rows:
        return True
    if len(rows) != 1 or not isinstance(rows[0], dict):
        return False
    index = int_field(rows[0], "ResultIndex")
    return int_field(rows[0], "ResultCount") == 0 and (index is None or index < 1)


def warnings_of(response: dict[str, Any] | None) -> list[str]:
    """The ``@adminapi.warnings`` of a response (a list of texts, or one text)."""
    value = response.get(WARNINGS_KEY) if isinstance(response, dict) else None
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, list) else []


def failed_warning(response: dict[str, Any]) -> str | None:
    """A warning saying the cmdlet was cancelled or failed: the 200 is a transient failure, whatever rows it has."""
    for warning in warnings_of(response):
        lowered = warning.lower()
        if any(marker in lowered for marker in FAILED_WARNINGS):
            return f"InvokeCommand answered 200 with the warning {warning[:200]!r}"
    return None


def more_records_flag(container: Any) -> bool | None:
    """``moreRecordsAvailable`` of a response or a row (any letter case, also inside ``AuditSearchRequestMetadata``);
    None when absent (the service need not send it)."""
    if not isinstance(container, dict):
        return None
    for key, value in container.items():
        lowered = key.lower() if isinstance(key, str) else ""
        if lowered in _MORE_KEYS and isinstance(value, bool):
            return value
        if lowered in _METADATA_KEYS:
            found = more_records_flag(value)
            if found is not None:
                return found
    return None


@dataclass(frozen=True, slots=True)
class CallFacts:
    """What one cmdlet call of a session showed."""

    rows: int
    """Rows the call returned (good and malformed, inside or outside the window)."""
    asked: int
    """The ``ResultSize`` the call asked for."""
    more: bool | None = None
    """``moreRecordsAvailable`` where the service sent it (None: absent)."""
    result_count: int | None = None
    """The first row's ``ResultCount``: a hint at most, never evidence."""

    @property
    def full(self) -> bool:
        return self.rows >= self.asked


class SessionCursor:
    """One session's position (the next ``ResultIndex`` expected, calls so far) and the facts of its last call."""

    def __init__(self, session_id: str, *, next_index: int = 1, calls: int = 0, full_calls: int = 0) -> None:
        self.session_id = session_id
        self.next_index = next_index
        self.calls = calls
        """Calls of this session that ended (before the one in progress)."""
        self.full_calls = full_calls
        self.last: CallFacts | None = None
        """The facts of the call that ended last (set by ``end_call``)."""
        self._asked = 0
        self._in_call = 0
        self._more: bool | None = None
        self._count: int | None = None

    @property
    def rows(self) -> int:
        """Rows this session delivered so far."""
        return self.next_index - 1

    def start_call(self, asked: int) -> None:
        self._asked, self._in_call, self._more, self._count = asked, 0, None, None
        self.last = None

    def note(self, *, more: bool | None = None, result_count: int | None = None) -> None:
        """What a page of the call said about itself (the latest ``moreRecordsAvailable`` wins)."""
        if more is not None:
            self._more = more
        if result_count is not None and self._count is None:
            self._count = result_count

    def accept(self, rows: list[Any]) -> None:
        """Check that a page's rows are the session's next ones (in any order), then move past them."""
        if not rows:
            return
        indexes: list[int] = []
        for row in rows:
            index = int_field(row, "ResultIndex") if isinstance(row, dict) else None
            if index is None or index < 1:
                raise SessionBrokenError(f"session {self.session_id}: a row without a valid ResultIndex")
            indexes.append(index)
        low = min(indexes)
        expected = range(self.next_index, self.next_index + len(indexes))
        if sorted(indexes) != list(expected):
            first_of_call = self._in_call == 0
            contiguous = sorted(indexes) == list(range(low, low + len(indexes)))
            where = f"call {self.calls + 1} of session {self.session_id}"
            if first_of_call and contiguous and low > self.next_index:
                raise SessionBrokenError(
                    f"{where} began at index {low} where {self.next_index} was expected: the session moved on "
                    "without this reader",
                    moved_on=True,
                )
            if first_of_call and low == 1 and self.next_index > 1:
                raise SessionBrokenError(f"{where} restarted at index 1 after {self.rows:,} rows", restarted=True)
            raise SessionBrokenError(
                f"{where}: ResultIndex not contiguous (expected {self.next_index}..{expected[-1]}, got {low}.."
                f"{max(indexes)})"
            )
        self.next_index += len(indexes)
        self._in_call += len(indexes)

    def advance(self, count: int) -> None:
        """Move past ``count`` rows a source without ``ResultIndex`` delivered (test fakes)."""
        self.next_index += count
        self._in_call += count

    def end_call(self) -> CallFacts:
        facts = CallFacts(self._in_call, self._asked, self._more, self._count)
        self.calls += 1
        self.full_calls += int(facts.full)
        self.last = facts
        return facts
