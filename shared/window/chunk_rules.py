"""What to do with a chunk whose Graph query answered a status check: a pure rule shared by activity and window.

The Graph collect activity checks the query and, when it is finished and needs no split, exports it at once; the
orchestrator only follows the outcome. Both read the same inputs (the query's status and the lane's options in the
activity payload), so the decision lives here, once.
"""

from __future__ import annotations

from shared.audit.ports import QueryState, QueryStatus

PENDING = "pending"
"""Still running: check again later."""
FAILED = "failed"
"""The query ended failed or cancelled: the chunk fails with the service's status."""
SPLIT = "split"
"""Over the source's cap, or over the records one export may carry: split the window in halves."""
EXPORT = "export"
EXPORT_INCOMPLETE = "export_incomplete"
"""A window that cannot be split any further but is over the cap: export what the query holds, reported incomplete."""


def can_split(chunk_seconds: float, min_split_seconds: float) -> bool:
    """Halves of the window would still be at least the minimum split."""
    return chunk_seconds / 2 >= min_split_seconds


def graph_outcome(status: QueryStatus, *, splittable: bool, max_records: int) -> str:
    """The next step for a chunk whose query reported ``status``.

    ``max_records`` > 0 splits a finished query that reports more records than one export activity should stream
    (``COLLECTOR_MAX_RECORDS_PER_CHUNK``); a window that cannot be split is exported as it is.
    """
    if status.state is QueryState.PENDING:
        return PENDING
    if status.state is not QueryState.SUCCEEDED:
        return FAILED
    if status.record_count_limit_exceeded:
        return SPLIT if splittable else EXPORT_INCOMPLETE
    count = status.approximate_record_count
    if max_records > 0 and count is not None and count > max_records and splittable:
        return SPLIT
    return EXPORT
