"""The parts of an Exchange ``ReturnLargeSet`` session that do not talk HTTP: row fields and the integrity checks.

A session is read in cmdlet calls (each takes the next block of up to ``ResultSize`` rows), and each call's block
arrives in HTTP pages. ``ResultIndex`` must run on without a gap or a repeat across pages *and* across calls, and
``ResultCount`` must not change; anything else means the session is broken, and it is started over.
"""

from __future__ import annotations

from typing import Any

from shared.errors import TransientApiError


class SessionBrokenError(TransientApiError):
    """The session's rows stopped adding up (a gap, a repeat, a changed count, an early end): start it over."""


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
    """The service says "nothing" either with an empty list or with one row whose ResultCount is 0."""
    return not rows or (len(rows) == 1 and isinstance(rows[0], dict) and int_field(rows[0], "ResultCount") == 0)


class SessionCursor:
    """Integrity checks of one session: contiguous ``ResultIndex`` and a stable ``ResultCount``."""

    def __init__(self, session_id: str, limit: int | None = None) -> None:
        self.session_id = session_id
        self.result_count: int | None = None
        self.next_index = 1
        self.limit = limit
        """Stop after this many rows even when ``ResultCount`` is larger (paging a session up to its cap)."""

    @property
    def done(self) -> bool:
        if self.result_count is None:
            return False
        last = self.result_count if self.limit is None else min(self.result_count, self.limit)
        return self.next_index > last

    def within_limit(self, rows: list[Any]) -> list[Any]:
        """The rows up to the limit (a page may straddle it)."""
        if self.limit is None:
            return rows
        return rows[: max(0, self.limit - self.next_index + 1)]

    def accept(self, rows: list[Any]) -> None:
        indexes: list[int] = []
        for row in rows:
            count = int_field(row, "ResultCount") if isinstance(row, dict) else None
            index = int_field(row, "ResultIndex") if isinstance(row, dict) else None
            if count is None or index is None or index < 1:
                raise SessionBrokenError(f"session {self.session_id}: row without a valid ResultIndex/ResultCount")
            if self.result_count is None:
                self.result_count = count
            elif count != self.result_count:
                raise SessionBrokenError(
                    f"session {self.session_id}: ResultCount changed from {self.result_count} to {count}"
                )
            indexes.append(index)
        expected = list(range(self.next_index, self.next_index + len(indexes)))
        if sorted(indexes) != expected:
            raise SessionBrokenError(
                f"session {self.session_id}: ResultIndex not contiguous (expected {self.next_index}.."
                f"{self.next_index + len(indexes) - 1}, got {min(indexes)}..{max(indexes)})"
            )
        self.next_index += len(indexes)
