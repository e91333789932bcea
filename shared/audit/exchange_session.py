"""An Exchange ``ReturnLargeSet`` session read one ``Search-UnifiedAuditLog`` call at a time, over the port.

:class:`ExchangeCursor` is where a reader is in a chunk's sessions (which record type's session, its id, the next row
index, the count): the collector's Exchange lane carries it as JSON from one activity to the next.
:func:`read_call` is one call: the next block of the session, with a new session started (bounded) when the one it
continues broke. :func:`read_window` is the same calls one after another for a whole window, the cursor carried the
way the lane carries it, for the ``doctor`` preflight, which must exercise exactly the code the collector runs.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from shared.audit.exchange_paging import SessionBrokenError, SessionCursor
from shared.audit.http import AmbiguousResponseError
from shared.audit.ports import AuditFilters, AuditSearchApi, RecordPage, TimeWindow
from shared.errors import TransientApiError

logger = logging.getLogger(__name__)

SESSION_RESTARTS = 2
"""New sessions a record type's read may start when the one it continues broke (a gap, a repeat, an unknown
outcome), over all of its calls."""

T = TypeVar("T")


@dataclass(frozen=True)
class ExchangeCursor:
    """Where an Exchange reader is in its chunk, carried between calls (JSON in the lane's state)."""

    type_index: int = 0
    """Which record type's session (``AuditSearchApi.record_types``) is being paged."""
    session_id: str | None = None
    """None: the next call starts a new session."""
    next_index: int = 1
    result_count: int | None = None
    limit: int | None = None
    """Set when the session is over the cap and the window cannot be split: it is paged up to the cap."""
    parts: tuple[str, ...] = ()
    incomplete: bool = False
    restarts: int = field(default=0, compare=False)
    """New sessions started for this record type so far. Carried between calls: a bound that each call counted
    afresh never ran out on a service whose every new session breaks after a block that did succeed."""

    def session(self) -> SessionCursor:
        cursor = SessionCursor(self.session_id or str(uuid.uuid4()), limit=self.limit)
        cursor.next_index = self.next_index
        cursor.result_count = self.result_count
        return cursor

    def after(self, session: SessionCursor, key: str) -> ExchangeCursor:
        """This cursor once a call of ``session`` wrote part ``key``."""
        capped = session.limit is not None and (session.result_count or 0) > session.limit
        if session.done:  # the next call starts the next record type's session
            return ExchangeCursor(
                type_index=self.type_index + 1, parts=(*self.parts, key), incomplete=self.incomplete or capped
            )
        return replace(
            self,
            session_id=session.session_id,
            next_index=session.next_index,
            result_count=session.result_count,
            limit=session.limit,
            parts=(*self.parts, key),
            incomplete=self.incomplete or capped,
        )

    def restarted(self) -> ExchangeCursor:
        return replace(self, session_id=None, next_index=1, result_count=None, limit=None, restarts=self.restarts + 1)

    def to_json(self) -> dict[str, Any]:
        return {
            "typeIndex": self.type_index,
            "sessionId": self.session_id,
            "nextIndex": self.next_index,
            "resultCount": self.result_count,
            "limit": self.limit,
            "parts": list(self.parts),
            "incomplete": self.incomplete,
            "restarts": self.restarts,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ExchangeCursor:
        if not data:
            return cls()
        count, limit = data.get("resultCount"), data.get("limit")
        return cls(
            type_index=int(data.get("typeIndex", 0)),
            session_id=data.get("sessionId"),
            next_index=int(data.get("nextIndex", 1)),
            result_count=int(count) if count is not None else None,
            limit=int(limit) if limit is not None else None,
            parts=tuple(str(k) for k in data.get("parts") or ()),
            incomplete=bool(data.get("incomplete", False)),
            restarts=int(data.get("restarts", 0)),
        )


@dataclass(frozen=True)
class BlockRead:
    """What every call of a chunk reads: its window, filters, sessions (one per record type) and switches."""

    window: TimeWindow
    filters: AuditFilters
    types: list[str | None]
    high_completeness: bool = False
    allow_over_cap: bool = False


def read_call(
    api: AuditSearchApi,
    read: BlockRead,
    cursor: ExchangeCursor,
    consume: Callable[[Iterator[RecordPage], Callable[[str], ExchangeCursor]], T],
) -> T:
    """One call of the session ``cursor`` names, handed to ``consume`` as its pages and the cursor after it.

    ``consume`` reads the pages (the call's HTTP pages are fetched as it goes), then may ask for the cursor after
    the call, given the part key it wrote. When the session cannot go on (:class:`SessionBrokenError`, or
    :class:`AmbiguousResponseError` for a first page whose outcome is unknown), a new session is started and
    ``consume`` runs again, at most ``SESSION_RESTARTS`` times for the record type (counted in the cursor, across
    calls); then :class:`TransientApiError`. Rows a new session
    delivers again are removed by id downstream. ``NeedsSplitError`` and other errors pass through.
    """
    while True:
        session = cursor.session()
        pages = api.read_block(
            read.window,
            read.filters,
            session,
            record_type=read.types[cursor.type_index],
            high_completeness=read.high_completeness,
            allow_over_cap=read.allow_over_cap,
        )

        def after(key: str, before: ExchangeCursor = cursor, session: SessionCursor = session) -> ExchangeCursor:
            return before.after(session, key)

        try:
            return consume(pages, after)
        except (AmbiguousResponseError, SessionBrokenError) as exc:
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
            cursor = cursor.restarted()


def read_window(
    api: AuditSearchApi,
    window: TimeWindow,
    filters: AuditFilters,
    *,
    high_completeness: bool = False,
    allow_over_cap: bool = False,
) -> Iterator[tuple[list[RecordPage], ExchangeCursor]]:
    """Every call of a window's sessions, as the lane reads a chunk: each call's HTTP pages and the cursor after it.

    Each call goes through :func:`read_call` and the cursor is carried to the next call as JSON, as the lane carries
    it between activities (its ``parts`` name the calls: ``"0"``, ``"1"``, ...). A window over the session cap raises
    ``NeedsSplitError`` on its first call, or with ``allow_over_cap`` is read up to the cap (the last cursor says
    ``incomplete``).
    """
    read = BlockRead(window, filters, api.record_types(filters), high_completeness, allow_over_cap)
    cursor = ExchangeCursor()
    while cursor.type_index < len(read.types):
        pages, after = read_call(api, read, cursor, lambda pages, after: (list(pages), after))
        cursor = ExchangeCursor.from_json(after(str(len(cursor.parts))).to_json())
        yield pages, cursor
