"""What one ``Search-UnifiedAuditLog`` session hands out, call after call, and what it says about itself.

A ``ReturnLargeSet`` session walks the time-ordered record stream of its window: each call takes the next block of at
most ``ResultSize`` rows, and no more than ``session_cap`` (50,000) rows ever come out of one session. Since 2026 the
real service no longer reports the window's total in ``ResultCount`` (Microsoft-Extractor-Suite 4.1 release notes,
its issue #199), and its sessions are not known to continue (that collector gave up session paging; its issue #129
shows a session that over-delivered and then started over). So the emulator's knobs (``ExchangeSettings``):

* ``result_count``: "total" (the old service: everything matched), "capped" (default: the smaller of ``ResultSize``
  and the total), "size" (the ``ResultSize`` asked, always);
* ``over_delivery``: the service believes the window holds this fraction fewer records than it delivers, and
  announces that (default 0.06: #129's 23,391 announced for 25,000 delivered);
* ``session_mode``: "continue" (each call goes on where the last ended), "restart" (default: a later call of a
  SessionId starts over at index 1), "empty" (later calls return nothing);
* ``more_records_available``: "absent" (default) or "present" (each page carries
  ``AuditSearchRequestMetadata.moreRecordsAvailable``, honest: whether the window holds rows this session has not
  handed out yet).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from m365_emulator.config import ExchangeSettings, TenantSpec
from m365_emulator.stream import RecordFilter, count_matching, iter_matching
from m365_emulator.synth import Cursor, SynthRecord

Row = Callable[[SynthRecord, str, int, int], dict[str, Any]]
"""Builds a row from (record, runspace id, ResultIndex, ResultCount)."""


@dataclass
class Session:
    start: datetime
    end: datetime
    flt: RecordFilter
    cap: int
    total: int = -1
    """Records the window matches (-1: not counted yet)."""
    cursor: Cursor | None = None
    returned: int = 0
    """Rows handed out since the session (re)started at index 1."""
    calls: int = 0
    runspace: str = field(default_factory=lambda: str(uuid.uuid4()))
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


@dataclass(frozen=True)
class Block:
    rows: list[dict[str, Any]]
    afters: list[Cursor]
    """The stream cursor just after each row (where a nextLink page goes on)."""
    result_count: int
    more: bool
    """The window holds rows this session has not handed out (honest)."""
    start: Cursor | None = None
    """The stream cursor just before the block's first row (where a page of a shuffled block is rebuilt from)."""


def announced(settings: ExchangeSettings, total: int, size: int) -> int:
    """The ``ResultCount`` a call asking ``size`` rows sees."""
    believed = int(total * (1.0 - settings.over_delivery))
    if settings.result_count == "total":
        return believed
    if settings.result_count == "capped":
        return min(size, believed)
    return size


def next_block(session: Session, spec: TenantSpec, size: int, settings: ExchangeSettings, row: Row) -> Block:
    """The session's next call: its block of rows, each with the stream cursor just after it."""
    with session.lock:  # two calls on one SessionId get consecutive blocks, never the same one
        start, end = session.start.timestamp(), session.end.timestamp()
        if session.total < 0:
            session.total = count_matching(spec, start, end, session.flt)
        session.calls += 1
        count = announced(settings, session.total, size)
        if session.calls > 1 and settings.session_mode == "restart":
            session.returned, session.cursor = 0, None
        elif session.calls > 1 and settings.session_mode == "empty":
            return Block([], [], count, session.returned < session.total)
        want = min(size, min(session.cap, session.total) - session.returned)
        rows: list[dict[str, Any]] = []
        afters: list[Cursor] = []
        before = session.cursor
        if want > 0:
            for record, after in iter_matching(spec, start, end, session.flt, session.cursor):
                session.returned += 1
                rows.append(row(record, session.runspace, session.returned, count))
                afters.append(after)
                session.cursor = after
                if len(rows) >= want:
                    break
        return Block(rows, afters, count, session.returned < session.total, before)
