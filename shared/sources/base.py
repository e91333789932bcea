"""What a source is: the ``Source`` protocol every audit source implements, and the defaults most share.

A source owns everything that differs between the audit APIs, and nothing outside its own files decides by its name:

* **request rules** (``shared.requests.source_rules.SourceRules``): the tenant forms it can address, how far back it
  reads, the filters and options it can apply, the cloud it exists in, its default chunk length;
* **run options and budget**: the collection's ``RunOptions`` (its own knobs in ``source_options``) and its tenant
  budget (keyed by the tenant's GUID and the source's name, ``settings.budget(name)`` slots);
* **the window's lanes** (``lanes``: the phases a chunk goes through, which activity each calls with which typed
  input, what each result means, what the collection learns and carries across continue-as-new);
* **what it publishes**: its section of the window's status, the summary (``status_key``), its manifest fields
  (``manifest``), its plan report's fields and warnings (``plan``, and a follower's: ``follow_plan``, with the
  follower windows it accepts), and its evidence of completeness in each chunk's
  summary.

The registry (``shared.sources.registry``) maps names to sources: one line per source. Its activities are registered in
``function_app.py`` and its doctor probes in ``shared.doctor.sources``, one line each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from shared.budget.wire import BudgetOptions
from shared.models import Chunk, JsonDict
from shared.requests.collection_spec import CollectionSpec
from shared.requests.run_options import RunOptions
from shared.settings import Settings
from shared.values import AuditFilters
from shared.window.lanes import SourceLanes
from shared.window.state import Carried


@dataclass(frozen=True, slots=True)
class SourcePlan:
    """A source's part of a plan report: its fields and its warnings."""

    fields: JsonDict = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FollowAccess:
    """What a follower's start found of a feed: whether it reads it, why, and (when the start had to start a
    subscription) from when on it lists content."""

    usable: bool
    why: str
    since: datetime | None = None


@dataclass(frozen=True, slots=True)
class FollowLoad:
    """What a follower's search source reads (``http_api.follow_reads.search_load``): ``per_day`` windows a day once
    caught up, and ``backlog`` windows once (those the feed cannot cover when it starts: older than its look-back,
    before a subscription it had to start). Without the feed (``feed`` false) search reads every window twice."""

    per_day: int
    backlog: int = 0
    feed: bool = False
    samples: int = 0
    """Of ``per_day``, the reconcile's samples (windows the feed read, read again by search)."""
    reconcile_hours: float = 0.0


class Source(Protocol):
    """One audit source (see the module docstring for what it owns)."""

    @property
    def name(self) -> str: ...

    @property
    def high_completeness(self) -> bool: ...

    @property
    def status_key(self) -> str:
        """The key of its section in the window's status, the collection's output and summary."""
        ...

    def default_interval_minutes(self, settings: Settings) -> int: ...

    def check_range(self, start: datetime, now: datetime, settings: Settings) -> None: ...

    def check_tenant(self, tenant_id: str) -> None: ...

    def check_cloud(self, settings: Settings) -> None: ...

    def check_filters(self, filters: AuditFilters) -> None: ...

    def budget(self, settings: Settings) -> BudgetOptions:
        """Its tenant budget: ``settings.budget(name)`` (capacity 0: none)."""
        ...

    def run_options(self, settings: Settings, max_concurrency: int, *, high_completeness: bool) -> RunOptions: ...

    def lanes(self, spec: CollectionSpec, state: Carried) -> SourceLanes:
        """The window's lanes of one collection of this source (built on every replay from its carried state)."""
        ...

    def plan(
        self,
        *,
        chunks: int,
        settings: Settings,
        ranges: Sequence[Chunk],
        now: datetime,
        interval_minutes: int | None = None,
        quota: JsonDict | None = None,
        settle: bool = False,
    ) -> SourcePlan:
        """Its part of a collection's plan (``quota``: the tenant's daily submissions as its budget entity says them,
        None when the budget keeps none; ``settle``: a settle pass reads the provisional windows again)."""
        ...

    def follow_default(self, settings: Settings) -> int:
        """A follower's window when its request names none."""
        ...

    def follow_refusal(self, settings: Settings, interval_minutes: int, load: FollowLoad | None = None) -> str | None:
        """Why a follower with these windows cannot run (None: it can); ``load``: what this source reads of it when
        the follower reads a feed (None: every window, read twice)."""
        ...

    def follow_plan(
        self, settings: Settings, interval_minutes: int, quota: JsonDict | None, load: FollowLoad | None = None
    ) -> SourcePlan:
        """Its part of a follower's plan (``load`` as for ``follow_refusal``)."""
        ...

    def manifest(self, payload: JsonDict) -> JsonDict:
        """Its manifest fields from the finalize activity's input."""
        ...

    @property
    def follower_feed(self) -> bool:
        """A follower reads its windows from this source where it can, by its search source the rest (the feed)."""
        ...

    def follow_reach(self) -> timedelta | None:
        """How far back a follower's read of a window may lie (None: as far as the retention)."""
        ...

    def follow_access(self, settings: Settings, tenant_id: str) -> FollowAccess:
        """Whether a follower starting now may read this source in ``tenant_id`` (I/O: asks the service)."""
        ...


class SourceDefaults:
    """What a source that does not say otherwise does: any tenant form, any look-back, every filter, every cloud, no
    ``highCompleteness``; the run options and budget from the settings. A source overrides what differs."""

    name = ""
    high_completeness = False
    follower_feed = False

    def check_range(self, start: datetime, now: datetime, settings: Settings) -> None:
        return None

    def check_tenant(self, tenant_id: str) -> None:
        return None

    def check_cloud(self, settings: Settings) -> None:
        return None

    def check_filters(self, filters: AuditFilters) -> None:
        return None

    def budget(self, settings: Settings) -> BudgetOptions:
        return settings.budget(self.name)

    def run_options(self, settings: Settings, max_concurrency: int, *, high_completeness: bool) -> RunOptions:
        return RunOptions.from_settings(
            settings, max_concurrency, budget=self.budget(settings), high_completeness=high_completeness
        )

    def plan(
        self,
        *,
        chunks: int,
        settings: Settings,
        ranges: Sequence[Chunk],
        now: datetime,
        interval_minutes: int | None = None,
        quota: JsonDict | None = None,
        settle: bool = False,
    ) -> SourcePlan:
        return SourcePlan()

    def follow_default(self, settings: Settings) -> int:
        return settings.follow_every_minutes

    def follow_refusal(self, settings: Settings, interval_minutes: int, load: FollowLoad | None = None) -> str | None:
        return None

    def follow_plan(
        self, settings: Settings, interval_minutes: int, quota: JsonDict | None, load: FollowLoad | None = None
    ) -> SourcePlan:
        return SourcePlan()

    def manifest(self, payload: JsonDict) -> JsonDict:
        return {}

    def follow_reach(self) -> timedelta | None:
        return None

    def follow_access(self, settings: Settings, tenant_id: str) -> FollowAccess:
        return FollowAccess(True, f"{self.name} needs no check")
