"""What the window asks of a collection's source, and what it offers the source's lanes in return: two protocols.

The window (``shared.window.machine.CollectionWindow``) knows no source: it starts lanes, issues their calls, times
them, retries, splits, parks and carries them, keeps the tenant budget's slots (``shared.window.budget``), and asks
the source's ``SourceLanes`` (one per window, built by the source from the collection's spec and carried state:
``shared.sources``) everything that depends on the source: a lane's phases, which activity its next call is with which
input, what a successful result means, what the collection learns, what it publishes. The source's lanes act on a
lane through the ``LaneHost`` the window is, never on the window's internals.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Protocol

from shared.models import ActivityError, ActivityResult, Chunk, JsonDict
from shared.requests.collection_spec import CollectionSpec
from shared.requests.run_options import RunOptions
from shared.window.calls import ChunkCall
from shared.window.state import CallActivity, Carried, Failure, Lane, Step


class LaneHost(Protocol):
    """The window as a source's lanes see it: the lane transitions they may ask for, and what they may read."""

    @property
    def now(self) -> datetime:
        """The orchestration's ``current_utc_datetime``."""
        ...

    @property
    def spec(self) -> CollectionSpec: ...

    @property
    def options(self) -> RunOptions: ...

    @property
    def state(self) -> Carried: ...

    @property
    def switching(self) -> bool:
        """The execution has started its chunks and will continue as new once no call is in flight."""
        ...

    def calls_end(self) -> datetime | None:
        """When the activities in flight should all have ended (None: none is)."""
        ...

    def wait(self, lane: Lane, until: datetime) -> list[Step]:
        """The lane's next step after a timer (parked when the window switches executions)."""
        ...

    def next_call(self, lane: Lane) -> list[Step]:
        """The lane's next activity call, now (or parked)."""
        ...

    def conclude(self, lane: Lane, ending: tuple[str, object]) -> list[Step]:
        """The chunk is decided: ("done", summary JSON), ("failed", Failure) or ("split", None)."""
        ...

    def end(self, lane: Lane) -> list[Step]:
        """The lane ends with its ``ending`` (after the source's clean-up)."""
        ...

    def failure(self, lane: Lane, error: ActivityError) -> Failure: ...

    def splittable(self, chunk: Chunk) -> bool: ...


class SourceLanes(Protocol):
    """A collection's lanes as its source runs them."""

    @property
    def first_phase(self) -> str:
        """The phase a new lane starts in (after its budget slot, when there is a budget)."""
        ...

    @property
    def added_chunks(self) -> int:
        """Chunks the source added to the plan besides splits (Exchange: pre-split pieces), for the total."""
        ...

    def resume_phase(self, lane: Lane) -> str:
        """Where a lane granted a slot goes on: its first phase, or where it stopped when its slot was lost."""
        ...

    def uses_slot(self, phase: str) -> bool:
        """Whether a call of this phase does server-side work under the lane's budget slot."""
        ...

    def submits(self, phase: str) -> bool:
        """Whether a call of this phase submits a query that costs a credit of the tenant's daily quota (Graph's
        submit), taken from the tenant budget before it is made when the budget keeps a quota."""
        ...

    def has_progress(self, lane: Lane) -> bool:
        """The lane did server-side work it would lose by giving its chunk back (a query, a session cursor)."""
        ...

    def may_start(self, lanes: Mapping[int, Lane]) -> bool:
        """Whether another lane may start besides ``lanes`` (Exchange: the first lane probes the tenant alone)."""
        ...

    def sized(self, host: LaneHost, chunk: Chunk) -> Chunk:
        """The chunk a new lane takes: ``chunk``, or its first piece (the others put first in ``state.requeued``)."""
        ...

    def learn(self, lane: Lane, result: ActivityResult) -> None:
        """Take in what any result of the lane's call shows (before the window looks at it)."""
        ...

    def call(self, lane: Lane, base: ChunkCall) -> CallActivity:
        """The lane's next call: the activity of its phase with its typed input (``base``: what every call carries)."""
        ...

    def ended(self, host: LaneHost, lane: Lane, result: ActivityResult) -> list[Step] | None:
        """The result of a clean-up call (a Graph query's DELETE) ends the lane, whatever it says; None otherwise."""
        ...

    def succeeded(
        self, host: LaneHost, lane: Lane, result: ActivityResult, checked_at: datetime | None, due: datetime | None
    ) -> list[Step]:
        """A successful result: the lane's next step (``checked_at``: when the call was issued; ``due``: when the
        timer before it was due)."""
        ...

    def concluding(self, host: LaneHost, lane: Lane) -> list[Step] | None:
        """The chunk is decided: a clean-up call before the lane ends (None: it ends now)."""
        ...

    def status(self) -> JsonDict:
        """The source's section of the window's status and output (``{status_key: ...}``)."""
        ...

    def save(self, state: Carried) -> None:
        """Write what the source learned and counted into ``state.sections`` (before a switch carries it)."""
        ...
