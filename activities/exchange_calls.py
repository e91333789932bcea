"""An Exchange chunk as a chain of short activities: one ``Search-UnifiedAuditLog`` call (one block of up to 5,000
rows, its HTTP pages followed within the call) per activity, each written as a part of the chunk's object.

The lane carries where the chunk is (``ExchangeCursor``: which record type's session, its id, the next row index,
the calls so far, the evidence that closed the record types already read) from one call to the next, across worker
processes and across continue-as-new, so an execution never waits for more than one call per lane, and a retried
call resumes the session instead of restarting the chunk. The cursor and one call, judged by its evidence, live in
``shared.audit.exchange_session`` (``read_call``), which the ``doctor`` preflight reads its window through too. A
record type is done only when a call proved it (fewer rows than asked, an empty first call, ``moreRecordsAvailable:
false``); when its session cannot be trusted the window is split, and a window at the minimum split is committed with
what was read and reported incomplete with the reason. An empty (or bogus) first answer is asked again in a fresh
session before a record type is closed as empty; how many agreeing answers it takes depends on what the window
expects (``expectedRecords``, from the density the collection learned: ``exchange_evidence.EmptyRule``). The last
call (the last session done) commits the parts into the chunk object, with the evidence in its summary.

Every result carries ``exchange``: what this activity's calls cost and showed (calls, full calls, the rows of the
densest record type so far, whether the service's sessions continued), which the collection window learns the
tenant's density from and reports.
"""

from __future__ import annotations

from activities.chunk_parts import ChunkParts, part_key
from shared.audit.exchange_evidence import EmptyRule
from shared.audit.exchange_session import BlockRead, ExchangeCursor, read_call
from shared.audit.ports import AuditSearchApi
from shared.budget.slot_deadline import SlotDeadline
from shared.errors import NeedsSplitError
from shared.models import ActivityResult, JsonDict
from shared.sources.exchange.calls import ExchangeCall, ExchangeCalled

__all__ = ["ExchangeCursor", "exchange_call"]


def _answers(cursor: ExchangeCursor) -> JsonDict:
    """The chunk's confirmations and false answers, when it had any (the tallies stay as they were otherwise)."""
    tally = {"confirmations": cursor.confirmations, "falseAnswers": cursor.false_answers}
    return {k: v for k, v in tally.items() if v}


def exchange_call(api: AuditSearchApi, parts: ChunkParts, call: ExchangeCall) -> ActivityResult:
    """One call of the lane's chunk: where the next goes on (``cursor``), or the ``summary`` once committed."""
    base = call.call
    filters = base.filters
    read = BlockRead(
        base.chunk.window(),
        filters,
        api.record_types(filters),
        high_completeness=base.high_completeness,
        splittable=not base.allow_incomplete,
        session_cap=int(getattr(api, "session_cap", 50_000)),
        split_on_full=call.split_on_full,
        empty_rule=EmptyRule(call.expected_records),
    )
    cursor = ExchangeCursor.from_json(call.cursor)
    key = part_key(call.number)
    # The same call run again (its worker died after the work, crash points C2/C8/C9) finds its part's record:
    # the session already moved on, so reading it again would skip a block. Its recorded outcome stands.
    record = parts.load(key)
    if record is None and (done := parts.committed([*cursor.parts, key])) is not None:
        # It was the last call, and it committed: what the chunk's calls cost is in the summary's own tallies.
        tally = done.exchange or {}
        spent = {
            "calls": int(tally.get("calls", 0)) - cursor.chunk_calls,
            "fullCalls": int(tally.get("fullCalls", 0)) - cursor.chunk_full_calls,
            "rows": int(tally.get("rows", 0)),
            "exact": not done.incomplete,
            "continues": tally.get("continues"),
            "hint": int(tally.get("hint", 0)),
        }
        for name, before in (("confirmations", cursor.confirmations), ("falseAnswers", cursor.false_answers)):
            if int(tally.get(name, 0)) - before:
                spent[name] = int(tally.get(name, 0)) - before
        return ActivityResult.success(ExchangeCalled(summary=done.to_json(), stats=spent).to_json())
    if record is None:
        deadline = SlotDeadline.of(base.slot_json)
        deadline.check("the call")  # the lane's budget slot must still be held
        try:
            with deadline.guarding(every_request=False):  # ...and still be when the call (or its retry) is sent
                record = read_call(
                    api,
                    read,
                    cursor,
                    lambda pages, after: parts.write(
                        key, pages, cursor.parts, lambda repeats: after(key, repeats).to_json()
                    ),
                )
        except NeedsSplitError as exc:
            parts.discard(cursor.parts)  # the halves write their own objects
            if exc.evidence is None:  # announced over the session cap by the call's first row: one call spent
                hint = exc.reported_count or 0
                exc.evidence = {"calls": 1, "fullCalls": 0, "rows": cursor.max_rows, "exact": False, "hint": hint}
            raise
    after = ExchangeCursor.from_json(record.outcome)
    if after.type_index < len(read.types):
        going_on = ExchangeCalled(cursor=after.to_json(), stats=after.stats(since=cursor, exact=False))
        return ActivityResult.success(going_on.to_json())
    summary = parts.commit(
        list(after.parts),
        attempt=base.attempt,
        incomplete=after.incomplete,
        evidence=after.evidence,
        exchange={
            "calls": after.chunk_calls,
            "fullCalls": after.chunk_full_calls,
            "rows": after.max_rows,
            "continues": after.continues,
            "hint": after.hint,
            **_answers(after),
        },
    )
    committed = ExchangeCalled(summary=summary.to_json(), stats=after.stats(since=cursor, exact=not after.incomplete))
    return ActivityResult.success(committed.to_json())
