"""An Exchange chunk as a chain of short activities: one ``Search-UnifiedAuditLog`` call (one block of up to 5,000
rows, its HTTP pages followed within the call) per activity, each written as a part of the chunk's object.

The lane carries where the chunk is (``ExchangeCursor``: which record type's session, its id, the next row index,
the count, the parts so far) from one call to the next, across worker processes and across continue-as-new, so an
execution never waits for more than one call per lane, and a retried call resumes the session instead of restarting
the chunk. The cursor and one call, with the new sessions it may start when the session broke, live in
``shared.audit.exchange_session`` (``read_call``), which the ``doctor`` preflight reads its window through too. The
last call (the last session done) commits the parts into the chunk object.
"""

from __future__ import annotations

from activities.chunk_parts import ChunkParts, part_key
from shared.audit.exchange_session import BlockRead, ExchangeCursor, read_call
from shared.audit.ports import AuditSearchApi
from shared.errors import NeedsSplitError
from shared.models import ActivityResult, Chunk, JsonDict, filters_from_json
from shared.slot_deadline import SlotDeadline

__all__ = ["ExchangeCursor", "exchange_call"]


def exchange_call(api: AuditSearchApi, parts: ChunkParts, payload: JsonDict) -> ActivityResult:
    """One call of the lane's chunk: ``{"cursor": ...}`` to go on, or ``{"summary": ...}`` once committed."""
    filters = filters_from_json(payload.get("filters"))
    read = BlockRead(
        Chunk.from_json(payload["chunk"]).window(),
        filters,
        api.record_types(filters),
        high_completeness=bool(payload.get("highCompleteness", False)),
        allow_over_cap=bool(payload.get("allowIncomplete", False)),
    )
    cursor = ExchangeCursor.from_json(payload.get("cursor"))
    key = part_key(int(payload.get("call", 0)))
    # The same call run again (its worker died after the work, crash points C2/C8/C9) finds its part's record:
    # the session already moved on, so reading it again would skip a block. Its recorded outcome stands.
    record = parts.load(key)
    if record is None and (done := parts.committed([*cursor.parts, key])) is not None:
        return ActivityResult.success({"summary": done.to_json()})  # it was the last call, and it committed
    if record is None:
        deadline = SlotDeadline.of(payload)
        deadline.check("the call")  # the lane's budget slot must still be held
        try:
            with deadline.guarding(every_request=False):  # ...and still be when the call (or its retry) is sent
                record = read_call(
                    api,
                    read,
                    cursor,
                    lambda pages, after: parts.write(key, pages, cursor.parts, lambda: after(key).to_json()),
                )
        except NeedsSplitError:
            parts.discard(cursor.parts)  # the halves write their own objects
            raise
    after = ExchangeCursor.from_json(record.outcome)
    if after.type_index < len(read.types):
        return ActivityResult.success({"cursor": after.to_json()})
    summary = parts.commit(list(after.parts), attempt=int(payload.get("attempt", 1)), incomplete=after.incomplete)
    return ActivityResult.success({"summary": summary.to_json()})
