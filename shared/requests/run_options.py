"""Per-collection knobs (``RunOptions``), fixed when a collection starts and carried in its orchestration input."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.audit.exchange_paging import RESULT_SIZE
from shared.budget.wire import BudgetOptions
from shared.models import JsonDict
from shared.settings import Settings

WINDOW_VERSION = 2
"""The shape of the window's decisions a collection started now takes (``RunOptions.window_version``)."""

POLL_WAIT_SECONDS = 60.0
"""Window version 2: how long one Graph status-check activity may wait for its query (``RunOptions.poll_wait``)..."""
POLL_WAIT_CHECKS = 6
"""...and at most this many of the shortest intervals between checks (with the deployed 10 s, the 60 s above; the
tests' fast polls keep their waits as short as their polls)."""

TRANSITIONS_PER_EXECUTION = 100
"""Completions one execution handles before it continues as new (``RunOptions.transitions_per_execution``): about 4-5
history events each, so a history stays under about 500 events whatever the chunks' latency."""

POLL_LEAD = 0.9
"""The first status check of a query comes at this fraction of the expected running time ("a little before it")."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    """Per-collection knobs, fixed when the collection starts (so a settings change never alters a replay)."""

    max_concurrency: int = 3
    poll_interval_seconds: float = 30.0
    """The first status check of a query before any query of the collection finished (nothing learned yet)."""
    poll_min_interval_seconds: float = 10.0
    poll_fraction: float = 0.1
    """After the first check, the next comes ``fraction x the time the query has run`` later, within [min, max]."""
    poll_max_interval_seconds: float = 300.0
    max_polls: int = 240
    max_attempts: int = 4
    retry_base_seconds: float = 15.0
    retry_max_seconds: float = 600.0
    min_split_seconds: int = 60
    chunks_per_execution: int = 20
    max_records_per_chunk: int = 0
    delete_queries: bool = False
    """Send a DELETE for each Graph query once its chunk is decided (the service does not support it today)."""
    high_completeness: bool = False
    """Ask Exchange for completeness over speed (``-HighCompleteness``); set per request."""
    budget_capacity: int = 0
    """The tenant budget B of the collection's source (0: the collection takes no slots; also what an input written
    before the budget existed reads as, so such a collection goes on exactly as it started)."""
    budget_lease_seconds: float = 600.0
    budget_poll_seconds: float = 10.0
    budget_quota: int = 0
    """Graph: the collector's daily query submissions in the tenant (``BudgetOptions.quota``); 0 (Exchange, or an
    input written before the quota was kept): lanes take no submission credits."""
    retention_days: int = 0
    """How long the tenant is sure to keep every record (``COLLECTOR_RETENTION_DAYS`` when the collection started):
    older windows are flagged possibly partial. 0 (an input written before it existed): nothing is flagged."""
    exchange_target_records: int = 0
    """Exchange: a chunk expected to hold more records than this is split before its lane starts
    (``shared.sources.exchange.sizing``); 0 = no sizing (also what an input written before it existed reads as)."""
    exchange_target_records_continuing: int = 0
    """The same, once the service's sessions are known to continue (a fraction of the session cap)."""
    transitions_per_execution: int = 0
    """Completions (timers, results, budget answers) after which an execution continues as new even before it
    started ``chunks_per_execution`` chunks (0: no such bound, what an input written before issue 28 reads as)."""
    window_version: int = 0
    """The shape of the window's decisions, fixed when the collection starts so that its running executions replay
    as they ran: 0 (an input written before issue 28): a lane's budget slot is handed on only by chunks shorter than a
    poll, and each Graph submission asks the budget for its credit; 1: slots are kept across chunks while nobody
    waits and credits are taken a few at once (``BudgetOptions.keep``); 2: as 1, a Graph lane's status checks wait in
    the activity (``poll_wait_seconds``), and the slots' renewal goes out with a lane's episode when one comes in time,
    a timer of its own only when none does (``BudgetOptions.ride``)."""
    poll_wait_seconds: float = 0.0
    """Window version 2: a Graph status check due within this many seconds is made by an activity called at once,
    which waits for it and goes on checking on the same schedule until its query is finished or this bound passed
    (one activity, one orchestration episode, instead of a timer and an activity per check). 0: a timer per check."""
    source_options: JsonDict = field(default_factory=dict)
    """What the collection's source fixed when it started, in its own words (``shared.sources``: a source added later
    keeps its knobs here rather than in new fields). Left out of the JSON when empty, so the inputs of the sources
    that need none stay as they were."""

    @property
    def budget(self) -> BudgetOptions:
        return BudgetOptions(
            self.budget_capacity,
            self.budget_lease_seconds,
            self.budget_poll_seconds,
            self.budget_quota,
            keep=self.window_version >= 1,
            ride=self.window_version >= 2,
        )

    @classmethod
    def from_settings(
        cls, settings: Settings, max_concurrency: int, *, budget: BudgetOptions, high_completeness: bool = False
    ) -> RunOptions:
        """The options of a collection started now: from the settings, with its source's tenant budget (a source
        builds them: ``shared.sources``)."""
        return cls(
            max_concurrency=max_concurrency,
            poll_interval_seconds=settings.poll_interval_seconds,
            poll_min_interval_seconds=settings.poll_min_interval_seconds,
            poll_fraction=settings.poll_fraction,
            poll_max_interval_seconds=settings.poll_max_interval_seconds,
            max_polls=settings.max_polls,
            max_attempts=settings.max_attempts,
            retry_base_seconds=settings.retry_base_seconds,
            retry_max_seconds=settings.retry_max_seconds,
            min_split_seconds=settings.min_split_seconds,
            chunks_per_execution=settings.chunks_per_execution,
            max_records_per_chunk=settings.max_records_per_chunk,
            delete_queries=settings.delete_queries,
            high_completeness=high_completeness,
            budget_capacity=budget.capacity,
            budget_lease_seconds=budget.lease_seconds,
            budget_poll_seconds=budget.poll_seconds,
            budget_quota=budget.quota,
            retention_days=settings.retention_days,
            window_version=WINDOW_VERSION,
            poll_wait_seconds=min(
                POLL_WAIT_SECONDS,
                POLL_WAIT_CHECKS * min(settings.poll_min_interval_seconds, settings.poll_max_interval_seconds),
            ),
            transitions_per_execution=TRANSITIONS_PER_EXECUTION,
            exchange_target_records=round(
                settings.exchange_target_fraction * min(RESULT_SIZE, settings.audit.exchange_session_cap)
            ),
            exchange_target_records_continuing=round(
                settings.exchange_target_fraction * settings.audit.exchange_session_cap
            ),
        )

    @property
    def poll_wait(self) -> float:
        """Seconds a Graph status-check activity may wait in-process (0 before window version 2)."""
        return self.poll_wait_seconds if self.window_version >= 2 else 0.0

    def first_poll(self, expected: float | None) -> float:
        """Seconds from a query's submission to its first status check.

        ``expected`` is what this collection learned about its queries (the shortest recent running time): the first
        check comes a little before it, so a query like the others is found finished at the first or second check.
        """
        first = self.poll_interval_seconds if expected is None else POLL_LEAD * expected
        return max(first, self._poll_floor())

    def next_poll(self, running: float) -> float:
        """Seconds until the next status check of a query that has run ``running`` seconds and is not finished.

        A query that finishes between two checks is noticed at most ``poll_fraction x`` its running time late (when
        the interval is within [min, max]): the checks adapt to how long the query has run.
        """
        return min(max(self.poll_fraction * running, self._poll_floor()), self.poll_max_interval_seconds)

    def _poll_floor(self) -> float:
        """The shortest interval between checks: the minimum, unless the maximum is lower (a cap is a cap)."""
        return min(self.poll_min_interval_seconds, self.poll_max_interval_seconds)

    def retry_delay(self, failed_attempts: int, retry_after: float | None) -> float:
        """Seconds before the next attempt: exponential from the base, capped, never below Retry-After."""
        delay: float = min(self.retry_base_seconds * float(2 ** max(0, failed_attempts - 1)), self.retry_max_seconds)
        return max(delay, retry_after or 0.0)

    def to_json(self) -> JsonDict:
        out = {name: getattr(self, name) for name in self.__slots__}
        if not self.source_options:
            del out["source_options"]
        else:
            out["source_options"] = dict(self.source_options)
        return out

    @classmethod
    def from_json(cls, data: JsonDict) -> RunOptions:
        """Unknown keys (an option of an older or newer version) are ignored; missing ones take their default."""
        known = {name: data[name] for name in cls.__slots__ if name in data}
        if "source_options" in known:
            known["source_options"] = dict(known["source_options"] or {})
        return cls(**known)
