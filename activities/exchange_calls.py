"""An Exchange chunk as a chain of short activities: one ``Search-UnifiedAuditLog`` call (one block of up to 5,000
rows, its HTTP pages followed within the call) per activity, each written as a part of the chunk's object.

The lane carries where the chunk is (``ExchangeCursor``: which record type's session, its id, the next row index,
the count, the parts so far) from one call to the next, across worker processes and across continue-as-new, so an
execution never waits for more than one call per lane, and a retried call resumes the session instead of restarting
the chunk. The last call (the last session done) commits the parts into the chunk object.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field, replace

from activities.chunk_parts import ChunkParts, PartRecord, part_key
from shared.audit.exchange_paging import SessionBrokenError, SessionCursor
from shared.audit.http import AmbiguousResponseError
from shared.audit.ports import AuditFilters, AuditSearchApi
from shared.errors import NeedsSplitError, TransientApiError
from shared.models import ActivityResult, Chunk, JsonDict, filters_from_json

logger = logging.getLogger(__name__)

SESSION_RESTARTS = 2
"""New sessions one call may start when the one it continues broke (a gap, a repeat, an unknown outcome)."""


@dataclass(frozen=True)
class ExchangeCursor:
    """Where an Exchange lane is in its chunk, carried by the lane between calls (JSON in the lane's state)."""

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

    def to_json(self) -> JsonDict:
        return {
            "typeIndex": self.type_index,
            "sessionId": self.session_id,
            "nextIndex": self.next_index,
            "resultCount": self.result_count,
            "limit": self.limit,
            "parts": list(self.parts),
            "incomplete": self.incomplete,
        }

    @classmethod
    def from_json(cls, data: JsonDict | None) -> ExchangeCursor:
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
        )


def exchange_call(api: AuditSearchApi, parts: ChunkParts, payload: JsonDict) -> ActivityResult:
    """One call of the lane's chunk: ``{"cursor": ...}`` to go on, or ``{"summary": ...}`` once committed."""
    chunk = Chunk.from_json(payload["chunk"])
    filters = filters_from_json(payload.get("filters"))
    cursor = ExchangeCursor.from_json(payload.get("cursor"))
    key = part_key(int(payload.get("call", 0)))
    types = api.record_types(filters)
    # The same call run again (its worker died after the work, crash points C2/C8/C9) finds its part's record:
    # the session already moved on, so reading it again would skip a block. Its recorded outcome stands.
    record = parts.load(key)
    if record is None and (done := parts.committed([*cursor.parts, key])) is not None:
        return ActivityResult.success({"summary": done.to_json()})  # it was the last call, and it committed
    if record is None:
        try:
            record = _read_one_call(api, parts, key, cursor, _Call(chunk, filters, types, payload))
        except NeedsSplitError:
            parts.discard(cursor.parts)  # the halves write their own objects
            raise
    after = ExchangeCursor.from_json(record.outcome)
    if after.type_index < len(types):
        return ActivityResult.success({"cursor": after.to_json()})
    summary = parts.commit(list(after.parts), attempt=int(payload.get("attempt", 1)), incomplete=after.incomplete)
    return ActivityResult.success({"summary": summary.to_json()})


@dataclass(frozen=True)
class _Call:
    chunk: Chunk
    filters: AuditFilters
    types: list[str | None]
    payload: JsonDict


def _read_one_call(api: AuditSearchApi, parts: ChunkParts, key: str, cursor: ExchangeCursor, call: _Call) -> PartRecord:
    allow_over_cap = bool(call.payload.get("allowIncomplete", False))
    high = bool(call.payload.get("highCompleteness", False))
    while True:
        session = cursor.session()
        pages = api.read_block(
            call.chunk.window(),
            call.filters,
            session,
            record_type=call.types[cursor.type_index],
            high_completeness=high,
            allow_over_cap=allow_over_cap,
        )
        before = cursor

        def outcome(before: ExchangeCursor = before, session: SessionCursor = session) -> JsonDict:
            return before.after(session, key).to_json()

        try:
            return parts.write(key, pages, cursor.parts, outcome)
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
