"""The doctor's Graph queries, submitted again when the service fails or loses one, as the collector does, and the
credit of the tenant's daily Graph quota each submission after the first takes.

The service fails some audit queries (status ``failed``) and loses others (404 once they would have finished); CIPP
re-plans searches that failed, and the collector resubmits such a query under a name of its own at most twice
(``shared.window.chunk_rules.RESUBMITS``). So does the doctor, for its probe query and for each query of the
service-filter probe, and its report says what it saw ("the service failed the first query; the second succeeded").
A query that stays unfinished is not submitted again: within its minutes the doctor cannot tell a stuck query from a
slow one, and says it stopped waiting.

Every submission counts against the tenant's daily Graph quota (at least 200 a rolling 24 hours, shared with every
other tool). Over HTTP the doctor's Graph slot of the tenant budget takes one credit when it is granted
(``http_api.budget_slots``): the probe query's. Every further submission asks :data:`credits` for another one first,
and is not made when the budget refuses it (the collector's share is spent). Run from the command line the doctor
holds no slot: nothing counts its submissions, and a resubmission says so.

The credits come through a context variable rather than a parameter, so the HTTP edge can hand them to the probes
without the runner in between knowing about budgets (``asyncio.to_thread`` copies the context into the worker
thread the doctor runs in).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol

RESUBMITS = 2
"""Times the doctor submits a query again after the service failed or lost it: the collector's bound."""

_ORDINALS = ("first", "second", "third", "fourth")


class SubmissionCredits(Protocol):
    """Credits of the tenant's daily Graph quota for the doctor's submissions after its first."""

    counted: bool
    """False: no tenant budget counts the doctor's submissions here."""

    def take(self) -> str | None:
        """Take a credit for one more submission: None when taken (or nothing counts), else why not (then the query
        is not submitted)."""
        ...


@dataclass
class Uncounted:
    """No tenant budget here (the doctor run from the command line, or without a budget): nothing is counted."""

    counted: bool = False

    def take(self) -> str | None:
        return None


_CREDITS: ContextVar[SubmissionCredits | None] = ContextVar("doctor_submission_credits", default=None)


def credits() -> SubmissionCredits:
    """The credits of the run in this context (:class:`Uncounted` when the edge gave none)."""
    return _CREDITS.get() or Uncounted()


@contextlib.contextmanager
def counting(given: SubmissionCredits | None) -> Iterator[None]:
    """Doctor runs started inside take their submission credits from ``given``."""
    token = _CREDITS.set(given)
    try:
        yield
    finally:
        _CREDITS.reset(token)


def ordinal(index: int) -> str:
    return _ORDINALS[index] if index < len(_ORDINALS) else f"#{index + 1}"


@dataclass
class Submissions:
    """The submissions of one doctor query, what the service did with each one given up on, and why no more was
    submitted when the bound or the quota stopped it."""

    credits: SubmissionCredits = field(default_factory=credits)
    given_up: list[str] = field(default_factory=list)
    """What the service did with each query given up on, oldest first: "failed", "cancelled" or "lost" (404 when
    checked)."""
    given_up_ids: list[str] = field(default_factory=list)
    refused: str = ""
    """Why the last one given up on was not submitted again (the quota), if that stopped it."""

    def give_up(self, query_id: str, what: str) -> bool:
        """The current query is given up on (``what`` the service did); True when another may be submitted now (a
        credit taken): within the bound, and the quota allows it."""
        self.given_up.append(what)
        self.given_up_ids.append(query_id)
        if len(self.given_up) > RESUBMITS:
            return False
        refusal = self.credits.take()
        if refusal is not None:
            self.refused = refusal
            return False
        return True

    def suffix(self) -> str:
        """The display-name suffix of the next submission (the collector's form: ``-r1``, ``-r2``)."""
        return f"-r{len(self.given_up)}"

    def story(self, last: str | None = None) -> str:
        """What the service did, in order, e.g. "the service failed the first query; the second succeeded"; ``last``
        is what became of the current query (None: the story ends with the ones given up on). Empty when the first
        query is the current one and nothing was given up."""
        if not self.given_up:
            return ""
        parts = [
            f"the service {what} the {ordinal(i)} query" + (" (404 when checked)" if what == "lost" else "")
            for i, what in enumerate(self.given_up)
        ]
        text = "; ".join(parts)
        if last is not None:
            text += f"; the {ordinal(len(self.given_up))} {last}"
        elif self.refused:
            text += f"; not submitted again: {self.refused}"
        elif len(self.given_up) > RESUBMITS:
            text += f" (submitted {RESUBMITS + 1} times, the collector's bound)"
        if not self.credits.counted:
            text += " (no tenant budget counts the doctor's submissions here)"
        return text
