"""What the budget parts see of the window (``BudgetHost``), and which of its lanes waits in the budget's queue.

The parts of the collection's tenant budget (``budget``: ``LaneBudget``, over ``budget_credits``, ``budget_calls``,
``budget_keep``) are pure like the window: they only return steps, and act on lanes through the window: the lane
transitions, and the source's lanes for where a granted lane goes on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Protocol

from shared.models import ActivityError
from shared.requests.collection_spec import CollectionSpec
from shared.window.lanes import SourceLanes
from shared.window.state import BUDGET, CallActivity, CallEntity, Carried, Lane, Step


class BudgetHost(Protocol):
    """The window as its budget sees it: its lanes and state, the lane transitions, its source's lanes."""

    @property
    def now(self) -> datetime: ...

    @property
    def spec(self) -> CollectionSpec: ...

    @property
    def state(self) -> Carried: ...

    @property
    def lanes(self) -> Mapping[int, Lane]: ...

    @property
    def source(self) -> SourceLanes: ...

    @property
    def switching(self) -> bool: ...

    def next_call(self, lane: Lane) -> list[Step]: ...

    def wait(self, lane: Lane, until: datetime) -> list[Step]: ...

    def error(self, lane: Lane, error: ActivityError) -> list[Step]: ...

    def conclude(self, lane: Lane, ending: tuple[str, object]) -> list[Step]: ...

    def call(self, lane: Lane) -> CallActivity | CallEntity: ...


def queued(lanes: Iterable[Lane]) -> Lane | None:
    """The lane that waits for tenant budget (answered "queued"): at most one per collection."""
    return next((lane for lane in lanes if lane.phase == BUDGET and lane.budget_waits), None)
