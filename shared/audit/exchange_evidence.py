"""What closes an Exchange session: evidence the service cannot misstate, judged after every call (issue 17).

``ResultCount`` is never evidence: since 2026 it may report the ``ResultSize`` asked instead of the window's total.
After each call of a record type's session, :func:`judge` decides from the call's own facts:

* **closed** — a call that continued the session and returned fewer rows than it asked (``0 < n < ResultSize``), an
  empty *first* call (the window holds nothing), or ``moreRecordsAvailable: false`` where the service sends it;
* **go on** — a full call (``n == ResultSize``: maybe more), or ``moreRecordsAvailable: true`` after a short one;
* **untrusted** — the session cannot be relied on to continue: an empty call after full ones (exactly k x ResultSize
  records, or a session that ended early: no evidence either way), records this session had already delivered, the
  session cap reached without a short call. (Rows that restart at index 1 or skip or repeat indexes are caught while
  they arrive: ``exchange_paging.SessionBrokenError``.) The window is then split; a window that cannot be split any
  more is kept with what was read and reported incomplete with the reason.

Each record type's closing is kept as an evidence entry (:func:`entry`), carried to the chunk summary and the manifest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.audit.exchange_paging import SessionCursor

CLOSED, GO_ON, UNTRUSTED = "closed", "go on", "untrusted"


def _n(value: int) -> str:
    return f"{value:,}"


def _calls(count: int) -> str:
    return f"{count} full call{'' if count == 1 else 's'}"


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: str
    detail: str
    closed_by: str | None = None
    """For ``CLOSED``: "short", "empty" or "moreRecordsAvailable"."""
    continued: bool | None = None
    """What the call showed about the service: True when a later call of a session continued it, False when one
    did not (started over, came back empty after full calls, repeated records), None when it could not show."""


def untrusted(detail: str, *, continued: bool | None = False) -> Verdict:
    return Verdict(UNTRUSTED, detail, continued=continued)


def judge(session: SessionCursor, *, session_cap: int, repeats: int = 0) -> Verdict:
    """The verdict on ``session`` after the call that just ended (``session.last``).

    ``repeats``: records of this call that earlier calls of the same session had already delivered.
    """
    facts = session.last
    if facts is None:
        raise ValueError("judge() needs a call that ended")
    k = session.calls
    earlier = session.rows - facts.rows
    before = f" (after {_n(earlier)} rows in {_calls(k - 1)})" if k > 1 else ""
    later = k > 1 or None  # only a later call can show that sessions continue
    if repeats:
        detail = f"call {k} returned {_n(repeats)} record(s) this session had already delivered{before}"
        return untrusted(detail)
    if facts.more is False:
        return Verdict(
            CLOSED,
            f"call {k} returned {_n(facts.rows)} rows with moreRecordsAvailable false{before}",
            "moreRecordsAvailable",
            later,
        )
    if facts.rows == 0:
        if k == 1:
            return Verdict(CLOSED, "call 1 returned no rows: nothing in the window", "empty")
        if facts.more:
            return untrusted(f"call {k} returned no rows although moreRecordsAvailable said there were more{before}")
        return untrusted(
            f"call {k} returned no rows after {_calls(k - 1)} ({_n(earlier)} rows): exactly that many records, or a "
            "session that ended early"
        )
    if session.rows >= session_cap:  # a short call at the cap may have been cut short by it: no evidence
        return untrusted(
            f"the session reached its cap of {_n(session_cap)} rows in {k} calls without proving it had no more",
            continued=later,
        )
    if facts.rows < facts.asked and not facts.more:
        return Verdict(CLOSED, f"call {k} returned {_n(facts.rows)} < {_n(facts.asked)} rows{before}", "short", later)
    return Verdict(GO_ON, f"call {k} returned {_n(facts.rows)} = ResultSize rows: maybe more", continued=later)


def entry(
    record_type: str | None,
    session: SessionCursor,
    verdict: Verdict,
    *,
    sessions: int,
    incomplete: str | None = None,
) -> dict[str, Any]:
    """The evidence that closed one record type's session of a window (JSON for the summary and manifest)."""
    facts = session.last
    return {
        "recordType": record_type,
        "sessions": sessions,
        "calls": session.calls,
        "fullCalls": session.full_calls,
        "rows": session.rows,
        "lastCallRows": facts.rows if facts is not None else None,
        "resultSize": facts.asked if facts is not None else None,
        "closedBy": verdict.closed_by if incomplete is None else "incomplete",
        "complete": incomplete is None,
        "detail": verdict.detail if incomplete is None else incomplete,
    }
