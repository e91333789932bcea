"""An Exchange ``ReturnLargeSet`` session read one ``Search-UnifiedAuditLog`` call at a time, over the port.

:class:`ExchangeCursor` is where a reader is in a chunk's sessions (which record type, the session's id, next row
index and calls so far, the evidence that closed the types already read): the collector's Exchange lane carries it as
JSON from one activity to the next. :func:`read_call` is one call, judged by its evidence
(``shared.audit.exchange_evidence``): the session goes on, is closed, or cannot be trusted — then the window is split
(:class:`NeedsSplitError`), or, when it cannot be split any more, the record type is closed *incomplete* with the
reason. A call whose answer was lost (:class:`AmbiguousResponseError`, or rows that begin past where the reader was)
starts a new session (bounded); the rows it repeats are removed by id downstream. :func:`read_window` is the same
calls one after another for a whole window, the cursor carried the way the lane carries it, for the ``doctor``
preflight, which must exercise exactly the code the collector runs.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from shared.audit.exchange_evidence import (
    CLOSED,
    CONFIRM,
    GO_ON,
    EmptyRule,
    Verdict,
    entry,
    judge,
    untrusted,
)
from shared.audit.exchange_paging import SessionBrokenError, SessionCursor
from shared.audit.http import AmbiguousResponseError
from shared.audit.normalise import pascal
from shared.audit.ports import AuditFilters, AuditSearchApi, RecordPage, TimeWindow
from shared.errors import NeedsSplitError, TransientApiError

logger = logging.getLogger(__name__)

SESSION_RESTARTS = 2
"""New sessions a record type's read may start when the answer of a call was lost (its outcome unknown, or the
session moved on without the reader), over all of its calls."""

T = TypeVar("T")


@dataclass(frozen=True)
class BlockRead:
    """What every call of a chunk reads: its window, filters, sessions (one per record type) and switches."""

    window: TimeWindow
    filters: AuditFilters
    types: list[str | None]
    high_completeness: bool = False
    splittable: bool = True
    """False for a window at the minimum split: what cannot be proven is reported incomplete instead of split."""
    session_cap: int = 50_000
    split_on_full: bool = False
    """This collection learned that the service's sessions do not continue: a full call splits at once (when the
    window can be split) instead of spending a second call that cannot help."""
    empty_rule: EmptyRule = field(default_factory=EmptyRule)
    """How an empty first answer is confirmed (from the density the collection learned)."""

    def type_name(self, index: int) -> str | None:
        record_type = self.types[index]
        return pascal(record_type) if record_type else None


@dataclass(frozen=True)
class ExchangeCursor:
    """Where an Exchange reader is in its chunk, carried between calls (JSON in the lane's state)."""

    type_index: int = 0
    """Which record type's session (``AuditSearchApi.record_types``) is being paged."""
    session_id: str | None = None
    """None: the next call starts a new session."""
    next_index: int = 1
    calls: int = 0
    """Calls of the current session so far."""
    full_calls: int = 0
    parts: tuple[str, ...] = ()
    restarts: int = field(default=0, compare=False)
    """New sessions started for this record type so far. Carried between calls: a bound that each call counted
    afresh never ran out on a service whose every new session breaks after a block that did succeed."""
    evidence: tuple[dict[str, Any], ...] = ()
    """Per record type read so far, what closed its session (``exchange_evidence.entry``)."""
    chunk_calls: int = 0
    """Every call of the chunk (new sessions included): what the collection reports it needed."""
    chunk_full_calls: int = 0
    max_rows: int = 0
    """The most rows one record type's session delivered in this chunk (a lower bound of the densest type's count,
    exact once the chunk is done): what the collection learns the tenant's density from."""
    continues: bool | None = None
    """What this chunk's calls showed about the service's sessions (``Verdict.continued``, the latest)."""
    hint: int = 0
    """The most records a full call's ``ResultCount`` announced beyond what was read: never evidence, but a claim of
    "more" the window may size its next chunks by (it can only cost extra splits)."""
    empty_answers: int = 0
    """This record type's first calls that answered no rows so far (each in its own session)."""
    bogus_answers: int = 0
    """This record type's first calls that answered only rows without a valid ``ResultIndex``."""
    type_rows: int = 0
    """The most rows an earlier session of this record type delivered (one a lost answer made the reader leave):
    an empty answer after it is certainly false."""
    disproved: int = 0
    """Of this record type's empty and bogus answers, those rows read since have proved false (counted)."""
    confirmations: int = 0
    """Calls of the chunk that asked again after an empty or bogus first answer."""
    false_answers: int = 0
    """Empty or bogus first answers of the chunk that rows read afterwards proved false."""

    @property
    def incomplete(self) -> bool:
        return any(not e.get("complete", True) for e in self.evidence)

    def reasons(self) -> list[str]:
        """Why the chunk is incomplete, one line per record type that could not be proven complete."""
        return [str(e["detail"]) for e in self.evidence if not e.get("complete", True)]

    def session(self) -> SessionCursor:
        return SessionCursor(
            self.session_id or str(uuid.uuid4()),
            next_index=self.next_index,
            calls=self.calls,
            full_calls=self.full_calls,
        )

    def _counted(self, session: SessionCursor, verdict: Verdict | None) -> ExchangeCursor:
        """The chunk-wide tallies once a call of ``session`` ended."""
        facts = session.last
        continued = verdict.continued if verdict is not None and verdict.continued is not None else self.continues
        announced = facts.result_count if facts is not None and facts.full and facts.result_count else 0
        # The first rows after empty or bogus first answers: those answers were false (counted once).
        unanswered = self.empty_answers + self.bogus_answers - self.disproved
        disproved = unanswered if facts is not None and facts.rows > 0 else 0
        return replace(
            self,
            false_answers=self.false_answers + disproved,
            disproved=self.disproved + disproved,
            chunk_calls=self.chunk_calls + 1,
            chunk_full_calls=self.chunk_full_calls + int(facts is not None and facts.full),
            max_rows=max(self.max_rows, session.rows),
            continues=continued,
            hint=max(self.hint, announced if announced > session.rows else 0),
        )

    def after(self, session: SessionCursor, key: str, verdict: Verdict, read: BlockRead) -> ExchangeCursor:
        """This cursor once a call of ``session`` wrote part ``key`` and was judged ``verdict``.

        Raises :class:`NeedsSplitError` when the session cannot be trusted and the window can be split (or a full
        call came from a service whose sessions do not continue).
        """
        counted = self._counted(session, verdict)
        if verdict.kind == CONFIRM:
            return self._unconfirmed(counted, session, key, verdict, read)
        facts = session.last
        if verdict.kind == GO_ON and read.split_on_full and read.splittable and facts is not None and facts.full:
            verdict = untrusted(
                f"{verdict.detail}; this collection's sessions do not continue (learned from an earlier window)",
                continued=None,
            )
        if verdict.kind == GO_ON:
            return replace(
                counted,
                session_id=session.session_id,
                next_index=session.next_index,
                calls=session.calls,
                full_calls=session.full_calls,
                parts=(*self.parts, key),
            )
        if verdict.kind != CLOSED and read.splittable:
            raise self._split(counted, read, verdict.detail)
        incomplete = None if verdict.kind == CLOSED else self._incomplete(read, verdict.detail)
        return self._closed(counted, session, key, verdict, read, incomplete=incomplete)

    def _closed(
        self,
        counted: ExchangeCursor,
        session: SessionCursor,
        key: str,
        verdict: Verdict,
        read: BlockRead,
        *,
        incomplete: str | None,
        empties: int | None = None,
        bogus: int | None = None,
    ) -> ExchangeCursor:
        """The cursor once the record type is done (closed by evidence, or incomplete with ``incomplete``)."""
        empties = self.empty_answers if empties is None else empties
        bogus = self.bogus_answers if bogus is None else bogus
        rows_after = session.rows > 0  # rows came after the empty answers: they were false
        closing = entry(
            read.type_name(self.type_index),
            session,
            verdict,
            sessions=self.restarts + self.empty_answers + self.bogus_answers + 1,
            incomplete=incomplete,
            answers=read.empty_rule.answers(empties, bogus, false=rows_after or self.type_rows > 0),
            high_completeness=read.high_completeness,
        )
        return ExchangeCursor(
            type_index=self.type_index + 1,
            parts=(*self.parts, key),
            evidence=(*self.evidence, closing),
            chunk_calls=counted.chunk_calls,
            chunk_full_calls=counted.chunk_full_calls,
            max_rows=counted.max_rows,
            continues=counted.continues,
            hint=counted.hint,
            confirmations=counted.confirmations,
            false_answers=counted.false_answers,
        )

    def _unconfirmed(
        self, counted: ExchangeCursor, session: SessionCursor, key: str, verdict: Verdict, read: BlockRead
    ) -> ExchangeCursor:
        """After a first call that answered "nothing" (no rows, or only bogus ones): asked again in a fresh session,
        closed as empty once enough answers agree, or ended incomplete when the answers stay inconsistent."""
        empties = self.empty_answers + int(verdict.closed_by == "empty")
        bogus = self.bogus_answers + int(verdict.closed_by == "bogus")
        ended = read.empty_rule.after(empties, bogus, seen=self.type_rows)
        if ended is not None:  # confirmed empty, or inconsistent answers (the record type ends incomplete)
            incomplete = None if ended.kind == CLOSED else ended.detail
            return self._closed(counted, session, key, ended, read, incomplete=incomplete, empties=empties, bogus=bogus)
        rule = read.empty_rule
        logger.info("%s; asking again in a fresh session (%s)", verdict.detail, rule.expectation())
        return replace(
            counted,
            session_id=None,
            next_index=1,
            calls=0,
            full_calls=0,
            parts=(*self.parts, key),
            empty_answers=empties,
            bogus_answers=bogus,
            confirmations=counted.confirmations + 1,
        )

    def _incomplete(self, read: BlockRead, detail: str) -> str:
        seconds = (read.window.end - read.window.start).total_seconds()
        return f"window of {seconds:g} s cannot be split further (COLLECTOR_MIN_SPLIT_SECONDS): {detail}"

    def _split(self, counted: ExchangeCursor, read: BlockRead, detail: str) -> NeedsSplitError:
        record_type = read.type_name(self.type_index)
        scope = f" (RecordType {record_type})" if record_type else ""
        window = f"{read.window.start.isoformat()}..{read.window.end.isoformat()}"
        return NeedsSplitError(
            f"{window}{scope}: {detail}; the window is split",
            evidence=counted.stats(since=self, exact=False),
        )

    def broken(self, session: SessionCursor, key: str, exc: SessionBrokenError, read: BlockRead) -> ExchangeCursor:
        """After rows that did not continue the session (started over, a gap or repeat of indexes)."""
        if session.last is None:  # the call happened: count it, with the rows it showed before it broke
            session.end_call(check=False)
        return self.after(session, key, untrusted(str(exc)), read)

    def restarted(self, rows: int = 0) -> ExchangeCursor:
        """A new session for the record type; ``rows``: what the abandoned one had delivered."""
        return replace(
            self,
            session_id=None,
            next_index=1,
            calls=0,
            full_calls=0,
            restarts=self.restarts + 1,
            type_rows=max(self.type_rows, rows),
        )

    def stats(self, *, since: ExchangeCursor, exact: bool) -> dict[str, Any]:
        """What the calls from ``since`` to this cursor cost and showed (the window learns from it)."""
        return {
            "calls": self.chunk_calls - since.chunk_calls,
            "fullCalls": self.chunk_full_calls - since.chunk_full_calls,
            "rows": self.max_rows,
            "exact": exact,
            "continues": self.continues,
            "hint": self.hint,
            **{
                name: value
                for name, value in (
                    ("confirmations", self.confirmations - since.confirmations),
                    ("falseAnswers", self.false_answers - since.false_answers),
                )
                if value
            },
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "typeIndex": self.type_index,
            "sessionId": self.session_id,
            "nextIndex": self.next_index,
            "calls": self.calls,
            "fullCalls": self.full_calls,
            "parts": list(self.parts),
            "restarts": self.restarts,
            "evidence": [dict(e) for e in self.evidence],
            "chunkCalls": self.chunk_calls,
            "chunkFullCalls": self.chunk_full_calls,
            "maxRows": self.max_rows,
            "continues": self.continues,
            "hint": self.hint,
            "emptyAnswers": self.empty_answers,
            "bogusAnswers": self.bogus_answers,
            "typeRows": self.type_rows,
            "disproved": self.disproved,
            "confirmations": self.confirmations,
            "falseAnswers": self.false_answers,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ExchangeCursor:
        if not data:
            return cls()
        continues = data.get("continues")
        return cls(
            type_index=int(data.get("typeIndex", 0)),
            session_id=data.get("sessionId"),
            next_index=int(data.get("nextIndex", 1)),
            calls=int(data.get("calls", 0)),
            full_calls=int(data.get("fullCalls", 0)),
            parts=tuple(str(k) for k in data.get("parts") or ()),
            restarts=int(data.get("restarts", 0)),
            evidence=tuple(dict(e) for e in data.get("evidence") or ()),
            chunk_calls=int(data.get("chunkCalls", 0)),
            chunk_full_calls=int(data.get("chunkFullCalls", 0)),
            max_rows=int(data.get("maxRows", 0)),
            continues=bool(continues) if continues is not None else None,
            hint=int(data.get("hint", 0)),
            empty_answers=int(data.get("emptyAnswers", 0)),
            bogus_answers=int(data.get("bogusAnswers", 0)),
            type_rows=int(data.get("typeRows", 0)),
            disproved=int(data.get("disproved", 0)),
            confirmations=int(data.get("confirmations", 0)),
            false_answers=int(data.get("falseAnswers", 0)),
        )


After = Callable[..., ExchangeCursor]
"""``after(key, repeats=0)``: the cursor once the call wrote part ``key``; ``repeats`` are the records of the call
that earlier parts of the chunk already held (from a session never restarted, they mean the session repeats itself)."""


def read_call(
    api: AuditSearchApi,
    read: BlockRead,
    cursor: ExchangeCursor,
    consume: Callable[[Iterator[RecordPage], After], T],
) -> T:
    """One call of the session ``cursor`` names, handed to ``consume`` as its pages and the cursor after it.

    ``consume`` reads the pages (the call's HTTP pages are fetched as it goes), then asks for the cursor after the
    call (``after``), which judges the call and may raise :class:`NeedsSplitError`. When the call's answer was lost
    (:class:`AmbiguousResponseError`) or the session moved on without the reader, a new session is started and
    ``consume`` runs again, at most ``SESSION_RESTARTS`` times for the record type (counted in the cursor, across
    calls); then :class:`TransientApiError`. Rows that do not continue the session otherwise split the window, or,
    at the minimum window, close the record type incomplete (``consume`` then gets no pages). Other errors pass.
    """
    while True:
        session = cursor.session()
        pages = api.read_block(
            read.window,
            read.filters,
            session,
            record_type=read.types[cursor.type_index],
            high_completeness=read.high_completeness,
            allow_over_cap=not read.splittable,
        )

        def after(
            key: str, repeats: int = 0, before: ExchangeCursor = cursor, session: SessionCursor = session
        ) -> ExchangeCursor:
            if session.last is None:
                session.end_call()
            counted = repeats if before.restarts == 0 else 0  # a new session repeats the old one's rows by design
            return before.after(session, key, judge(session, session_cap=read.session_cap, repeats=counted), read)

        try:
            return consume(pages, after)
        except AmbiguousResponseError as exc:
            cursor = _restart(cursor, session, exc)
        except SessionBrokenError as exc:
            if exc.moved_on:
                cursor = _restart(cursor, session, exc)
                continue
            if read.splittable:
                cursor.broken(session, "-", exc, read)  # raises NeedsSplitError: the window is split

            def closed(
                key: str,
                repeats: int = 0,
                before: ExchangeCursor = cursor,
                session: SessionCursor = session,
                exc: SessionBrokenError = exc,
            ) -> ExchangeCursor:
                return before.broken(session, key, exc, read)

            return consume(iter(()), closed)


def _restart(cursor: ExchangeCursor, session: SessionCursor, exc: TransientApiError) -> ExchangeCursor:
    if cursor.restarts >= SESSION_RESTARTS:
        raise TransientApiError(
            f"session {session.session_id} broke and {cursor.restarts} new session(s) did not help: {exc}"
        ) from None
    logger.warning(
        "session %s at index %d: %s; starting a new session (rows it repeats are removed by id)",
        session.session_id,
        session.next_index - 1,
        exc,
    )
    return cursor.restarted(session.rows)


def read_window(
    api: AuditSearchApi,
    window: TimeWindow,
    filters: AuditFilters,
    *,
    high_completeness: bool = False,
    splittable: bool = True,
    empty_rule: EmptyRule | None = None,
) -> Iterator[tuple[list[RecordPage], ExchangeCursor]]:
    """Every call of a window's sessions, as the lane reads a chunk: each call's HTTP pages and the cursor after it.

    Each call goes through :func:`read_call` and the cursor is carried to the next call as JSON, as the lane carries
    it between activities (its ``parts`` name the calls: ``"0"``, ``"1"``, ...). A window whose sessions cannot be
    proven complete raises :class:`NeedsSplitError`, or, not ``splittable``, ends with the cursor's evidence saying
    which record type is incomplete and why.
    """
    read = BlockRead(
        window,
        filters,
        api.record_types(filters),
        high_completeness,
        splittable,
        session_cap=getattr(api, "session_cap", 50_000),
        empty_rule=empty_rule or EmptyRule(),
    )
    cursor = ExchangeCursor()
    while cursor.type_index < len(read.types):
        key = str(len(cursor.parts))

        def consume(pages: Iterator[RecordPage], after: After, key: str = key) -> tuple[list[RecordPage], Any]:
            return list(pages), after(key)

        pages, after = read_call(api, read, cursor, consume)
        cursor = ExchangeCursor.from_json(after.to_json())
        yield pages, cursor
