"""How one ``ReturnLargeSet`` session of ``Search-UnifiedAuditLog`` hangs together, call after call.

A session is read in cmdlet calls (each the session's next block of up to ``ResultSize`` rows), and each call's block
arrives in HTTP pages. Nothing the service *says* about the session is evidence that it is complete: since 2026
``ResultCount`` no longer reports the window's total (it may equal the ``ResultSize`` asked). What is checked here is
what the rows themselves show:

* ``ResultIndex`` runs on from where the previous call ended, checked when the call ends, over all of its HTTP pages
  in whatever order they came (the service picks its page size, and no source promises that a page holds a
  contiguous run of indexes when the rows are unsorted: a page-by-page check would break a session that is sound);
* a row without a valid ``ResultIndex`` (``-1``, the "bogus result" ANSSI-FR/DFIR-O365RC retries as a server
  timeout) is not a record: it is counted apart and never written;
* each call's facts (:class:`CallFacts`: how many rows it returned against the ``ResultSize`` it asked, the bogus
  rows, and ``moreRecordsAvailable`` where the service sends it) are kept for the judge
  (``exchange_evidence.judge``), which decides whether the session is closed by evidence, goes on, cannot be
  trusted, or (an empty or bogus first answer) must be confirmed in a fresh session.

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
    """Rows the call returned with a valid ``ResultIndex`` (good and malformed, inside or outside the window)."""
    asked: int
    """The ``ResultSize`` the call asked for."""
    more: bool | None = None
    """``moreRecordsAvailable`` where the service sent it (None: absent)."""
    result_count: int | None = None
    """The first row's ``ResultCount``: a hint at most, never evidence."""
    bogus: int = 0
    """Rows without a valid ``ResultIndex`` (``-1``): not records. A call of only such rows is a bogus answer."""

    @property
    def full(self) -> bool:
        return self.rows >= self.asked

    @property
    def empty(self) -> bool:
        """No row with a valid index: "nothing" (or a bogus row), the answer the service can give falsely."""
        return self.rows == 0


class SessionCursor:
    """One session's position (the next ``ResultIndex`` expected, calls so far) and the facts of its last call.

    During a call, :meth:`accept` notes each HTTP page's indexes (in any order, across pages); :meth:`end_call`
    checks them once the call's last page is in: exactly the next ``n`` indexes, each once. Only then does the
    session move past them.
    """

    def __init__(self, session_id: str, *, next_index: int = 1, calls: int = 0, full_calls: int = 0) -> None:
        self.session_id = session_id
        self.next_index = next_index
        self.calls = calls
        """Calls of this session that ended (before the one in progress)."""
        self.full_calls = full_calls
        self.last: CallFacts | None = None
        """The facts of the call that ended last (set by ``end_call``)."""
        self._asked = 0
        self._indexes: list[int] = []
        self._advanced = 0
        self._bogus = 0
        self._more: bool | None = None
        self._count: int | None = None

    @property
    def rows(self) -> int:
        """Rows this session delivered so far (calls that ended)."""
        return self.next_index - 1

    @property
    def in_call(self) -> int:
        """Rows with a valid index the call in progress returned so far."""
        return len(self._indexes) + self._advanced

    def start_call(self, asked: int) -> None:
        self._asked, self._more, self._count = asked, None, None
        self._indexes, self._advanced, self._bogus = [], 0, 0
        self.last = None

    def note(self, *, more: bool | None = None, result_count: int | None = None) -> None:
        """What a page of the call said about itself (the latest ``moreRecordsAvailable`` wins)."""
        if more is not None:
            self._more = more
        if result_count is not None and self._count is None:
            self._count = result_count

    def accept(self, rows: list[Any]) -> list[Any]:
        """Note a page's rows; returns those with a valid ``ResultIndex`` (the others are counted as bogus).

        Nothing is judged here: the rows of a call may arrive over its HTTP pages in any order, so the indexes are
        checked when the call ends (:meth:`end_call`).
        """
        good: list[Any] = []
        for row in rows:
            index = int_field(row, "ResultIndex") if isinstance(row, dict) else None
            if index is None or index < 1:
                self._bogus += 1
                continue
            self._indexes.append(index)
            good.append(row)
        return good

    def advance(self, count: int) -> None:
        """Move past ``count`` rows a source without ``ResultIndex`` delivered (test fakes)."""
        self._advanced += count

    def end_call(self, *, check: bool = True) -> CallFacts:
        """The call's facts, once its last page is in; raises :class:`SessionBrokenError` when its indexes are not
        exactly the session's next ones (``check=False``: count the call that broke, without judging it again)."""
        facts = CallFacts(self.in_call, self._asked, self._more, self._count, self._bogus)
        self.calls += 1
        self.full_calls += int(facts.full)
        self.last = facts
        if check:
            self._check_indexes()
        self.next_index += facts.rows
        return facts

    def _check_indexes(self) -> None:
        indexes = self._indexes
        where = f"call {self.calls} of session {self.session_id}"
        if indexes and self._bogus:
            raise SessionBrokenError(
                f"{where}: {self._bogus:,} row(s) without a valid ResultIndex among {len(indexes):,} good ones"
            )
        if not indexes:
            return
        low, high = min(indexes), max(indexes)
        expected_high = self.next_index + len(indexes) - 1
        contiguous = high - low + 1 == len(indexes) and len(set(indexes)) == len(indexes)
        if contiguous and low == self.next_index:
            return
        if contiguous and low > self.next_index:
            raise SessionBrokenError(
                f"{where} began at index {low} where {self.next_index} was expected: the session moved on without "
                "this reader",
                moved_on=True,
            )
        if low == 1 and self.next_index > 1:
            raise SessionBrokenError(f"{where} restarted at index 1 after {self.rows:,} rows", restarted=True)
        raise SessionBrokenError(
            f"{where}: ResultIndex not contiguous over the call's pages (expected {self.next_index}..{expected_high}, "
            f"got {len(indexes):,} rows in {low}..{high}, {len(indexes) - len(set(indexes)):,} repeated)"
        )
