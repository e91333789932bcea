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
DEFAULT_RECORD_CAP = 1_000_000
"""Records one Graph audit query returns at most where the service does not say (learn.microsoft.com/graph/
throttling-limits: "at least 1,000,000 records per query"; PAX detects the cap as exactly that many)."""
EXPORT = "export"
EXPORT_INCOMPLETE = "export_incomplete"
"""A window that cannot be split any further but is over the cap: export what the query holds, reported incomplete."""


def record_cap(status: QueryStatus) -> int:
    """The query's record cap: ``recordCountLimit`` where the service says it, else 1,000,000."""
    limit = status.record_count_limit
    return limit if limit is not None and limit > 0 else DEFAULT_RECORD_CAP


def capped(status: QueryStatus) -> bool:
    """The query is over its cap: flagged (``isRecordCountLimitExceeded``, in the schema only since September 2026),
    or it says it holds as many records as the cap (an exact cap and a capped query cannot be told apart: split)."""
    count = status.approximate_record_count
    return status.record_count_limit_exceeded or (count is not None and count >= record_cap(status))


def graph_outcome(status: QueryStatus, *, splittable: bool, max_records: int) -> str:
    """The next step for a chunk whose query reported ``status``.

    A capped query (``capped``: the flag is not relied on alone) splits; ``max_records`` > 0 splits a finished query
    that reports more records than one export activity should stream (``COLLECTOR_MAX_RECORDS_PER_CHUNK``); a window
    that cannot be split is exported as it is. What the export itself finds (as many records as the cap, a short
    read) is ``activities.graph_export``'s.
    """
    if status.state is QueryState.PENDING:
        return PENDING
    if status.state is not QueryState.SUCCEEDED:
        return FAILED
    if capped(status):
        return SPLIT if splittable else EXPORT_INCOMPLETE
    count = status.approximate_record_count
    if max_records > 0 and count is not None and count > max_records and splittable:
        return SPLIT
    return EXPORT


RESUBMITS = 2
"""Times a chunk's Graph query is submitted again after it failed, vanished (404) or stayed unfinished past the limit:
each costs one of the tenant's daily submissions, so the bound is small (CIPP re-plans such searches too)."""
STUCK_SECONDS = 4 * 3600.0
"""A query still unfinished this long after its submission is given up on and resubmitted (CIPP re-plans searches
still running after four hours); ``RunOptions.max_polls`` status checks are the other bound."""


def stuck(polls: int, running_seconds: float, max_polls: int) -> bool:
    """A pending query checked ``max_polls`` times, or running ``STUCK_SECONDS``, is given up on."""
    return polls >= max_polls or running_seconds >= STUCK_SECONDS
