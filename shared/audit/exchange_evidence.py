"""What closes an Exchange session: evidence the service cannot misstate, judged after every call (issues 17, 25).

``ResultCount`` is never evidence: since 2026 it may report the ``ResultSize`` asked instead of the window's total.
After each call of a record type's session, :func:`judge` decides from the call's own facts:

* **closed** — a call that continued the session and returned fewer rows than it asked (``0 < n < ResultSize``), or
  ``moreRecordsAvailable: false`` where the service sends it;
* **go on** — a full call (``n == ResultSize``: maybe more), or ``moreRecordsAvailable: true`` after a short one;
* **confirm** — a *first* call that answered "nothing": no rows, or only rows without a valid ``ResultIndex`` (the
  ``-1`` "bogus result"). The weakest evidence there is: public collectors have seen first answers of 0 that a re-run
  contradicted (Microsoft-Extractor-Suite #138) and retry bogus rows as server timeouts (ANSSI-FR/DFIR-O365RC). The
  window is asked again in a fresh session; :class:`EmptyRule` says how many agreeing empty answers close it and
  when the answers stay inconsistent (the window then ends incomplete with the reason, never complete);
* **untrusted** — the session cannot be relied on to continue: an empty call after full ones (exactly k x ResultSize
  records, or a session that ended early: no evidence either way), records this session had already delivered, the
  session cap reached without a short call, or a call whose indexes are not exactly the session's next ones over all
  of its HTTP pages (``exchange_paging.SessionBrokenError``). The window is then split; a window that cannot be split
  any more is kept with what was read and reported incomplete with the reason.

Each record type's closing is kept as an evidence entry (:func:`entry`), carried to the chunk summary and the manifest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.audit.exchange_paging import SessionCursor

CLOSED, GO_ON, UNTRUSTED, CONFIRM = "closed", "go on", "untrusted", "confirm"


def _n(value: int) -> str:
    return f"{value:,}"


def _calls(count: int) -> str:
    return f"{count} full call{'' if count == 1 else 's'}"


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: str
    detail: str
    closed_by: str | None = None
    """For ``CLOSED``: "short", "empty" or "moreRecordsAvailable"; for ``CONFIRM``: "empty" or "bogus"."""
    continued: bool | None = None
    """What the call showed about the service: True when a later call of a session continued it, False when one
    did not (started over, came back empty after full calls, repeated records), None when it could not show."""


SURPRISING_RECORDS = 5.0
"""An empty answer is *surprising* where the collection expected at least this many records in the window (the
density it learned from earlier windows x the window's length): a window whose count is Poisson with that mean is
empty less than once in a hundred."""
EMPTY_ANSWERS = 2
"""Agreeing empty answers, each from its own session, that close an unsurprising window: the first and one
confirmation (what public collectors do: run it again)."""
EMPTY_ANSWERS_SURPRISING = 3
"""The same where an empty answer is surprising: one more, so a window of thousands is never closed on two answers."""
SPARE_ANSWERS = 2
"""Answers beyond the needed ones (bogus rows, empties contradicted by rows seen before) before the answers are called
inconsistent: the record type then ends incomplete with the reason."""


@dataclass(frozen=True, slots=True)
class EmptyRule:
    """How an empty first answer is confirmed, from what the collection expects of the window."""

    expected: float | None = None
    """Records the window's densest record type is expected to hold (``shared.sources.exchange.sizing``); None: not
    learned."""

    @property
    def surprising(self) -> bool:
        return self.expected is not None and self.expected >= SURPRISING_RECORDS

    @property
    def needed(self) -> int:
        """Agreeing empty answers, each from a fresh session, that close the window as empty."""
        return EMPTY_ANSWERS_SURPRISING if self.surprising else EMPTY_ANSWERS

    @property
    def most(self) -> int:
        """Empty or bogus answers after which the record type ends incomplete (inconsistent answers)."""
        return self.needed + SPARE_ANSWERS

    def expectation(self) -> str:
        if self.expected is None:
            return "nothing learned about the tenant's density yet"
        return f"{self.expected:,.1f} record(s) expected from the density learned"

    def after(self, empties: int, bogus: int, *, seen: int = 0) -> Verdict | None:
        """After ``empties`` empty and ``bogus`` bogus first answers (each from its own session): closed as empty
        (enough agreeing answers, and no earlier session of the window delivered rows: ``seen``), untrusted
        (inconsistent answers: the record type ends incomplete with the reason), or None (ask again)."""
        if not seen and empties >= self.needed:
            more = f" and {bogus} bogus answer(s)" if bogus else ""
            detail = (
                f"{empties} first calls in {empties} fresh sessions returned no rows{more}; {self.needed} agreeing "
                f"empty answers close the window ({self.expectation()})"
            )
            return Verdict(CLOSED, detail, "empty")
        if empties + bogus < self.most:
            return None
        if seen:
            why = f"an earlier session of this window delivered {_n(seen)} rows, then {empties + bogus} fresh ones"
        else:
            why = f"{empties + bogus} first calls in fresh sessions"
        return untrusted(
            f"inconsistent answers: {why} answered {empties} time(s) with no rows and {bogus} time(s) with only rows "
            f"without a valid ResultIndex ({self.needed} agreeing empty answers were needed; {self.expectation()})",
            continued=None,
        )

    def answers(self, empties: int, bogus: int, *, false: bool) -> dict[str, Any] | None:
        """How a record type's empty or bogus first answers went, for its evidence entry (None: it had none);
        ``false``: rows came after them (or before them, in an earlier session)."""
        if not empties and not bogus:
            return None
        return {
            "emptyAnswers": empties,
            "bogusAnswers": bogus,
            "needed": self.needed,
            "expectedRecords": round(self.expected, 1) if self.expected is not None else None,
            "surprising": self.surprising,
            "false": false,
        }


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
    if facts.empty and k == 1:  # never trusted as it comes: asked again in a fresh session (EmptyRule)
        if facts.bogus:
            return Verdict(
                CONFIRM,
                f"call 1 returned only {_n(facts.bogus)} row(s) without a valid ResultIndex (a bogus answer)",
                "bogus",
            )
        return Verdict(CONFIRM, "call 1 returned no rows", "empty")
    if facts.more is False:
        return Verdict(
            CLOSED,
            f"call {k} returned {_n(facts.rows)} rows with moreRecordsAvailable false{before}",
            "moreRecordsAvailable",
            later,
        )
    if facts.rows == 0:
        if facts.bogus:
            return untrusted(f"call {k} returned only {_n(facts.bogus)} row(s) without a valid ResultIndex{before}")
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
    answers: dict[str, Any] | None = None,
    high_completeness: bool = False,
) -> dict[str, Any]:
    """The evidence that closed one record type's session of a window (JSON for the summary and manifest).

    ``answers``: how its empty or bogus first answers went (``emptyAnswers``, ``bogusAnswers``, the rule's
    ``needed`` and ``expectedRecords``; when rows came after them, they were false), absent when there were none.
    """
    facts = session.last
    extra: dict[str, Any] = {"answers": dict(answers)} if answers else {}
    return {
        **extra,
        "source": "exchange",
        "highCompleteness": high_completeness,
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
